//go:build unix

// These tests write capture dirs, which the store does on Linux and macOS only.

package capture

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scanAll runs ScanFrom from r and returns the lines it reported as "index:line:data", with "~"
// before an incomplete one, and checks each offset with ReadLineAt.
func scanAll(t *testing.T, s *Store, id string, r Resume) ([]string, Resume, error) {
	t.Helper()
	var got []string
	type span struct {
		off  int64
		data string
	}
	var spans []span
	next, err := s.ScanFrom(id, r, func(l ScannedLine) {
		mark := ""
		if !l.Complete {
			mark = "~"
		}
		got = append(got, fmt.Sprintf("%s%d:%d:%s", mark, l.Index, l.Line, l.Data))
		spans = append(spans, span{l.Offset, string(l.Data)})
	})
	if err == nil {
		for _, sp := range spans {
			b, err := s.ReadLineAt(id, sp.off, len(sp.data))
			if err != nil || string(b) != sp.data {
				t.Errorf("ReadLineAt(%d, %d) = %q, %v; want %q", sp.off, len(sp.data), b, err, sp.data)
			}
		}
	}
	return got, next, err
}

// ScanFrom agrees with the tolerant read on indexes and line numbers (blank lines skipped, a last
// line without a newline counted), reads only what was appended since its Resume (a partial last
// line again), finds lines longer than its first buffer, and reports a rewritten file.
func TestScanFromAppendsAndRewrites(t *testing.T) {
	s := newStore(t)
	path := filepath.Join(s.Dir(), "r"+CaptureSuffix)
	write := func(data string, flag int) {
		t.Helper()
		f, err := os.OpenFile(path, flag|os.O_WRONLY|os.O_CREATE, 0o640)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(data)
		f.Close()
	}
	if got, r, err := scanAll(t, s, "r", Resume{}); err != nil || got != nil || r != (Resume{}) {
		t.Fatalf("missing file: %v %+v %v", got, r, err)
	}
	long := strings.Repeat("x", 3*scanChunk)
	write("{\"a\":1}\n\n  \n{\""+long+"\":2}\n{\"c\"", os.O_TRUNC)
	got, r, err := scanAll(t, s, "r", Resume{})
	want := []string{`0:1:{"a":1}`, `1:4:{"` + long + `":2}`, `~2:5:{"c"`}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("first scan: %v %q", err, got)
	}
	if r.Index != 2 || r.Line != 4 || r.Offset != int64(len("{\"a\":1}\n\n  \n{\""+long+"\":2}\n")) {
		t.Fatalf("resume %+v", r)
	}
	entries, damaged, _ := s.ReadAvailable("r")
	if len(entries)+len(damaged) != 3 {
		t.Fatalf("the tolerant read sees %d lines", len(entries)+len(damaged))
	}

	// The partial line completed, and another appended: both read, nothing before them.
	write(":3}\n{\"d\":4}\n", os.O_APPEND)
	got, r2, err := scanAll(t, s, "r", r)
	if err != nil || strings.Join(got, "|") != `2:5:{"c":3}|3:6:{"d":4}` || r2.Index != 4 || r2.Line != 6 {
		t.Fatalf("after append: %v %q %+v", err, got, r2)
	}
	if got, r3, err := scanAll(t, s, "r", r2); err != nil || got != nil || r3 != r2 {
		t.Fatalf("nothing appended: %v %q %+v", err, got, r3)
	}

	// Rewritten in place with the same length, truncated, replaced by rename, removed.
	data, _ := os.ReadFile(path)
	write(strings.Replace(string(data), `"a":1`, `"a":9`, 1), os.O_TRUNC)
	if _, _, err := scanAll(t, s, "r", r2); err != nil {
		t.Fatalf("a change more than %d bytes before the resume point is not seen (by design): %v", tailBytes, err)
	}
	write(strings.Replace(string(data), `"d":4`, `"d":5`, 1), os.O_TRUNC)
	if _, _, err := scanAll(t, s, "r", r2); !errors.Is(err, ErrRewritten) {
		t.Fatalf("last line rewritten: %v", err)
	}
	write("{\"a\":1}\n", os.O_TRUNC)
	if _, _, err := scanAll(t, s, "r", r2); !errors.Is(err, ErrRewritten) {
		t.Fatalf("truncated: %v", err)
	}
	if _, err := s.ReadLineAt("r", r2.Offset-8, 7); !errors.Is(err, ErrRewritten) {
		t.Fatalf("ReadLineAt past the end: %v", err)
	}
	_, r, _ = scanAll(t, s, "r", Resume{})
	tmp := path + ".new"
	os.WriteFile(tmp, []byte("{\"a\":1}\n{\"b\":2}\n"), 0o640)
	os.Rename(tmp, path)
	if _, _, err := scanAll(t, s, "r", r); !errors.Is(err, ErrRewritten) {
		t.Fatalf("replaced: %v", err)
	}
	if _, err := s.ReadLineAt("r", 1, 5); !errors.Is(err, ErrRewritten) {
		t.Fatalf("ReadLineAt off a line boundary: %v", err)
	}
	os.Remove(path)
	if _, _, err := scanAll(t, s, "r", r); !errors.Is(err, ErrRewritten) {
		t.Fatalf("removed: %v", err)
	}
	if _, err := s.ReadLineAt("r", 0, 7); !errors.Is(err, ErrRewritten) {
		t.Fatalf("ReadLineAt of a removed file: %v", err)
	}
}
