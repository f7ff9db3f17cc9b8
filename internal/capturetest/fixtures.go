package capturetest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// repoRoot is the module root: two directories above this file. The path is the one the compiler
// recorded, so it holds for `go test` and `go run` in a checkout; a binary built with -trimpath
// falls back to the nearest directory above the working directory that holds go.mod.
func repoRoot() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		root := filepath.Join(filepath.Dir(file), "..", "..")
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			return filepath.Clean(root)
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

// Testdata returns the path of elem under the repository's top-level testdata directory, the one
// fixture set every package's tests read:
//
//	fixtures/<openai_responses|openai_chat|anthropic_messages>/  recorded provider bodies (.json, .sse)
//	clients/               request shapes of agent harnesses and SDKs
//	gym-capture/capture/   capture files NeMo Gym's CaptureStore wrote
//	gym-capture/           the rollouts file of that run and Gym's own merge of it
func Testdata(elem ...string) string {
	return filepath.Join(append([]string{repoRoot(), "testdata"}, elem...)...)
}

// Fixture returns the recorded provider body testdata/fixtures/<name> ("openai_chat/x.sse").
func Fixture(t testing.TB, name string) []byte { return ReadTestdata(t, "fixtures", name) }

// ReadTestdata returns the file Testdata(elem...), failing the test when it cannot be read.
func ReadTestdata(t testing.TB, elem ...string) []byte {
	t.Helper()
	return ReadFile(t, Testdata(elem...))
}

// GymCaptureDir is the capture dir NeMo Gym's CaptureStore wrote (testdata/gym-capture/capture):
// complete lines, one torn last line (3-0) and an incomplete marker (4-0).
func GymCaptureDir() string { return Testdata("gym-capture", "capture") }

// WriteFile writes data to path with permissions perm, as os.WriteFile does; an error fails t.
func WriteFile(t testing.TB, path string, data []byte, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, perm); err != nil {
		t.Fatal(err)
	}
}

// ReadFile returns the contents of the file at path; an error fails t.
func ReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
