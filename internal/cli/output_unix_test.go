//go:build unix

package cli

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOutputKeepsSpecialFiles: an --out that is a named pipe (as /dev/null or /dev/stdout are
// devices) is written in place, not replaced by a renamed file, and an --out that is a symbolic
// link keeps the link and replaces the file it points at.
func TestOutputKeepsSpecialFiles(t *testing.T) {
	dir := t.TempDir()

	t.Run("named pipe", func(t *testing.T) {
		fifo := filepath.Join(dir, "pipe")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		got := make(chan string, 1)
		go func() {
			f, err := os.Open(fifo) // blocks until the writer opens its end
			if err != nil {
				got <- "open: " + err.Error()
				return
			}
			defer f.Close()
			b, _ := io.ReadAll(f)
			got <- string(b)
		}()
		out, err := openOutput(&Streams{}, fifo)
		if err != nil {
			t.Fatal(err)
		}
		out.w.WriteString("line\n")
		if err := out.commit(); err != nil {
			t.Fatal(err)
		}
		if s := <-got; s != "line\n" {
			t.Errorf("the pipe's reader got %q, want %q", s, "line\n")
		}
		fi, err := os.Lstat(fifo)
		if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			t.Errorf("--out pipe is no longer a pipe after commit: %v %v", fi.Mode(), err)
		}
		if m, _ := filepath.Glob(filepath.Join(dir, ".pipe.tmp-*")); len(m) > 0 {
			t.Errorf("temp files left: %v", m)
		}
	})

	t.Run("symbolic link", func(t *testing.T) {
		file := filepath.Join(dir, "real.jsonl")
		link := filepath.Join(dir, "link.jsonl")
		if err := os.WriteFile(file, []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(file, link); err != nil {
			t.Fatal(err)
		}
		out, err := openOutput(&Streams{}, link)
		if err != nil {
			t.Fatal(err)
		}
		out.w.WriteString("new\n")
		if err := out.commit(); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("--out link is no longer a link: %v %v", fi.Mode(), err)
		}
		if b, _ := os.ReadFile(file); string(b) != "new\n" {
			t.Errorf("the linked file holds %q, want %q", b, "new\n")
		}
	})

	t.Run("directory", func(t *testing.T) {
		if _, err := openOutput(&Streams{}, dir); err == nil {
			t.Error("--out naming a directory opened without error")
		}
	})
}
