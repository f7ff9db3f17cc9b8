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
