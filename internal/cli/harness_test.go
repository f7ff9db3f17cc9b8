package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStripJSONC(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a": 1}`, `{"a":1}`},
		{"{\n // a comment\n \"a\": \"x // not a comment\", /* block */ \"b\": [1, 2,],\n}", `{"a":"x // not a comment","b":[1,2]}`},
		{`{"a": "q\"/*x*/", "b": 1}`, `{"a":"q\"/*x*/","b":1}`},
		{"{\"a\": 1 /* unterminated", `{"a":1`},
	} {
		got := stripJSONC([]byte(tc.in))
		var buf bytes.Buffer
		if err := json.Compact(&buf, got); err != nil {
			if tc.want != `{"a":1` {
				t.Errorf("%q: %q is not JSON: %v", tc.in, got, err)
			}
			continue
		}
		if buf.String() != tc.want {
			t.Errorf("%q: %s, want %s", tc.in, buf.String(), tc.want)
		}
	}
}

// FuzzStripJSONC: JSON without comments passes through stripJSONC unchanged in meaning.
func FuzzStripJSONC(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":"// x","b":[1,{"c":"/*"}]}`, `["a,]", 1]`, `"\\\"//"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		var want, got bytes.Buffer
		json.Compact(&want, b)
		if err := json.Compact(&got, stripJSONC(b)); err != nil || got.String() != want.String() {
			t.Fatalf("%q -> %q (%v)", b, stripJSONC(b), err)
		}
	})
}

// TestKeepChildFiles: what a child left in its stand-in dir moves to the user's; links, run's own
// files and a name the user's dir gained meanwhile stay put, and the last is reported.
func TestKeepChildFiles(t *testing.T) {
	tmp, dst := t.TempDir(), t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dst, "settings.json"), "user")
	if err := os.Symlink(filepath.Join(dst, "settings.json"), filepath.Join(tmp, "settings.json")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(tmp, "models.json"), "generated")
	write(filepath.Join(tmp, "auth.json"), "login")
	write(filepath.Join(tmp, "raced.json"), "child")
	write(filepath.Join(dst, "raced.json"), "other run")
	problems := keepChildFiles(tmp, dst, []string{"settings.json"}, []string{"models.json"})
	if len(problems) != 1 || !strings.Contains(problems[0], "raced.json written under run is left in "+tmp) {
		t.Errorf("problems %q", problems)
	}
	for name, want := range map[string]string{"settings.json": "user", "auth.json": "login", "raced.json": "other run"} {
		if b, _ := os.ReadFile(filepath.Join(dst, name)); string(b) != want {
			t.Errorf("%s: %q, want %q", name, b, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "models.json")); !os.IsNotExist(err) {
		t.Errorf("run's generated models.json reached the user's dir: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(tmp, "raced.json")); string(b) != "child" {
		t.Errorf("the child's raced.json is not left in the temporary dir: %q", b)
	}

	// Across file systems moveEntry copies: copyTree keeps contents, modes and links.
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "bin"), 0o755)
	if err := os.WriteFile(filepath.Join(src, "bin", "rg"), []byte("rg"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Symlink("rg", filepath.Join(src, "bin", "ripgrep"))
	to := filepath.Join(t.TempDir(), "copy")
	if err := copyTree(src, to); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(to, "bin", "rg")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("copied bin/rg: %v %v", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(to, "bin", "ripgrep")); l != "rg" {
		t.Errorf("copied link: %q %v", l, err)
	}
}
