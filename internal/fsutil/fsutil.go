// Package fsutil owns the file-system primitives the capture store relies on: advisory whole-file
// locks (flock), fsync of files and directories, and a liveness check for the process that holds a
// claim. The capture store writes on Linux and macOS, where all of these are POSIX calls (flock(2),
// fsync(2) of a directory, kill(pid, 0)); Windows has equivalents for the lock (LockFileEx) and the
// liveness check (OpenProcess), and no directory sync.
package fsutil

import (
	"fmt"
	"os"
)

// SyncDir fsyncs the directory at path so that entries created or removed in it are durable (on
// macOS, Go's os.File.Sync is fcntl(F_FULLFSYNC), which also flushes the drive's cache). On Windows
// it does nothing: Windows has no documented flush of a directory's entries, and the capture store
// does not write there.
func SyncDir(path string) error {
	if noDirSync {
		return nil
	}
	d, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open dir for sync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", path, err)
	}
	return nil
}
