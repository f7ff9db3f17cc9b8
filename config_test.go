package modelcalls

import (
	"encoding/json"
	"math"
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

func TestCaptureDirsFromConfig(t *testing.T) {
	t.Setenv("NEMO_GYM_MODEL_CALL_CAPTURE_DIR", "/from/env") // must have no effect
	cases := []struct {
		name    string
		cfg     map[string]any
		want    string
		wantErr string
	}{
		{"disabled", map[string]any{}, "[]", ""},
		{"disabled ignores a relative dir", map[string]any{"observability_enabled": false, "model_call_capture_dir": "rel"}, "[]", ""},
		{"enabled", map[string]any{"observability_enabled": true, "model_call_capture_dir": "/runs/cap/"}, "[/runs/cap]", ""},
		{"enabled from an override string", map[string]any{"observability_enabled": "true", "model_call_capture_dir": "/c"}, "[/c]", ""},
		{"enabled without dir", map[string]any{"observability_enabled": true}, "", "required"},
		{"enabled with null dir", map[string]any{"observability_enabled": true, "model_call_capture_dir": nil}, "", "required"},
		{"enabled with empty dir", map[string]any{"observability_enabled": true, "model_call_capture_dir": ""}, "", "required"},
		{"enabled with relative dir", map[string]any{"observability_enabled": true, "model_call_capture_dir": "cap"}, "", "absolute"},
		{"enabled with a non-string dir", map[string]any{"observability_enabled": true, "model_call_capture_dir": 5}, "", "path string"},
		{"nested dir does not count", map[string]any{"observability_enabled": true, "server": map[string]any{"model_call_capture_dir": "/x"}}, "", "required"},
		{"bad flag", map[string]any{"observability_enabled": "sometimes"}, "", "observability_enabled"},
		{"flag with spaces", map[string]any{"observability_enabled": "true ", "model_call_capture_dir": "/c"}, "", "not a boolean"},
		{"disabled ignores a non-string dir", map[string]any{"observability_enabled": "off", "model_call_capture_dir": 5}, "[]", ""},
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
			if err != nil {
				t.Fatal(err)
			}
			if got := "[" + strings.Join(dirs, " ") + "]"; got != c.want {
				t.Errorf("dirs = %s, want %s", got, c.want)
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
