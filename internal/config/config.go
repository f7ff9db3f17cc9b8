package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	yaml "go.yaml.in/yaml/v3"
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
