package capture

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/modelcalls/modelcalls/internal/uring"
)

// portableOnly makes the store use only what it does on macOS too (tests set it, so that Linux runs
// the code macOS runs): no statx mount ids (identity by fstat and lstat, a read-only dir seen by
// statfs), no RWF_DSYNC writes and no io_uring (a plain vectored write, then syncFile). Set it
// before the store is used.
var portableOnly bool

// mountIDOf returns the id of the mount the open file fd is on (statx STATX_MNT_ID, Linux 5.8), and
// false when the kernel does not report mount ids.
func mountIDOf(fd int) (uint64, bool) {
	if portableOnly {
		return 0, false
	}
	return mountID(fd, "", unix.AT_EMPTY_PATH)
}

// mountID returns the id of the mount that path (relative to dirfd, with flags) is on, and false
// when the kernel does not report mount ids.
func mountID(dirfd int, path string, flags int) (uint64, bool) {
	var stx unix.Statx_t
	if err := unix.Statx(dirfd, path, flags|unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_SYNC_AS_STAT, unix.STATX_MNT_ID, &stx); err != nil {
		return 0, false
	}
	return stx.Mnt_id, stx.Mask&unix.STATX_MNT_ID != 0
}

// dirReadOnly reports whether dir is on a mount that is read-only now.
func dirReadOnly(dir string) bool {
	var fs unix.Statfs_t
	return unix.Statfs(dir, &fs) == nil && fs.Flags&unix.ST_RDONLY != 0
}

// atPathMount is atPath for a file opened with a mount id: one statx of the path.
func (e *openFile) atPathMount() (size int64, ok bool, err error) {
	var stx unix.Statx_t
	err = unix.Statx(unix.AT_FDCWD, e.path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_SYNC_AS_STAT,
		unix.STATX_INO|unix.STATX_SIZE|unix.STATX_MNT_ID, &stx)
	ok = err == nil && stx.Ino == e.ino && uint64(unix.Mkdev(stx.Dev_major, stx.Dev_minor)) == e.dev &&
		stx.Mask&unix.STATX_MNT_ID != 0 && stx.Mnt_id == e.mnt && stx.Mask&unix.STATX_SIZE != 0
	return int64(stx.Size), ok, nil
}

// noDsyncWrites is set once the kernel refused a write with RWF_DSYNC (before Linux 4.7, or a file
// system without it): later batches write and then fdatasync.
var noDsyncWrites atomic.Bool

// durableInFlight counts the durable writes and syncs (writeDsync, fdatasync) of this process
// under way, to choose how each one waits for the disk (see durableRing).
var durableInFlight atomic.Int32

// durableRing starts a durable write or sync: it returns the io_uring to submit it to, or nil when
// it is made as a plain system call, and done, to call when it is over. A goroutine blocked in a
// system call keeps its scheduler slot (P) until the runtime's monitor takes it back, which it may
// do only after milliseconds, while a durable write takes 0.3-1.5 ms: so at most half of GOMAXPROCS
// (none with one P) wait that way, the one-call-at-a-time case keeping the lowest latency. The
// others go through the process's io_uring (internal/uring), where the waiting goroutine is parked
// and its P runs other goroutines; where io_uring is not available, or turned off
// (MODELCALLS_IO_URING=off, see internal/uring), every one is a plain system call.
func durableRing() (r *uring.Ring, done func()) {
	done = func() { durableInFlight.Add(-1) }
	if durableInFlight.Add(1) <= int32(runtime.GOMAXPROCS(0)/2) {
		return nil, done
	}
	r, _ = uring.Shared() // nil when io_uring is not available
	return r, done
}

// writeDsync writes the concatenation of bufs to f (opened O_APPEND: at its end) with RWF_DSYNC,
// which makes the bytes durable like an fdatasync after the write, in one operation instead of two:
// one vectored write, pwritev2(2), or the same write through io_uring (durableRing says which). Where
// RWF_DSYNC is not offered, or when a test replaces the sync (syncHook), it writes plainly and
// reports dsynced false: the caller then syncs. n is the bytes written (all of them when err is
// nil). More buffers than one vectored write takes are joined into one first.
func writeDsync(f *os.File, bufs [][]byte) (n int, dsynced bool, err error) {
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if len(bufs) > uring.MaxIovecs {
		bufs = [][]byte{bytes.Join(bufs, nil)}
	}
	if syncHook != nil || portableOnly || noDsyncWrites.Load() {
		return writePlain(f, bufs)
	}
	fd := int(f.Fd())
	r, done := durableRing()
	defer done()
	if r != nil {
		err := r.WritevDsync(fd, bufs)
		switch {
		case err == nil:
			return total, true, nil
		case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL):
			// Nothing was written (the kernel checks the flags first): as below.
			noDsyncWrites.Store(true)
			return writePlain(f, bufs)
		default:
			return 0, true, &os.PathError{Op: "write", Path: f.Name(), Err: err}
		}
	}
	written := 0
	for written < total {
		n, err := unix.Pwritev2(fd, bufs, -1, unix.RWF_DSYNC)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil && n <= 0 && written == 0 && (errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL)):
			noDsyncWrites.Store(true)
			return writePlain(f, bufs)
		case err != nil:
			return written, true, &os.PathError{Op: "write", Path: f.Name(), Err: err}
		}
		written += n
		bufs = uring.Advance(bufs, n)
	}
	return written, true, nil
}

// fdatasync flushes f's data and the metadata needed to read it back (its size). It is enough for
// an append: the file's mtime is not needed after a crash. Like writeDsync, it is a plain system
// call or goes through io_uring.
func fdatasync(f *os.File) error {
	if portableOnly {
		return syncFile(f)
	}
	fd := int(f.Fd())
	r, done := durableRing()
	defer done()
	if r != nil {
		return r.Fdatasync(fd)
	}
	for {
		err := unix.Fdatasync(fd)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// networkFS holds the magic numbers (statfs f_type) of network file systems: NFS, SMB/CIFS, SMB2,
// Lustre, Ceph, GPFS, FUSE, 9p, AFS. On these the slot file is written O_DSYNC so other hosts see claims at once.
var networkFS = map[int64]bool{0x6969: true, 0xFF534D42: true, 0xFE534D42: true, 0x517B: true, 0x0BD00BD0: true,
	0x00C36400: true, 0x47504653: true, 0x65735546: true, 0x01021997: true, 0x5346414F: true}

// isNetworkFS reports whether the open directory fd is on a network file system (networkFS).
func isNetworkFS(fd int) bool {
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) != nil {
		return false
	}
	return networkFS[int64(st.Type)]
}
