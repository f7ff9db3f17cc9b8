package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestTinyModelsRegenerate rebuilds the tiny GGUF models with their generator
// (testdata/models/tinygguf, its own module) and checks the bytes match the files the e2e
// tests serve, so the models are reproducible from source, not opaque blobs.
func TestTinyModelsRegenerate(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the generator")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	tests := []struct {
		file string
		args []string
	}{
		{"tiny-chatml.gguf", nil},
		{"tiny-tool-exec_command.gguf", []string{"-tool", "exec_command", "-param", "cmd", "-value", "cat hello.txt"}},
	}
	dir := t.TempDir()
	gen := filepath.Join(dir, "tinygguf")
	build := exec.Command(goBin, "build", "-o", gen, ".")
	build.Dir = "testdata/models/tinygguf"
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build generator: %v\n%s", err, out)
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			out := filepath.Join(dir, tc.file)
			cmd := exec.Command(gen, append([]string{"-o", out}, tc.args...)...)
			if msg, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("generate: %v\n%s", err, msg)
			}
			got := capturetest.ReadFile(t, out)
			want := capturetest.ReadFile(t, filepath.Join("testdata/models", tc.file))
			if !bytes.Equal(got, want) {
				t.Fatalf("regenerated %s differs from testdata (%d vs %d bytes)", tc.file, len(got), len(want))
			}
		})
	}
}
