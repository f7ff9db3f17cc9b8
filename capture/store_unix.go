//go:build unix

package capture

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/modelcalls/modelcalls/internal/fsutil"
)

// MarkIncomplete creates the empty incomplete marker for id (idempotent) and syncs the directory,
// recording that a capture write for this rollout failed (NeMo Gym's marker: writers never remove
// it; clearing the rollout does).
func (s *Store) MarkIncomplete(id string) error {
	p, err := s.MarkerPath(id)
	if err != nil {
		return err
	}
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(FileMode))
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			s.noteSymlink()
			return fmt.Errorf("create incomplete marker %s: %w", p, ErrSymlink)
		}
		return fmt.Errorf("create incomplete marker: %w", &os.PathError{Op: "open", Path: p, Err: err})
	}
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("create incomplete marker: %w", err)
	}
	return fsutil.SyncDir(s.dir)
}

// removeLocked unlinks the capture file at p under its exclusive flock (a symlink or a non-regular
// file is unlinked as is, never opened through). The file is opened for writing when permitted,
// since file systems that emulate flock with POSIX locks grant an exclusive lock only then; where
// no lock can be had, it is unlinked without (an append in progress then goes with the file).
func removeLocked(p string) error {
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EISDIR) {
		fd, err = unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	}
	if err == nil {
		f := os.NewFile(uintptr(fd), p)
		defer f.Close()
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			fsutil.Lock(f, true)
		}
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
