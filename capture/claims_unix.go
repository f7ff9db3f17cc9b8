//go:build unix

package capture

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/modelcalls/modelcalls/internal/fsutil"
)

// Claim slot files on Linux and macOS: created, listed and opened relative to the slot directory's
// descriptor, never through a symlink; a slot file's owner holds an exclusive flock(2) on it.

// openSlotDir opens (creating when create is set) the slot directory without following a symlink.
func (s *Store) openSlotDir(create bool) (int, error) {
	p := filepath.Join(s.dir, ClaimSlotsDir)
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) && create {
		if err = unix.Mkdir(p, uint32(DirMode)); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("create claim slot dir: %w", err)
		}
		fd, err = unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		if !create && errors.Is(err, unix.ENOENT) {
			// No slot dir is the common case of a reader (nothing ever claimed here): the bare
			// errno, without building a message nobody reads.
			return -1, err
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			var st unix.Stat_t
			if unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				s.noteSymlink()
				return -1, fmt.Errorf("claim slot dir %s: %w", p, ErrSymlink)
			}
		}
		return -1, fmt.Errorf("open claim slot dir %s: %w", p, err)
	}
	return fd, nil
}

// createSlotFile writes a new slot file under a temporary name, locks it, and renames it into place,
// so a reader never sees a slot file without its header or its lock.
func (s *Store) createSlotFile() (*slotFile, error) {
	dfd, err := s.openSlotDir(true)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	var rnd [6]byte
	rand.Read(rnd[:])
	name := fmt.Sprintf("%d-%s%s", os.Getpid(), hex.EncodeToString(rnd[:]), SlotFileSuffix)
	tmp := "." + name + ".tmp"
	dsync := isNetworkFS(dfd)
	flags := unix.O_RDWR | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if dsync {
		flags |= unix.O_DSYNC
	}
	fd, err := unix.Openat(dfd, tmp, flags, uint32(FileMode))
	if err != nil {
		return nil, fmt.Errorf("create claim slot file: %w", err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(s.dir, ClaimSlotsDir, name))
	fail := func(err error) (*slotFile, error) {
		unix.Unlinkat(dfd, tmp, 0)
		f.Close()
		return nil, fmt.Errorf("create claim slot file: %w", err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fail(err)
	}
	hdr := encodeHeader(os.Getpid(), localHost(), time.Now().UnixNano())
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return fail(err)
	}
	if err := f.Truncate(int64(SlotSize * (1 + initialSlots))); err != nil {
		return fail(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(err)
	}
	ownSlotFiles.Store(fileID{uint64(st.Dev), uint64(st.Ino)}, struct{}{})
	if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
		ownSlotFiles.Delete(fileID{uint64(st.Dev), uint64(st.Ino)})
		return fail(err)
	}
	sf := &slotFile{f: f, path: f.Name(), dev: uint64(st.Dev), ino: uint64(st.Ino), n: initialSlots, dsync: dsync}
	for i := initialSlots - 1; i >= 0; i-- {
		sf.free = append(sf.free, i)
	}
	s.gcSlotFiles(dfd)
	return sf, nil
}

// atPath reports whether sf's path still names sf's file (no symlink followed).
func (sf *slotFile) atPath() bool {
	var st unix.Stat_t
	return unix.Lstat(sf.path, &st) == nil && uint64(st.Ino) == sf.ino && uint64(st.Dev) == sf.dev
}

// eachSlotFile calls fn with each slot file of the store, opened for reading without following a
// symlink, and a regular file; no slot dir, or a symlinked one (never followed), has none. fn's error
// stops the walk and is returned.
func (s *Store) eachSlotFile(fn func(f *os.File, id fileID) error) error {
	dfd, names, ok, err := s.openSlotFiles()
	if !ok {
		return err
	}
	defer unix.Close(dfd)
	for _, name := range names {
		fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) {
				continue // removed while listing, or a symlink (never followed, never a claim)
			}
			return fmt.Errorf("open claim slot file %s: %w", name, err)
		}
		f := os.NewFile(uintptr(fd), name)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			f.Close()
			continue
		}
		err = fn(f, fileID{uint64(st.Dev), uint64(st.Ino)})
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// ownerLockHeld probes the owner's exclusive flock on slot file f with a non-blocking shared one:
// held is true when it is refused, false when granted (and dropped at once); known is false when
// the file system does not support flock.
func ownerLockHeld(f *os.File) (held, known bool) {
	fd := int(f.Fd())
	err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		unix.Flock(fd, unix.LOCK_UN)
		return false, true
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true, true
	}
	return false, false
}

// openSlotFiles opens the slot directory for reading and lists its slot files. ok is false when
// there is nothing to read: no directory, a symlinked one (never followed), or an error (err).
func (s *Store) openSlotFiles() (dfd int, names []string, ok bool, err error) {
	dfd, err = s.openSlotDir(false)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, ErrSymlink) {
			return -1, nil, false, nil
		}
		return -1, nil, false, err
	}
	names, err = slotFileNames(dfd)
	if err != nil {
		unix.Close(dfd)
		return -1, nil, false, err
	}
	return dfd, names, true, nil
}

// slotFileNames lists the slot files of the open slot directory dfd (dot files are skipped).
func slotFileNames(dfd int) ([]string, error) {
	names, err := readDirNames(dfd)
	if err != nil {
		return nil, fmt.Errorf("list claim slot files: %w", err)
	}
	slots := names[:0]
	for _, name := range names {
		if isSlotFileName(name) {
			slots = append(slots, name)
		}
	}
	return slots, nil
}

func readDirNames(dfd int) ([]string, error) {
	nfd, err := unix.Dup(dfd)
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(nfd), ClaimSlotsDir)
	defer d.Close()
	return d.Readdirnames(-1)
}

// gcSlotFiles removes slot files whose owner is gone and whose slots are all free (a process that
// exited after releasing its claims). It takes the file's exclusive lock without blocking first, so a
// live owner's file is never removed. Errors are ignored: a leftover costs readers one read.
func (s *Store) gcSlotFiles(dfd int) {
	names, err := slotFileNames(dfd)
	if err != nil {
		return
	}
	for _, name := range names {
		s.withDeadSlotFile(dfd, name, func(f *os.File, data []byte) bool {
			for off := SlotSize; off+SlotSize <= len(data); off += SlotSize {
				rec := data[off : off+SlotSize]
				if _, free, ok := decodeSlot(rec); !free && (ok || tornID(rec) != "") {
					return false // a stale claim: kept until its rollout is cleared
				}
			}
			return true
		})
	}
}

// withDeadSlotFile opens slot file name, and when its owner is gone (its exclusive lock can be taken
// at once) calls fn with its content under that lock; fn returning true removes the file.
func (s *Store) withDeadSlotFile(dfd int, name string, fn func(f *os.File, data []byte) (remove bool)) {
	fd, err := unix.Openat(dfd, name, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	if _, own := ownSlotFiles.Load(fileID{uint64(st.Dev), uint64(st.Ino)}); own {
		return
	}
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return
	}
	defer unix.Flock(fd, unix.LOCK_UN)
	data, err := io.ReadAll(f)
	if err != nil {
		return
	}
	if len(data) >= SlotSize {
		if pid, host, ok := decodeHeader(data[:SlotSize]); ok && host == localHost() && pid != os.Getpid() && fsutil.ProcessAlive(pid) {
			// Locks granted but the owner runs: a file system without working flock. Leave it.
			return
		}
	}
	if fn(f, data) {
		unix.Unlinkat(dfd, name, 0)
	}
}

// clearDeadClaims zeroes the records of rollout id in slot files whose owner is gone, and removes
// such files once all their slots are free. Live owners' records are left alone: those writers see
// at append time that the rollout was cleared.
func (s *Store) clearDeadClaims(id string) error {
	dfd, names, ok, err := s.openSlotFiles()
	if !ok {
		return err
	}
	defer unix.Close(dfd)
	var werr error
	for _, name := range names {
		s.withDeadSlotFile(dfd, name, func(f *os.File, data []byte) bool {
			empty := true
			var zero [SlotSize]byte
			for off := SlotSize; off+SlotSize <= len(data); off += SlotSize {
				rec := data[off : off+SlotSize]
				r, free, ok := decodeSlot(rec)
				if free {
					continue
				}
				if (ok && r.id == id) || (!ok && tornID(rec) == id) {
					if _, err := f.WriteAt(zero[:], int64(off)); err != nil {
						werr = errors.Join(werr, fmt.Errorf("clear claim in %s: %w", name, err))
						empty = false
					}
					continue
				}
				if !ok && tornID(rec) == "" {
					continue // no rollout can be named: readers ignore it, it holds nothing
				}
				empty = false
			}
			return empty
		})
	}
	return werr
}

// legacyClaims counts the per-call claim files under <id>.capture.claims/ (the form earlier versions
// wrote). A file that is empty, not JSON, or of a dead process on this host is stale; one of another
// host or a live process is live. A symlinked claims dir or claim file is never followed and counts
// nothing.
func (s *Store) legacyClaims(id string) (ClaimCount, error) {
	p := filepath.Join(s.dir, id+ClaimsSuffix)
	dfd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return ClaimCount{}, nil
		}
		return ClaimCount{}, fmt.Errorf("list capture claims: %w", err)
	}
	defer unix.Close(dfd)
	names, err := readDirNames(dfd)
	if err != nil {
		return ClaimCount{}, fmt.Errorf("list capture claims: %w", err)
	}
	var c ClaimCount
	host := localHost()
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			continue
		}
		fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // released while we listed, a symlink, or a directory
		}
		f := os.NewFile(uintptr(fd), name)
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			f.Close()
			continue
		}
		b, err := io.ReadAll(io.LimitReader(f, 4096))
		f.Close()
		var info ClaimInfo
		if err != nil || json.Unmarshal(b, &info) != nil || info.PID <= 0 || (info.Host == host && !fsutil.ProcessAlive(info.PID)) {
			c.Stale++
			continue
		}
		c.Live++
	}
	return c, nil
}
