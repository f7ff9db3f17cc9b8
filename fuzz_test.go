package modelcalls

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
)

// FuzzMergeSplice: a merge never panics; a line it does not attach to comes back unchanged, and a
// line it attaches to keeps every byte outside the spliced values (checkSplice, which finds the
// values with encoding/json, not with this package's scanner).
func FuzzMergeSplice(f *testing.F) {
	for _, path := range []string{"testdata/merge/splice.in.jsonl", "testdata/gym-capture/rollouts.jsonl"} {
		for _, l := range capturefile.ReadLines(f, path) {
			f.Add(l)
		}
	}
	dir := f.TempDir()
	capturefile.WriteCapture(f, dir, "0-0", ok("call-00", 20)+"\n"+ok("call-01", 5)+"\n")
	capturefile.WriteCapture(f, dir, "u-1", ok("call-u1", 10)+"\n{torn\n")
	if err := os.WriteFile(filepath.Join(dir, "0-1.capture.incomplete"), nil, 0o640); err != nil {
		f.Fatal(err)
	}
	m, err := NewMerger([]string{dir}, MergeOptions{DrainTimeout: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		in := bytes.Clone(line)
		out, res, err := m.Merge(context.Background(), line)
		if !bytes.Equal(line, in) {
			t.Fatal("Merge modified its input")
		}
		if err != nil || !res.Attached {
			if !bytes.Equal(out, line) {
				t.Fatalf("line not attached (err %v) but changed:\n in %q\nout %q", err, line, out)
			}
			return
		}
		if !json.Valid(line) || !utf8.Valid(line) {
			t.Fatalf("attached to a line that is not strict JSON: %q", line)
		}
		checkSplice(t, line, out, res.ObservationsJoined)
	})
}
