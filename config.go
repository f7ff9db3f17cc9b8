package modelcalls

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
)

// Run-wide (top-level) Gym config keys of model-call capture (reference §1). Only top-level keys
// count: the same names inside a server's own block are ignored, and no environment variable is
// consulted.
const (
	ConfigObservabilityEnabled = "observability_enabled"
	ConfigCaptureDir           = "model_call_capture_dir"
)

// ObservabilityEnabled ports observability_enabled_from_config: the top-level observability_enabled
// flag of a Gym global config, parsed leniently as pydantic's lax bool (true/false; the strings
// "true", "false", "yes", "no", "on", "off", "t", "f", "y", "n", "1", "0" in any case; the numbers 1
// and 0). A nil config, an absent or null key, or a value that is none of these gives false; use
// CaptureDirsFromConfig to have a bad value reported.
func ObservabilityEnabled(cfg map[string]any) bool {
	on, err := laxBool(cfg[ConfigObservabilityEnabled])
	return err == nil && on
}

// CaptureDirsFromConfig ports model_call_capture_dirs_from_config: nil when capture is disabled, else
// the one run-wide capture dir, model_call_capture_dir, cleaned (reference §1). It validates like
// NeMo Gym's config: when enabled the dir is required and must be an absolute path; when disabled
// the dir is ignored, even if relative. A value of observability_enabled that is not a bool (see
// ObservabilityEnabled) is an error too. Errors name the key and the rule.
func CaptureDirsFromConfig(cfg map[string]any) ([]string, error) {
	on, err := laxBool(cfg[ConfigObservabilityEnabled])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigObservabilityEnabled, err)
	}
	if !on {
		return nil, nil
	}
	raw, present := cfg[ConfigCaptureDir]
	if !present || raw == nil || raw == "" {
		return nil, fmt.Errorf("%s is required when %s is true", ConfigCaptureDir, ConfigObservabilityEnabled)
	}
	dir, ok := raw.(string)
	if !ok {
		return nil, fmt.Errorf("%s must be a path string, got %T", ConfigCaptureDir, raw)
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%s must be an absolute path, got %q", ConfigCaptureDir, dir)
	}
	return []string{filepath.Clean(dir)}, nil
}

// laxBool parses v as pydantic's lax-mode bool; nil is false.
func laxBool(v any) (bool, error) {
	switch v := v.(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	case string:
		switch strings.ToLower(v) {
		case "true", "t", "yes", "y", "on", "1":
			return true, nil
		case "false", "f", "no", "n", "off", "0":
			return false, nil
		}
		return false, fmt.Errorf("%q is not a boolean (true/false)", v)
	case int:
		return numBool(float64(v))
	case int64:
		return numBool(float64(v))
	case uint64:
		return numBool(float64(v))
	case float64:
		return numBool(v)
	}
	return false, fmt.Errorf("%v (%T) is not a boolean", v, v)
}

func numBool(f float64) (bool, error) {
	switch {
	case f == 1:
		return true, nil
	case f == 0:
		return false, nil
	case math.IsNaN(f):
		return false, errors.New("NaN is not a boolean")
	}
	return false, fmt.Errorf("%v is not a boolean (only 0 and 1 are)", f)
}
