package capture

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestReadFileKinds reads a capture path of each kind the reader handles itself: a regular file
// (blank lines skipped, line numbers kept), a symlink (refused with ErrSymlink and counted), a
// directory (an error) and a missing file (nothing).
func TestReadFileKinds(t *testing.T) {
	s := newStore(t)
	line := `{"model_call_id":"a"}`

	if err := os.WriteFile(filepath.Join(s.Dir(), "reg"+CaptureSuffix), []byte(line+"\n\n"+line+"\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	entries, damaged, err := s.ReadAvailable("reg")
	if err != nil || len(damaged) != 0 || len(entries) != 2 || string(entries[1].Data) != line || entries[1].Line != 3 {
		t.Fatalf("regular file: %+v %v %v", entries, damaged, err)
	}

	if err := os.Symlink(filepath.Join(s.Dir(), "reg"+CaptureSuffix), filepath.Join(s.Dir(), "sym"+CaptureSuffix)); err != nil {
		t.Fatal(err)
	}
	before := s.SymlinksRefused()
	if _, err := s.Read("sym"); !errors.Is(err, ErrSymlink) || s.SymlinksRefused() != before+1 {
		t.Fatalf("symlink: %v, refused %d -> %d", err, before, s.SymlinksRefused())
	}

	if err := os.Mkdir(filepath.Join(s.Dir(), "dir"+CaptureSuffix), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := s.ScanAvailable("dir", func(int, int, []byte) {}); err == nil {
		t.Fatal("a directory read as a capture file")
	}

	if entries, err := s.Read("missing"); err != nil || entries != nil {
		t.Fatalf("missing file: %v %v", entries, err)
	}
}
