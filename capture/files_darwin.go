package capture

import (
	"bytes"
	"os"

	"golang.org/x/sys/unix"

	"github.com/modelcalls/modelcalls/internal/uring"
)

// macOS: the same store as on Linux (flock, O_NOFOLLOW, O_APPEND, rename and unlink while open),
// with a durable sync that flushes the drive's cache (syncFile: F_FULLFSYNC) and without what is
// Linux's own (statx mount ids, RWF_DSYNC, io_uring).

// mountIDOf reports no mount id: macOS has no statx. A file's identity is its device and inode, and
// a dir remounted read-only is seen by statfs (atPath).
func mountIDOf(fd int) (uint64, bool) { return 0, false }

// atPathMount is never called on macOS (no file is opened with a mount id).
func (e *openFile) atPathMount() (size int64, ok bool, err error) { return 0, false, nil }

// dirReadOnly reports whether dir is on a mount that is read-only now (statfs MNT_RDONLY).
func dirReadOnly(dir string) bool {
	var fs unix.Statfs_t
	return unix.Statfs(dir, &fs) == nil && fs.Flags&unix.MNT_RDONLY != 0
}

// writeDsync writes the concatenation of bufs to f (opened O_APPEND: at its end) with one vectored
// write (writev(2), continued after a short one). macOS has no per-write durability flag that also
// flushes the drive's cache, so dsynced is always false: the batch ends with fdatasync. More buffers
// than one vectored write takes are joined into one first.
func writeDsync(f *os.File, bufs [][]byte) (n int, dsynced bool, err error) {
	if len(bufs) > uring.MaxIovecs {
		bufs = [][]byte{bytes.Join(bufs, nil)}
	}
	return writePlain(f, bufs)
}

// fdatasync makes f's appended bytes durable through the drive's cache: syncFile (F_FULLFSYNC).
// A plain fsync(2) on macOS leaves them in the drive's volatile cache.
func fdatasync(f *os.File) error { return syncFile(f) }

// networkFS names the network file systems of macOS (statfs f_fstypename). On these the claim slot
// file is written O_DSYNC so other hosts see claims at once.
var networkFS = map[string]bool{"nfs": true, "smbfs": true, "afpfs": true, "webdav": true, "cifs": true,
	"macfuse": true, "osxfuse": true, "fuse": true}

// isNetworkFS reports whether the open directory fd is on a network file system (networkFS).
func isNetworkFS(fd int) bool {
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) != nil {
		return false
	}
	return networkFS[unix.ByteSliceToString(st.Fstypename[:])]
}
