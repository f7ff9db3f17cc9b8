package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	yaml "go.yaml.in/yaml/v3"

	"github.com/modelcalls/modelcalls"
)

// Top-level config keys read by modelcalls; both are reserved run-wide names in NeMo Gym, read only at
// the top level of the global config (a server's own block may not set them).
const (
	// KeyObservabilityEnabled ("observability_enabled", bool, default false) turns model-call capture
	// on for the whole run.
	KeyObservabilityEnabled = "observability_enabled"
	// KeyModelCallCaptureDir ("model_call_capture_dir", absolute path) is the capture directory; it is
	// required and must be absolute when capture is enabled, and ignored otherwise.
	KeyModelCallCaptureDir = "model_call_capture_dir"
)

// Values is a Gym global config: top-level key to decoded YAML value. Values are what YAML decoding
// into `any` gives: map[string]any, []any, string, bool, int, float64 or nil.
type Values map[string]any

// Load reads a YAML config file whose top level is a mapping. An empty file (or one holding only
// comments or null) gives empty Values. Errors name the file: unreadable, not YAML, or a top level
// that is not a mapping with string keys.
func Load(path string) (Values, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	v, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return v, nil
}

// Parse decodes YAML config text (see Load). A document stream with more than one document is an
// error, as Gym's loader reads one mapping per file.
func Parse(data []byte) (Values, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc any
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Values{}, nil
		}
		return nil, fmt.Errorf("parse yaml: %w", err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, fmt.Errorf("parse yaml: %w", err)
		}
		return nil, errors.New("parse yaml: more than one document")
	}
	switch m := doc.(type) {
	case nil:
		return Values{}, nil
	case map[string]any:
		return Values(m), nil
	default:
		return nil, fmt.Errorf("top level is %s, want a mapping of names to values", yamlKind(doc))
	}
}

func yamlKind(v any) string {
	switch v.(type) {
	case map[string]any, map[any]any:
		return "a mapping with non-string keys"
	case []any:
		return "a list"
	case string:
		return "a string"
	case nil:
		return "null"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

// Capture is the typed run-wide capture configuration: NeMo Gym's two reserved top-level keys.
type Capture struct {
	Enabled bool   // observability_enabled
	Dir     string // model_call_capture_dir; "" when capture is disabled
}

// Capture returns the capture options of v, with the rules of modelcalls.CaptureDirsFromConfig
// (the one implementation of them): when observability_enabled is true (a pydantic lax-mode bool,
// see modelcalls.ObservabilityEnabled) model_call_capture_dir must be a non-empty absolute path
// string, else the error says it is required, must be a path string or must be absolute; Dir is
// then the dir cleaned. When disabled (the key absent, null or false) the dir is ignored and Dir is
// "", even if the dir is relative. A non-boolean observability_enabled is an error naming the key.
func (v Values) Capture() (Capture, error) {
	dirs, err := modelcalls.CaptureDirsFromConfig(v)
	if err != nil || len(dirs) == 0 {
		return Capture{}, err
	}
	return Capture{Enabled: true, Dir: dirs[0]}, nil
}

// CaptureDirs returns the capture directories of v: none when capture is disabled, else the one
// run-wide dir (Gym's model_call_capture_dirs_from_config). It validates like Capture.
func (v Values) CaptureDirs() ([]string, error) {
	return modelcalls.CaptureDirsFromConfig(v)
}
