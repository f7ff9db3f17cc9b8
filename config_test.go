package modelcalls

import (
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
