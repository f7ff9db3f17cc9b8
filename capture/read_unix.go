//go:build unix

package capture

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// readLockedInto is readLocked reading into buf's memory when its capacity holds the file (see
// ScanAvailableBuffer); a file that outgrows it is read into a new buffer.
func (s *Store) readLockedInto(id string, buf []byte) (string, []byte, error) {
	p, err := s.CapturePath(id)
	if err != nil {
		return "", nil, err
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT):
			return p, nil, nil
		case errors.Is(err, unix.ELOOP):
			s.noteSymlink()
			return p, nil, fmt.Errorf("open capture file %s: %w", p, ErrSymlink)
		}
		return p, nil, fmt.Errorf("open capture file: %w", &os.PathError{Op: "open", Path: p, Err: err})
	}
	defer unix.Close(fd)
	if err := retryEINTR(func() error { return unix.Flock(fd, unix.LOCK_SH) }); err != nil {
		return p, nil, fmt.Errorf("flock %s: %w", p, err)
	}
	defer unix.Flock(fd, unix.LOCK_UN)
	var st unix.Stat_t
	if err := retryEINTR(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return p, nil, fmt.Errorf("stat capture file: %w", &os.PathError{Op: "stat", Path: p, Err: err})
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return p, nil, fmt.Errorf("read capture file %s: is a directory", p)
	case unix.S_IFREG:
	default:
		unix.SetNonblock(fd, false)
	}
	// One byte more than the file: the read that sees end of file needs no growth.
	if want := max(st.Size, 0) + 1; int64(cap(buf)) < want {
		buf = make([]byte, 0, want)
	}
	// A regular file is read up to its size: under the shared lock no writer that locks can
	// change it, so the read that would confirm end of file is skipped (a file that grew since
	// fstat fills the spare byte, and is read on to its end).
	until := int64(-1)
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		until = st.Size
	}
	data, err := readAll(fd, buf[:0], until)
	if err != nil {
		return p, nil, fmt.Errorf("read capture file: %w", &os.PathError{Op: "read", Path: p, Err: err})
	}
	return p, data, nil
}

// readAll appends what fd holds from its offset to end of file to b, growing it when full. With
// size >= 0 (a regular file's size, from the offset 0) it stops once b holds exactly size bytes
// instead of reading again to see end of file.
func readAll(fd int, b []byte, size int64) ([]byte, error) {
	for {
		if size >= 0 && int64(len(b)) == size {
			return b, nil
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return b, err
		case n == 0:
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// retryEINTR calls op until it fails with something other than EINTR.
func retryEINTR(op func() error) error {
	for {
		if err := op(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
