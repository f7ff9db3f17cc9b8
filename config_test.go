package modelcalls

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestObservabilityEnabled(t *testing.T) {
	cases := []struct {
		cfg  map[string]any
		want bool
	}{
		{nil, false},
		{map[string]any{}, false},
		{map[string]any{"observability_enabled": true}, true},
		{map[string]any{"observability_enabled": false}, false},
		{map[string]any{"observability_enabled": "true"}, true},
		{map[string]any{"observability_enabled": "True"}, true},
		{map[string]any{"observability_enabled": "yes"}, true},
		{map[string]any{"observability_enabled": "false"}, false},
		{map[string]any{"observability_enabled": "0"}, false},
		{map[string]any{"observability_enabled": 1}, true},
		{map[string]any{"observability_enabled": 1.0}, true},
		{map[string]any{"observability_enabled": 2}, false},
		{map[string]any{"observability_enabled": "maybe"}, false},
		{map[string]any{"observability_enabled": nil}, false},
		{map[string]any{"policy_model": map[string]any{"observability_enabled": true}}, false}, // nested keys do not count
		{map[string]any{"observability_enabled": " true"}, false},                              // not trimmed, as pydantic
		{map[string]any{"observability_enabled": int64(1)}, true},
		{map[string]any{"observability_enabled": json.Number("1")}, true},
	}
	for _, c := range cases {
		if got := ObservabilityEnabled(c.cfg); got != c.want {
			t.Errorf("ObservabilityEnabled(%v) = %v, want %v", c.cfg, got, c.want)
		}
	}
}

// TestCaptureDirsFromConfig runs the capture rules on config values as YAML decoding and override
// parsing give them (ints, floats and strings where a bool belongs).
func TestCaptureDirsFromConfig(t *testing.T) {
	t.Setenv("NEMO_GYM_MODEL_CALL_CAPTURE_DIR", "/from/env") // must have no effect
	cases := []struct {
		name    string
		cfg     map[string]any
		want    []string // nil: capture off
		wantErr string
	}{
		{"disabled", map[string]any{}, nil, ""},
		{"nil config", nil, nil, ""},
		{"null flag", map[string]any{"observability_enabled": nil}, nil, ""},
		{"disabled ignores a relative dir", map[string]any{"observability_enabled": false, "model_call_capture_dir": "rel"}, nil, ""},
		{"disabled ignores a non-string dir", map[string]any{"observability_enabled": "off", "model_call_capture_dir": 5}, nil, ""},
		{"disabled by a lax string", map[string]any{"observability_enabled": "off"}, nil, ""},
		{"enabled", map[string]any{"observability_enabled": true, "model_call_capture_dir": "/runs/cap/"}, []string{"/runs/cap"}, ""},
		{"enabled from an override string", map[string]any{"observability_enabled": "true", "model_call_capture_dir": "/c"}, []string{"/c"}, ""},
		{"enabled by a lax string True", map[string]any{"observability_enabled": "True", "model_call_capture_dir": "/c"}, []string{"/c"}, ""},
		{"enabled by an int", map[string]any{"observability_enabled": 1, "model_call_capture_dir": "/c"}, []string{"/c"}, ""},
		{"enabled by an int64", map[string]any{"observability_enabled": int64(1), "model_call_capture_dir": "/c"}, []string{"/c"}, ""},
		{"enabled without dir", map[string]any{"observability_enabled": true}, nil, "required"},
		{"enabled with null dir", map[string]any{"observability_enabled": true, "model_call_capture_dir": nil}, nil, "required"},
		{"enabled with empty dir", map[string]any{"observability_enabled": true, "model_call_capture_dir": ""}, nil, "required"},
		{"enabled with relative dir", map[string]any{"observability_enabled": true, "model_call_capture_dir": "cap"}, nil, "absolute"},
		{"enabled with a non-string dir", map[string]any{"observability_enabled": true, "model_call_capture_dir": 5}, nil, "path string"},
		{"nested dir does not count", map[string]any{"observability_enabled": true, "server": map[string]any{"model_call_capture_dir": "/x"}}, nil, "required"},
		{"nested flag does not count", map[string]any{"srv": map[string]any{"observability_enabled": true}}, nil, ""},
		{"bad flag", map[string]any{"observability_enabled": "sometimes"}, nil, "observability_enabled"},
		{"flag int 2", map[string]any{"observability_enabled": 2}, nil, "not a boolean"},
		// pydantic compares the string as given: spaces around it make it no boolean
		{"flag with spaces", map[string]any{"observability_enabled": "true ", "model_call_capture_dir": "/c"}, nil, "not a boolean"},
		{"flag with spaces around", map[string]any{"observability_enabled": " YES ", "model_call_capture_dir": "/c"}, nil, "not a boolean"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dirs, err := CaptureDirsFromConfig(c.cfg)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, c.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(dirs, c.want) {
				t.Fatalf("CaptureDirsFromConfig = %q, %v; want %q", dirs, err, c.want)
			}
		})
	}
}

// TestLaxBool pins pydantic's lax-mode bool rules, including the two points where the CLI's config
// reader and the library used to disagree: surrounding spaces (not trimmed: an error) and integer
// types other than int (accepted when 0 or 1).
func TestLaxBool(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want bool
		ok   bool
	}{
		{true, true, true}, {false, false, true}, {1, true, true}, {0, false, true},
		{1.0, true, true}, {0.0, false, true}, {"n", false, true},
		{"t", true, true}, {"OFF", false, true}, {"True", true, true}, {"yEs", true, true},
		{"0", false, true}, {"1", true, true}, {"FALSE", false, true},
		{2, false, false}, {"2", false, false}, {0.5, false, false}, {"", false, false},
		{[]any{}, false, false}, {nil, false, false}, {"truee", false, false}, {"1.0", false, false},
		{math.NaN(), false, false}, {-1, false, false},
		// where the two implementations disagreed
		{" YES ", false, false}, {"true\n", false, false}, {" 1", false, false},
		{int64(1), true, true}, {int32(0), false, true}, {uint64(1), true, true}, {uint8(2), false, false},
		{float32(1), true, true},
		{json.Number("1"), true, true}, {json.Number("0.0"), false, true}, {json.Number("1e0"), true, true},
		{json.Number("2"), false, false}, {json.Number("x"), false, false},
	} {
		got, err := laxBool(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("laxBool(%#v) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "not a boolean") {
			t.Errorf("laxBool(%#v) error %q does not say it is not a boolean", tc.in, err)
		}
	}
}
