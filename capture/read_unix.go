//go:build unix

package capture

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// A capture file open for reading is a descriptor (rfile); noFile is none.
type rfile = int

const noFile rfile = -1

// openShared opens the capture file of id for reading and takes the shared lock, for readers that
// read it whole (readLockedInto) or in part (ScanFrom, ReadLineAt). fd is -1 (and err nil) when the
// file does not exist; otherwise the caller releases it with closeShared. st is the file's fstat
// under the lock. A directory is an error; a path that is not a regular file is made blocking.
func (s *Store) openShared(id string) (p string, fd int, st fileStat, err error) {
	p, err = s.CapturePath(id)
	if err != nil {
		return "", -1, st, err
	}
	fd, err = unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT):
			return p, -1, st, nil
		case errors.Is(err, unix.ELOOP):
			s.noteSymlink()
			return p, -1, st, fmt.Errorf("open capture file %s: %w", p, ErrSymlink)
		}
		return p, -1, st, fmt.Errorf("open capture file: %w", &os.PathError{Op: "open", Path: p, Err: err})
	}
	if err := retryEINTR(func() error { return unix.Flock(fd, unix.LOCK_SH) }); err != nil {
		unix.Close(fd)
		return p, -1, st, fmt.Errorf("flock %s: %w", p, err)
	}
	var ust unix.Stat_t
	if err := retryEINTR(func() error { return unix.Fstat(fd, &ust) }); err != nil {
		closeShared(fd)
		return p, -1, st, fmt.Errorf("stat capture file: %w", &os.PathError{Op: "stat", Path: p, Err: err})
	}
	st = fileStat{Dev: uint64(ust.Dev), Ino: uint64(ust.Ino), Size: ust.Size, Regular: ust.Mode&unix.S_IFMT == unix.S_IFREG}
	switch ust.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		closeShared(fd)
		return p, -1, st, fmt.Errorf("read capture file %s: is a directory", p)
	case unix.S_IFREG:
	default:
		unix.SetNonblock(fd, false)
	}
	return p, fd, st, nil
}

// closeShared releases the shared lock of an openShared descriptor and closes it.
func closeShared(fd int) {
	unix.Flock(fd, unix.LOCK_UN)
	unix.Close(fd)
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

// preadSome reads into b at off, retrying EINTR; 0 at end of file.
func preadSome(fd int, b []byte, off int64) (int, error) {
	for {
		n, err := unix.Pread(fd, b, off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return n, err
	}
}
