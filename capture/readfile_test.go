//go:build unix

// These tests write capture dirs, which the store does on Linux and macOS only.

package capture

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
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

// TestScanAvailableBuffer: a file is read into the given buffer when it fits (a larger file read
// before leaves no bytes behind), into a new one when it does not, and a missing file hands the
// buffer back unread.
func TestScanAvailableBuffer(t *testing.T) {
	s := newStore(t)
	long, short := `{"model_call_id":"aaaaaaaaaaaaaaaa"}`, `{"b":1}`
	for id, data := range map[string]string{"long": long + "\n" + long + "\n", "short": short + "\n"} {
		if err := os.WriteFile(filepath.Join(s.Dir(), id+CaptureSuffix), []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	scan := func(id string, buf []byte) ([]byte, []string) {
		t.Helper()
		var lines []string
		got, err := s.ScanAvailableBuffer(id, buf, func(_, _ int, b []byte) { lines = append(lines, string(b)) })
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		return got, lines
	}
	buf, lines := scan("long", make([]byte, 0, 8)) // too small: a new buffer
	if len(lines) != 2 || lines[1] != long || cap(buf) <= 8 {
		t.Fatalf("long into a small buffer: %q (cap %d)", lines, cap(buf))
	}
	again, lines := scan("short", buf)
	if len(lines) != 1 || lines[0] != short || &again[:1][0] != &buf[:1][0] {
		t.Fatalf("short into the long one's buffer: %q (same memory: %v)", lines, &again[:1][0] == &buf[:1][0])
	}
	if got, lines := scan("missing", again); lines != nil || &got[:1][0] != &again[:1][0] {
		t.Fatalf("missing file: %q, buffer not handed back", lines)
	}
}

// TestOrphanLinesKinds counts the lines of an orphan file of each kind: a regular file (blank lines
// skipped, a last line without its newline counted, a line longer than the reader's buffer counted
// once), and the kinds that count 0 without being read: none, a symlink (even to a regular file),
// a directory and a FIFO (opened without blocking).
func TestOrphanLinesKinds(t *testing.T) {
	s := newStore(t)
	orphan := func(id string) string { return filepath.Join(s.Dir(), id+OrphanSuffix) }
	long := make([]byte, 70000)
	for i := range long {
		long[i] = 'x'
	}
	if err := os.WriteFile(orphan("reg"), []byte("{}\n\n  \n"+string(long)+"\n{}"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(orphan("reg"), orphan("sym")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(orphan("dir"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(orphan("fifo"), 0o640); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int{"reg": 3, "none": 0, "sym": 0, "dir": 0, "fifo": 0} {
		if n, err := s.OrphanLines(id); err != nil || n != want {
			t.Errorf("%s: %d lines, %v; want %d", id, n, err, want)
		}
	}
}
