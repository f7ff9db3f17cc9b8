package capture

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/windows"

	"github.com/modelcalls/modelcalls/internal/fsutil"
)

// Windows: the store reads (every reading command works) and does not write. Writing needs what
// the store's design rests on and Windows does not give the same way: an exclusive lock that other
// readers can still read through (flock is advisory; LockFileEx locks are mandatory and block reads
// of the locked bytes), removing or replacing a capture file while gateways hold it open and locked
// (Clear), a lock that dies with its process as the liveness of a claim, O_NOFOLLOW opens, and device
// and inode identity to tell a file replaced at its path. See docs/capture-store.md, "Platforms".

// errWriteUnsupported is the error of every writing operation of the store on Windows.
var errWriteUnsupported = errors.New("capture needs Linux or macOS: on Windows modelcalls reads capture dirs " +
	"(calls, show, stats, merge, view, replay, export otlp) but does not write them (proxy, run --upstream, clear)")

// WriteSupported says whether the store writes on this system: nil on Linux and macOS; on Windows
// the error every writing operation returns (capture needs Linux or macOS).
func WriteSupported() error { return errWriteUnsupported }

// openReadNoFollow opens p for reading, refusing a symlink or junction at p (errIsSymlink): the path
// is looked at without following it, opened, and the opened file must be the one looked at (so a
// link swapped in between is refused too). A missing file gives an error wrapping fs.ErrNotExist.
func openReadNoFollow(p string) (*os.File, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return nil, errIsSymlink
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	if ost, err := f.Stat(); err != nil || !os.SameFile(st, ost) {
		f.Close()
		if err != nil {
			return nil, err
		}
		return nil, errIsSymlink
	}
	return f, nil
}

// A capture file open for reading is an *os.File (rfile); noFile is none.
type rfile = *os.File

var noFile rfile

// openShared opens the capture file of id for reading, for readLockedInto, ScanFrom and ReadLineAt.
// fd is noFile (and err nil) when the file does not exist; otherwise the caller closes it with
// closeShared. No lock is taken: no process on Windows writes a capture file, and the flock of a
// Linux or macOS gateway writing to a shared dir is not visible here (a line being written reads as
// a torn last line, which readers already handle). A directory is an error; a link is refused.
func (s *Store) openShared(id string) (p string, fd rfile, st fileStat, err error) {
	p, err = s.CapturePath(id)
	if err != nil {
		return "", noFile, st, err
	}
	f, err := openReadNoFollow(p)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return p, noFile, st, nil
		case errors.Is(err, errIsSymlink):
			s.noteSymlink()
			return p, noFile, st, fmt.Errorf("open capture file %s: %w", p, ErrSymlink)
		}
		return p, noFile, st, fmt.Errorf("open capture file: %w", err)
	}
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(windows.Handle(f.Fd()), &info); err != nil {
		f.Close()
		return p, noFile, st, fmt.Errorf("stat capture file: %w", &os.PathError{Op: "stat", Path: p, Err: err})
	}
	if info.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY != 0 {
		f.Close()
		return p, noFile, st, fmt.Errorf("read capture file %s: is a directory", p)
	}
	st = fileStat{
		Dev:     uint64(info.VolumeSerialNumber),
		Ino:     uint64(info.FileIndexHigh)<<32 | uint64(info.FileIndexLow),
		Size:    int64(info.FileSizeHigh)<<32 | int64(info.FileSizeLow),
		Regular: true,
	}
	return p, f, st, nil
}

// closeShared closes a file opened by openShared.
func closeShared(fd rfile) { fd.Close() }

// readAll appends what fd holds from its offset to end of file to b, growing it when full; with
// size >= 0 it stops once b holds exactly size bytes.
func readAll(fd rfile, b []byte, size int64) ([]byte, error) {
	for {
		if size >= 0 && int64(len(b)) == size {
			return b, nil
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := fd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// preadSome reads into b at off; 0 at end of file.
func preadSome(fd rfile, b []byte, off int64) (int, error) {
	n, err := fd.ReadAt(b, off)
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// fileCache, writeBatch and the group commit are shared with Linux and macOS; on Windows no capture
// file is ever opened for writing, so these fail before any of it runs.

func (c *fileCache) acquire(s *Store, id string, create bool) (*openFile, error) {
	return nil, errWriteUnsupported
}

func (e *openFile) atPath(dir string) (size int64, ok bool, err error) {
	return 0, false, errWriteUnsupported
}

func writeDsync(f *os.File, bufs [][]byte) (n int, dsynced bool, err error) {
	return 0, false, errWriteUnsupported
}

func fdatasync(f *os.File) error { return f.Sync() }

func (s *Store) appendOrphan(id string, req *appendReq) error { return errWriteUnsupported }

// MarkIncomplete fails on Windows (errWriteUnsupported): the store does not write here.
func (s *Store) MarkIncomplete(id string) error {
	if _, err := s.MarkerPath(id); err != nil {
		return err
	}
	return errWriteUnsupported
}

func (s *Store) createSlotFile() (*slotFile, error) { return nil, errWriteUnsupported }

func (sf *slotFile) atPath() bool { return false }

func (s *Store) clearDeadClaims(id string) error { return errWriteUnsupported }

// ownerLockHeld cannot tell on Windows: a slot file's owner is a Linux or macOS process whose flock
// is not visible here, so the header's host and pid decide (ownerAlive).
func ownerLockHeld(f *os.File) (held, known bool) { return false, false }

// eachSlotFile calls fn with each slot file of the store, opened for reading without following a
// link, and a regular file; no slot dir, or a linked one (never followed), has none. fn's error
// stops the walk and is returned.
func (s *Store) eachSlotFile(fn func(f *os.File, id fileID) error) error {
	p := filepath.Join(s.dir, ClaimSlotsDir)
	names, err := readDirNoFollow(p)
	if err != nil {
		if errors.Is(err, errIsSymlink) {
			s.noteSymlink()
			return nil
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDir) {
			return nil
		}
		return fmt.Errorf("open claim slot dir %s: %w", p, err)
	}
	for _, name := range names {
		if !isSlotFileName(name) {
			continue
		}
		f, err := openReadNoFollow(filepath.Join(p, name))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errIsSymlink) {
				continue
			}
			return fmt.Errorf("open claim slot file %s: %w", name, err)
		}
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			f.Close()
			continue
		}
		// fileID{} matches none of this process's own slot files: it writes none here.
		err = fn(f, fileID{})
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// errNotDir is readDirNoFollow's error for a path that is not a directory.
var errNotDir = errors.New("not a directory")

// readDirNoFollow lists the names in directory p; a link at p is refused (errIsSymlink), anything
// else than a directory gives errNotDir.
func readDirNoFollow(p string) ([]string, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return nil, errIsSymlink
	}
	if !st.IsDir() {
		return nil, errNotDir
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

// legacyClaims counts the per-call claim files under <id>.capture.claims/ as on Linux and macOS
// (claims_unix.go): empty, not JSON, or of a dead process on this host is stale; another host's or a
// live process's is live. A linked claims dir or claim file is never followed and counts nothing.
func (s *Store) legacyClaims(id string) (ClaimCount, error) {
	p := filepath.Join(s.dir, id+ClaimsSuffix)
	names, err := readDirNoFollow(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errIsSymlink) || errors.Is(err, errNotDir) {
			return ClaimCount{}, nil
		}
		return ClaimCount{}, fmt.Errorf("list capture claims: %w", err)
	}
	var c ClaimCount
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			continue
		}
		f, err := openReadNoFollow(filepath.Join(p, name))
		if err != nil {
			continue // released while we listed, a link, or unreadable
		}
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			f.Close()
			continue
		}
		b, err := io.ReadAll(io.LimitReader(f, 4096))
		f.Close()
		if legacyClaimStale(b, err) {
			c.Stale++
			continue
		}
		c.Live++
	}
	return c, nil
}

// legacyClaimStale tells a per-call claim file's content (b, or the error reading it) is stale.
func legacyClaimStale(b []byte, err error) bool {
	var info ClaimInfo
	return err != nil || json.Unmarshal(b, &info) != nil || info.PID <= 0 ||
		(info.Host == localHost() && !fsutil.ProcessAlive(info.PID))
}

func removeLocked(p string) error { return errWriteUnsupported }
