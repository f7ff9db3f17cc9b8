package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestDemoRefusesNonEmptyDir: a --dir with files in it, or a file, is a usage error and nothing is
// written.
func TestDemoRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "rollouts.jsonl")
	capturetest.WriteFile(t, old, []byte("mine\n"), 0o644)
	out, errOut, code := runCLI(t, "", "demo", "--dir", dir)
	if code != ExitUsage || !strings.Contains(errOut, "--dir: demo dir "+dir+": directory is not empty") || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if b, _ := os.ReadFile(old); string(b) != "mine\n" {
		t.Errorf("the file in --dir was changed: %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("demo left files in the refused dir: %v", entries)
	}
	// A file where the directory should be is the same mistake: exit 2, the file untouched.
	out, errOut, code = runCLI(t, "", "demo", "--dir", old)
	if code != ExitUsage || !strings.Contains(errOut, "--dir: demo dir "+old+": not a directory") || out != "" {
		t.Fatalf("--dir FILE: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if b, _ := os.ReadFile(old); string(b) != "mine\n" {
		t.Errorf("the file given as --dir was changed: %q", b)
	}
}

func TestDemoHints(t *testing.T) {
	// In a temp dir of its own (TMPDIR), so the removal hint names it.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	out, errOut, code := runCLI(t, "", "demo")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	entries, _ := os.ReadDir(tmp)
	if len(entries) != 1 {
		t.Fatalf("temp dir holds %v, want the demo's dir", entries)
	}
	demoDir := filepath.Join(tmp, entries[0].Name())
	mc := commandName() // the test binary is in a go-build dir: "go run ./cmd/modelcalls"
	for _, want := range []string{
		"Try: " + mc + " show --capture-dir " + filepath.Join(demoDir, "capture") + " demo-messages-sse 1\n",
		mc + " stats --capture-dir " + filepath.Join(demoDir, "capture") + " --by dialect\n",
		"remove them with: rm -r " + demoDir + "\n",
		mc + " run --rollout r1 --upstream",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	// The hinted commands work.
	if _, errOut, code := runCLI(t, "", "show", "--capture-dir", filepath.Join(demoDir, "capture"), "demo-messages-sse", "1"); code != ExitOK {
		t.Errorf("hinted show: exit %d: %s", code, errOut)
	}

	// A new --dir is created, and is not called temporary.
	dir := filepath.Join(t.TempDir(), "new", "demo")
	out, errOut, code = runCLI(t, "", "demo", "--dir", dir)
	if code != ExitOK || strings.Contains(out, "rm -r") {
		t.Errorf("--dir %s: exit %d, stderr %s, output mentions removal: %v", dir, code, errOut, strings.Contains(out, "rm -r"))
	}
}

func TestCommandName(t *testing.T) {
	// The test binary lives in a go-build temp dir.
	if got := commandName(); got != "go run ./cmd/modelcalls" {
		t.Errorf("commandName() = %q from %s", got, os.Args[0])
	}
	// A binary on $PATH under the name modelcalls is named so.
	bin := t.TempDir()
	exe, _ := os.Executable()
	if err := os.Symlink(exe, filepath.Join(bin, "modelcalls")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if got := commandName(); got != "modelcalls" {
		t.Errorf("on PATH: commandName() = %q", got)
	}
}
