package modelcalls

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
)

// The run-wide (top-level) keys of a Gym global config that turn model-call capture on. Both are
// reserved top-level names in NeMo Gym: only the top level counts (the same names inside a server's
// own block are ignored), and no environment variable is consulted.
const (
	// ConfigObservabilityEnabled (a boolean, default false) turns model-call capture on for the run.
	ConfigObservabilityEnabled = "observability_enabled"
	// ConfigCaptureDir (an absolute path) is the run's capture dir: required when capture is on,
	// ignored when it is off.
	ConfigCaptureDir = "model_call_capture_dir"
)

// ObservabilityEnabled ports observability_enabled_from_config: the top-level observability_enabled
// flag of a Gym global config (a YAML or JSON mapping decoded into map[string]any), parsed as
// pydantic's lax mode parses a bool, since NeMo Gym validates the flag with pydantic: true and false;
// the integers 0 and 1 (any Go integer type, or a json.Number); the floats 0.0 and 1.0; the strings
// "0" and "1" and, in any ASCII case, "f", "n", "no", "off", "false", "t", "y", "on", "yes", "true",
// taken exactly (" true" with a space is not a boolean, as for pydantic). Only the top-level key
// counts, and no environment variable is consulted. A nil config, an absent or null key, or a value
// that is none of these gives false; use CaptureDirsFromConfig to have a bad value reported.
func ObservabilityEnabled(cfg map[string]any) bool {
	on, err := observabilityEnabled(cfg)
	return err == nil && on
}

// CaptureDirsFromConfig ports model_call_capture_dirs_from_config: nil when capture is disabled,
// else the one run-wide capture dir, the top-level model_call_capture_dir, cleaned. It validates as
// NeMo Gym validates its config when the config is built: when enabled the dir is required (absent,
// null and "" are missing) and must be an absolute path string; when disabled the dir is ignored,
// even if relative or not a string. A value of observability_enabled that is not a boolean (see
// ObservabilityEnabled) is an error too. Errors name the key and the rule.
func CaptureDirsFromConfig(cfg map[string]any) ([]string, error) {
	on, err := observabilityEnabled(cfg)
	if err != nil || !on {
		return nil, err
	}
	raw := cfg[ConfigCaptureDir]
	if raw == nil || raw == "" {
		return nil, fmt.Errorf("%s is required when %s is true", ConfigCaptureDir, ConfigObservabilityEnabled)
	}
	dir, ok := raw.(string)
	if !ok {
		return nil, fmt.Errorf("%s must be a path string, got %s", ConfigCaptureDir, kindOf(raw))
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%s must be an absolute path when %s is true, got %q", ConfigCaptureDir, ConfigObservabilityEnabled, dir)
	}
	return []string{filepath.Clean(dir)}, nil
}

// observabilityEnabled reads the flag: an absent key, or null (YAML's "observability_enabled:" with
// no value, or "~"), is false, so capture is off unless the run turns it on. A value laxBool rejects
// is an error naming the key.
func observabilityEnabled(cfg map[string]any) (bool, error) {
	raw := cfg[ConfigObservabilityEnabled] // a nil map reads as empty
	if raw == nil {
		return false, nil
	}
	on, err := laxBool(raw)
	if err != nil {
		return false, fmt.Errorf("%s: %w", ConfigObservabilityEnabled, err)
	}
	return on, nil
}

// laxBool converts a config value to a bool the way pydantic's lax mode validates a bool field (NeMo
// Gym validates observability_enabled with pydantic, and override parsers and JSON configs hand it
// strings and numbers):
//
//   - a bool as is;
//   - a value of any Go integer kind, or a json.Number holding an integer: 0 or 1;
//   - a value of float kind (float32, float64), or a json.Number holding a float: 0.0 or 1.0 (NaN and every other value are
//     errors);
//   - a string that is exactly "0" or "1", or, ignoring ASCII case, one of "f", "n", "no", "off",
//     "false", "t", "y", "on", "yes", "true". Surrounding spaces are not trimmed: " yes" is an
//     error, as it is for pydantic, which compares the string as given.
//
// Anything else (nil included) is an error saying the value is not a boolean.
func laxBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		if on, ok := wordBool(x); ok {
			return on, nil
		}
		return false, fmt.Errorf("%q is not a boolean (want true or false)", x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return intBool(i, v)
		}
		if f, err := x.Float64(); err == nil {
			return floatBool(f, v)
		}
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intBool(rv.Int(), v)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return uintBool(rv.Uint(), v)
	case reflect.Float32, reflect.Float64:
		return floatBool(rv.Float(), v)
	}
	return false, notBool(v)
}

// wordBool reads the string forms of laxBool.
func wordBool(s string) (on, ok bool) {
	switch s {
	case "0":
		return false, true
	case "1":
		return true, true
	}
	if len(s) > len("false") {
		return false, false
	}
	var lower [len("false")]byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	switch string(lower[:len(s)]) {
	case "f", "n", "no", "off", "false":
		return false, true
	case "t", "y", "on", "yes", "true":
		return true, true
	}
	return false, false
}

func intBool(i int64, v any) (bool, error) {
	if i == 0 || i == 1 {
		return i == 1, nil
	}
	return false, notBool(v)
}

func uintBool(u uint64, v any) (bool, error) {
	if u == 0 || u == 1 {
		return u == 1, nil
	}
	return false, notBool(v)
}

func floatBool(f float64, v any) (bool, error) {
	if f == 0 || f == 1 {
		return f == 1, nil
	}
	return false, notBool(v)
}

func notBool(v any) error {
	if v == nil {
		return errors.New("null is not a boolean (want true or false)")
	}
	return fmt.Errorf("%v (%s) is not a boolean (want true or false)", v, kindOf(v))
}

// kindOf names the JSON/YAML kind of a decoded config value, for errors.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case map[string]any, map[any]any:
		return "a mapping"
	case []any:
		return "a list"
	case json.Number, float32, float64, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}
