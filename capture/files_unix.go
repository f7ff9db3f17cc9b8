//go:build unix

package capture

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/modelcalls/modelcalls/internal/uring"
)

// The capture store's file operations shared by Linux and macOS: opening without following a
// symlink (O_NOFOLLOW), identity by device and inode, vectored writes. What differs between the two
// (mount ids, durable writes and syncs, io_uring) is in files_linux.go and files_darwin.go.

// WriteSupported says whether the store writes on this system: nil on Linux and macOS; on Windows
// the error every writing operation returns (capture needs Linux or macOS).
func WriteSupported() error { return nil }

// acquire returns the open capture file of id, pinned. A kept file is returned without a system
// call: whether the path still names it (it was not removed or replaced, and the mount it was opened
// through is still the one at the path) is checked under its lock by writeBatch, which makes commit
// reopen it. A broken file is closed once unpinned and opened again. create makes a missing file
// (empty, mode FileMode).
func (c *fileCache) acquire(s *Store, id string, create bool) (*openFile, error) {
	p, err := s.CapturePath(id)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	e := c.m[id]
	if e != nil {
		c.pin(e)
	}
	c.mu.Unlock()
	if e != nil {
		if !e.isBroken() {
			return e, nil
		}
		c.retire(e)
		c.release(e)
	}
	flags := unix.O_RDWR | unix.O_APPEND | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	if create {
		flags |= unix.O_CREAT
	}
	fd, err := unix.Open(p, flags, uint32(FileMode))
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			s.noteSymlink()
			return nil, fmt.Errorf("open capture file %s: %w", p, ErrSymlink)
		}
		return nil, fmt.Errorf("open capture file: %w", &os.PathError{Op: "open", Path: p, Err: err})
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat capture file: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("open capture file %s: not a regular file", p)
	}
	unix.SetNonblock(fd, false)
	e = &openFile{id: id, path: p, f: os.NewFile(uintptr(fd), p), dev: uint64(st.Dev), ino: uint64(st.Ino), refs: 1}
	e.mnt, e.hasMnt = mountIDOf(fd)
	if !e.hasMnt && dirReadOnly(s.dir) {
		// A dir that became read-only (a remount) is not written through descriptors opened before.
		e.f.Close()
		return nil, fmt.Errorf("open capture file: %w", &os.PathError{Op: "open", Path: p, Err: unix.EROFS})
	}
	c.mu.Lock()
	if old := c.m[id]; old != nil && old.ino == e.ino && old.dev == e.dev && old.mnt == e.mnt && !old.isBroken() {
		// Another goroutine opened the same file meanwhile: share its entry.
		c.pin(old)
		c.mu.Unlock()
		e.f.Close()
		return old, nil
	} else if old != nil {
		c.retireLocked(old)
	}
	if c.m == nil {
		c.m = map[string]*openFile{}
	}
	c.m[id] = e
	c.evictLocked(s.maxOpen())
	c.mu.Unlock()
	return e, nil
}

// atPath reports whether e's path still names e's file (no symlink followed), through the mount
// e was opened through, and the file's size. With mount ids (Linux) this is one statx of the path
// (atPathMount: the path naming the file proves it is still linked); without (macOS, or a Linux
// before 5.8), an fstat (link count, size), an lstat and a statfs (the dir still writable).
func (e *openFile) atPath(dir string) (size int64, ok bool, err error) {
	if e.hasMnt {
		return e.atPathMount()
	}
	var st, cur unix.Stat_t
	if err := unix.Fstat(int(e.f.Fd()), &st); err != nil {
		return 0, false, fmt.Errorf("stat capture file: %w", err)
	}
	ok = st.Nlink > 0 && unix.Lstat(e.path, &cur) == nil && uint64(cur.Ino) == e.ino && uint64(cur.Dev) == e.dev && !dirReadOnly(dir)
	return st.Size, ok, nil
}

// writePlain writes bufs to f with one vectored write (writev(2)), continued after a short one,
// without RWF_DSYNC (dsynced is false: the caller syncs).
func writePlain(f *os.File, bufs [][]byte) (n int, dsynced bool, err error) {
	fd := int(f.Fd())
	for len(bufs) > 0 {
		m, err := unix.Writev(fd, bufs)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return n, false, &os.PathError{Op: "write", Path: f.Name(), Err: err}
		}
		if m == 0 {
			return n, false, &os.PathError{Op: "write", Path: f.Name(), Err: io.ErrShortWrite}
		}
		n += m
		bufs = uring.Advance(bufs, m)
	}
	return n, false, nil
}

// appendOrphan appends the line of a call whose rollout was cleared while it was in flight to
// <id>.capture.orphaned.jsonl (opened without following a symlink, locked, tail repaired, fsynced),
// so it never mixes with the next attempt's capture and is not lost.
func (s *Store) appendOrphan(id string, req *appendReq) error {
	p, err := s.OrphanPath(id)
	if err != nil {
		return err
	}
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, uint32(FileMode))
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			s.noteSymlink()
			return fmt.Errorf("open orphaned capture file %s: %w", p, ErrSymlink)
		}
		return fmt.Errorf("open orphaned capture file: %w", &os.PathError{Op: "open", Path: p, Err: err})
	}
	unix.SetNonblock(fd, false)
	f := os.NewFile(uintptr(fd), p)
	e := &openFile{id: id, path: p, f: f}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return fmt.Errorf("open orphaned capture file %s: not a regular file", p)
	}
	e.dev, e.ino = uint64(st.Dev), uint64(st.Ino)
	defer f.Close()
	s.orphaned.Add(1)
	req.claimMCID = "" // the orphan file takes it whatever the clear listed
	errs := s.writeBatch(e, []*appendReq{req})
	if errors.Is(errs[0], errReplaced) {
		return fmt.Errorf("orphaned capture file %s replaced while writing", p)
	}
	return errs[0]
}

// openReadNoFollow opens p for reading without following a symlink and without blocking on a FIFO.
// A missing file gives an error wrapping fs.ErrNotExist; a symlink gives errIsSymlink.
func openReadNoFollow(p string) (*os.File, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, errIsSymlink
		}
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// syncFile makes f's data and size durable with os.File.Sync: fsync(2) on Linux; on macOS, where
// fsync only hands the data to the drive, whose cache may lose it on power loss, Go's Sync is
// fcntl(F_FULLFSYNC), which also flushes the drive's cache (falling back to fsync where the file
// system refuses it with ENOTSUP, as SMB mounts do).
func syncFile(f *os.File) error { return f.Sync() }
