package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls"
)

// TestLoadFile reads a Gym config file and hands it to the capture rules as NeMo Gym would: the
// top-level keys count, the same names in a server block do not.
func TestLoadFile(t *testing.T) {
	v, err := Load(filepath.Join("testdata", "gym.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := modelcalls.CaptureDirsFromConfig(v)
	if err != nil || !reflect.DeepEqual(dirs, []string{"/var/run/gym/captures"}) {
		t.Fatalf("CaptureDirsFromConfig = %v, %v", dirs, err)
	}
	if !modelcalls.ObservabilityEnabled(v) {
		t.Fatal("ObservabilityEnabled = false")
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body, wantErr string
	}{
		{"list", "- a\n- b\n", "top level is a list"},
		{"scalar", "hello\n", "top level is a string"},
		{"bad yaml", "a: [1, 2\n", "parse yaml"},
		{"two documents", "a: 1\n---\nb: 2\n", "more than one document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
			if err := os.WriteFile(p, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(p)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), p) {
				t.Fatalf("Load error = %v, want one naming %s and containing %q", err, p, tc.wantErr)
			}
		})
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
}

func TestParseEmpty(t *testing.T) {
	for _, body := range []string{"", "# only a comment\n", "null\n", "~\n"} {
		v, err := Parse([]byte(body))
		if err != nil || len(v) != 0 {
			t.Errorf("Parse(%q) = %v, %v; want empty", body, v, err)
		}
	}
}

// TestCapture runs the capture rules on config values as YAML decoding gives them (ints, floats and
// strings where a bool belongs).
func TestCapture(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v       Values
		want    []string // nil: capture off
		wantErr string
	}{
		{"absent", Values{}, nil, ""},
		{"disabled ignores relative dir", Values{"observability_enabled": false, "model_call_capture_dir": "rel"}, nil, ""},
		{"null flag", Values{"observability_enabled": nil}, nil, ""},
		{"enabled", Values{"observability_enabled": true, "model_call_capture_dir": "/tmp/c/"}, []string{"/tmp/c"}, ""},
		{"lax string true", Values{"observability_enabled": "True", "model_call_capture_dir": "/c"}, []string{"/c"}, ""},
		{"lax int", Values{"observability_enabled": 1, "model_call_capture_dir": "/c"}, []string{"/c"}, ""},
		{"lax string false", Values{"observability_enabled": "off"}, nil, ""},
		{"missing dir", Values{"observability_enabled": true}, nil, "required"},
		{"null dir", Values{"observability_enabled": true, "model_call_capture_dir": nil}, nil, "required"},
		{"empty dir", Values{"observability_enabled": true, "model_call_capture_dir": ""}, nil, "required"},
		{"relative dir", Values{"observability_enabled": true, "model_call_capture_dir": "caps"}, nil, "absolute"},
		{"dir not a string", Values{"observability_enabled": true, "model_call_capture_dir": 3}, nil, "path string"},
		{"flag not a bool", Values{"observability_enabled": "maybe"}, nil, "observability_enabled"},
		{"flag int 2", Values{"observability_enabled": 2}, nil, "not a boolean"},
		{"nested keys ignored", Values{"srv": map[string]any{"observability_enabled": true}}, nil, ""},
		// The rules this package and the library once applied differently: a flag with spaces around
		// it is not a boolean (pydantic compares the string as given), and an int64 1 is.
		{"flag with spaces", Values{"observability_enabled": " YES ", "model_call_capture_dir": "/c"}, nil, "not a boolean"},
		{"flag int64", Values{"observability_enabled": int64(1), "model_call_capture_dir": "/c"}, []string{"/c"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := modelcalls.CaptureDirsFromConfig(tc.v)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("CaptureDirsFromConfig error = %v, want containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("CaptureDirsFromConfig = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestCaptureIgnoresEnvironment(t *testing.T) {
	t.Setenv("NEMO_GYM_MODEL_CALL_CAPTURE_DIR", "/from/env")
	dirs, err := modelcalls.CaptureDirsFromConfig(Values{})
	if err != nil || dirs != nil {
		t.Fatalf("CaptureDirsFromConfig = %v, %v; want none", dirs, err)
	}
}
