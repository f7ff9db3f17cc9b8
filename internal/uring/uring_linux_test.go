package uring

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring returns the shared ring, skipping the test where the kernel offers none (io_uring disabled
// by sysctl or a seccomp filter): the store then writes with plain system calls, tested elsewhere.
func ring(t *testing.T) *Ring {
	t.Helper()
	r, err := Shared()
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	return r
}

// appendFile creates a file opened for appends, closed at the test's end.
func appendFile(t *testing.T) (string, *os.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return path, f
}

// checkFile fails the test unless the file at path holds exactly want: the bytes written, in order.
func checkFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("file holds %d bytes, want the %d written in order", len(got), len(want))
	}
}

func TestWriteDsyncAppends(t *testing.T) {
	r := ring(t)
	path, f := appendFile(t)
	var want bytes.Buffer
	for i := range 50 {
		line := fmt.Appendf(nil, "{\"n\":%d,\"pad\":%q}\n", i, bytes.Repeat([]byte("x"), i*97))
		if err := r.WriteDsync(int(f.Fd()), line); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		want.Write(line)
	}
	if err := r.Fdatasync(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, want.Bytes())
}

// TestWritevDsyncAppends: the buffers of one vectored write land at the file's end in order, empty
// ones included, interleaved with plain writes; more than MaxIovecs buffers are refused whole.
func TestWritevDsyncAppends(t *testing.T) {
	r := ring(t)
	path, f := appendFile(t)
	var want bytes.Buffer
	for i := range 20 {
		bufs := [][]byte{fmt.Appendf(nil, "{\"n\":%d,", i), nil, bytes.Repeat([]byte("y"), i*1013), []byte("}\n")}
		if err := r.WritevDsync(int(f.Fd()), bufs); err != nil {
			t.Fatalf("writev %d: %v", i, err)
		}
		want.Write(bytes.Join(bufs, nil))
		if err := r.WriteDsync(int(f.Fd()), []byte("plain\n")); err != nil {
			t.Fatal(err)
		}
		want.WriteString("plain\n")
	}
	if err := r.WritevDsync(int(f.Fd()), [][]byte{nil, {}}); err != nil {
		t.Errorf("writev of nothing: %v", err)
	}
	if err := r.WritevDsync(int(f.Fd()), make([][]byte, MaxIovecs+1)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("writev of %d buffers: %v, want EINVAL", MaxIovecs+1, err)
	}
	checkFile(t, path, want.Bytes())
}

func TestAdvance(t *testing.T) {
	bufs := [][]byte{[]byte("ab"), nil, []byte("cde"), []byte("f")}
	for _, tc := range []struct {
		n    int
		want string // the rest, buffers joined by |
	}{{0, "ab||cde|f"}, {1, "b||cde|f"}, {2, "cde|f"}, {4, "e|f"}, {5, "f"}, {6, ""}} {
		rest := Advance(bufs, tc.n)
		if got := string(bytes.Join(rest, []byte("|"))); got != tc.want {
			t.Errorf("Advance(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if string(bufs[0]) != "ab" || string(bufs[2]) != "cde" {
		t.Errorf("Advance changed its argument: %q", bufs)
	}
}

// TestConcurrentWriters has more goroutines than the ring has room for write into their own files
// at once: every byte lands in its file, and the ring's reap goroutine is gone once all returned.
func TestConcurrentWriters(t *testing.T) {
	r := ring(t)
	dir := t.TempDir()
	const writers, lines = 300, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			path := filepath.Join(dir, fmt.Sprintf("w%03d", w))
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for i := range lines {
				if err := r.WriteDsync(int(f.Fd()), fmt.Appendf(nil, "%d %d\n", w, i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range writers {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("w%03d", w)))
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		for i := range lines {
			want = fmt.Appendf(want, "%d %d\n", w, i)
		}
		if !bytes.Equal(b, want) {
			t.Fatalf("writer %d: file %q, want %q", w, b, want)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		idle := !r.reaping && r.pending == 0 && len(r.free) == len(r.slots)
		r.mu.Unlock()
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ring still has operations pending after every writer returned")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestErrorsAreTheKernels: a write to a read-only descriptor and a sync of a closed one give the
// kernel's errno, as the plain system calls would.
func TestErrorsAreTheKernels(t *testing.T) {
	r := ring(t)
	path := filepath.Join(t.TempDir(), "ro")
	if err := os.WriteFile(path, []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := r.WriteDsync(int(f.Fd()), []byte("y")); !errors.Is(err, unix.EBADF) {
		t.Fatalf("write to a read-only fd: %v, want EBADF", err)
	}
	if err := r.Fdatasync(-1); !errors.Is(err, unix.EBADF) {
		t.Fatalf("sync of fd -1: %v, want EBADF", err)
	}
}

// The ring's pool runs up to maxWorkers writes to regular files at once, not the kernel's default
// of 4 per CPU (read back: limits of 0 leave them as they are and return them).
//
// The kernel keeps the limits with the ring and applies them to the worker pool of each thread that
// submits to it; a read-back returns the calling thread's pool, and zeros when that thread has never
// submitted (it has no pool). So the test locks its goroutine to one thread and submits a write from
// it before it reads: on whatever thread the goroutine ran, the read-back otherwise said 0 at times.
func TestMaxWorkers(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := ring(t)
	_, f := appendFile(t)
	if err := r.WriteDsync(int(f.Fd()), []byte("x")); err != nil {
		t.Fatal(err)
	}
	var limits [2]uint32
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerIOWQMaxWorkers, uintptr(unsafe.Pointer(&limits)), 2, 0, 0); errno != 0 {
		t.Skipf("IORING_REGISTER_IOWQ_MAX_WORKERS: %v (before Linux 5.15)", errno)
	}
	if limits[0] != maxWorkers {
		t.Errorf("bounded workers %d, want %d", limits[0], maxWorkers)
	}
}
