package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Top-level config keys read by modelcalls; both are reserved run-wide names in NeMo Gym (reference §1).
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

// Capture is the typed run-wide capture configuration (reference §1).
type Capture struct {
	Enabled bool   // observability_enabled
	Dir     string // model_call_capture_dir; "" when capture is disabled
}

// Capture returns the capture options of v. When observability_enabled is true (pydantic lax bool
// forms accepted, see ParseBool) model_call_capture_dir must be a non-empty absolute path, else the
// error says it is required or must be absolute. When disabled the dir is ignored (Dir is ""), even
// if relative. A non-boolean observability_enabled is an error naming the key.
func (v Values) Capture() (Capture, error) {
	raw, ok := v[KeyObservabilityEnabled]
	if !ok || raw == nil {
		return Capture{}, nil
	}
	enabled, err := ParseBool(raw)
	if err != nil {
		return Capture{}, fmt.Errorf("%s: %w", KeyObservabilityEnabled, err)
	}
	if !enabled {
		return Capture{}, nil
	}
	dirRaw, ok := v[KeyModelCallCaptureDir]
	if !ok || dirRaw == nil {
		return Capture{}, fmt.Errorf("%s is required when %s is true", KeyModelCallCaptureDir, KeyObservabilityEnabled)
	}
	dir, ok := dirRaw.(string)
	if !ok {
		return Capture{}, fmt.Errorf("%s must be a path string, got %s", KeyModelCallCaptureDir, yamlKind(dirRaw))
	}
	if dir == "" {
		return Capture{}, fmt.Errorf("%s is required when %s is true", KeyModelCallCaptureDir, KeyObservabilityEnabled)
	}
	if !filepath.IsAbs(dir) {
		return Capture{}, fmt.Errorf("%s must be an absolute path when %s is true, got %q", KeyModelCallCaptureDir, KeyObservabilityEnabled, dir)
	}
	return Capture{Enabled: true, Dir: filepath.Clean(dir)}, nil
}

// CaptureDirs returns the capture directories of v: none when capture is disabled, else the one
// run-wide dir (Gym's model_call_capture_dirs_from_config). It validates like Capture.
func (v Values) CaptureDirs() ([]string, error) {
	c, err := v.Capture()
	if err != nil || !c.Enabled {
		return nil, err
	}
	return []string{c.Dir}, nil
}

// ParseBool converts a config value to a bool the way pydantic's lax mode does (Gym validates the
// flag with pydantic, and override parsers hand it strings): a bool as is; the integers 0 and 1; the
// floats 0.0 and 1.0; the strings "0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y",
// "yes" in any case, surrounding spaces ignored. Anything else is an error.
func ParseBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case int:
		if x == 0 || x == 1 {
			return x == 1, nil
		}
	case float64:
		if x == 0 || x == 1 {
			return x == 1, nil
		}
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "0", "off", "f", "false", "n", "no":
			return false, nil
		case "1", "on", "t", "true", "y", "yes":
			return true, nil
		}
		return false, fmt.Errorf("%q is not a boolean (want true or false)", x)
	}
	return false, fmt.Errorf("%v is not a boolean (want true or false)", v)
}
