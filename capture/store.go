package capture

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/modelcalls/modelcalls/internal/fsutil"
	"github.com/modelcalls/modelcalls/rollout"
)

// File name suffixes of the store (reference §3, SPEC §4).
const (
	CaptureSuffix = ".capture.jsonl"
	MarkerSuffix  = ".capture.incomplete"
	ClaimsSuffix  = ".capture.claims"
)

// File and directory modes used for everything the store creates (before the umask).
const (
	FileMode fs.FileMode = 0o640
	DirMode  fs.FileMode = 0o750
)

// bigLineBuffer is how much of a line AppendFunc gathers in memory before it starts writing; lines up
// to this size still go out in one write(2).
const bigLineBuffer = 1 << 20

// Store is a capture directory. It holds no open files; every operation opens, locks and closes what
// it needs, so one Store may be shared by any number of goroutines, and several processes (on several
// hosts of a shared POSIX file system) may use the same directory at once.
type Store struct {
	dir string
}

// Open returns the store for dir, creating the directory (and parents, mode DirMode) when missing.
// It fails when dir is empty or cannot be created.
func Open(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("capture dir is empty")
	}
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return nil, fmt.Errorf("create capture dir: %w", err)
	}
	return &Store{dir: dir}, nil
}

// OpenExisting returns the store for dir without creating anything. It fails when dir is empty,
// when it does not exist (the error wraps fs.ErrNotExist), and when it is not a directory.
func OpenExisting(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("capture dir is empty")
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("capture dir: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("capture dir %s: not a directory", dir)
	}
	return &Store{dir: dir}, nil
}

// Dir returns the store's directory as given to Open.
func (s *Store) Dir() string { return s.dir }

func (s *Store) path(id, suffix string) (string, error) {
	if err := rollout.Validate(id); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, id+suffix), nil
}

// CapturePath returns <dir>/<id>.capture.jsonl. It fails (wrapping rollout.ErrInvalidID) for an
// invalid id, before any file name is built from it.
func (s *Store) CapturePath(id string) (string, error) { return s.path(id, CaptureSuffix) }

// MarkerPath returns <dir>/<id>.capture.incomplete; errors as CapturePath.
func (s *Store) MarkerPath(id string) (string, error) { return s.path(id, MarkerSuffix) }

// ClaimsPath returns <dir>/<id>.capture.claims; errors as CapturePath.
func (s *Store) ClaimsPath(id string) (string, error) { return s.path(id, ClaimsSuffix) }

// Append appends one exchange line for rollout id. line must be one JSON object without a newline;
// Append adds the '\n'. The file is opened O_APPEND (created with FileMode), locked exclusively, its
// torn tail repaired, the line written with a single write and the file fsynced before the lock is
// released. When Append returns nil the line is durable.
func (s *Store) Append(id string, line []byte) error {
	if bytes.IndexByte(line, '\n') >= 0 {
		return errors.New("append capture line: line contains a newline")
	}
	return s.appendLocked(id, func(f *os.File, repair bool) error {
		buf := make([]byte, 0, len(line)+2)
		if repair {
			buf = append(buf, '\n')
		}
		buf = append(buf, line...)
		buf = append(buf, '\n')
		if _, err := f.Write(buf); err != nil {
			return fmt.Errorf("write capture line: %w", err)
		}
		return nil
	})
}

// AppendExchange encodes ex with EncodeExchange and appends it like Append. When ex has a
// ResponseRawFrom reader, or its payloads exceed 1 MiB, the line is streamed to the file like
// AppendFunc instead, so a large line is never held in memory twice.
func (s *Store) AppendExchange(id string, ex *Exchange) error {
	size := len(ex.Request) + len(ex.Response)
	if ex.RequestRaw != nil {
		size += len(*ex.RequestRaw)
	}
	if ex.ResponseRaw != nil {
		size += len(*ex.ResponseRaw)
	}
	if ex.ResponseRawFrom != nil || size > bigLineBuffer {
		// Stream big lines to the file instead of building them in memory first.
		return s.AppendFunc(id, func(w io.Writer) error { return WriteExchange(w, ex) })
	}
	line, err := EncodeExchange(ex)
	if err != nil {
		return err
	}
	return s.Append(id, line)
}

// AppendFunc appends one line produced by write, for lines too large to build in memory (a spooled
// 100 MiB stream). write must emit exactly one JSON object and no newline; AppendFunc adds the '\n'.
// The line is gathered in a 1 MiB buffer, so lines up to that size still go out in one write; larger
// ones are written in pieces while the exclusive lock keeps other writers out. If write fails or emits
// a newline after part of the line reached the file, the partial line is terminated with '\n' (it
// reads back as one damaged line) and the error is returned.
func (s *Store) AppendFunc(id string, write func(w io.Writer) error) error {
	return s.appendLocked(id, func(f *os.File, repair bool) error {
		nw := &newlineGuard{w: f}
		bw := bufio.NewWriterSize(nw, bigLineBuffer)
		if repair {
			nw.allowOne = true
			bw.WriteByte('\n')
		}
		err := write(bw)
		if err == nil {
			err = bw.Flush()
		}
		if err == nil && nw.sawNewline {
			err = errors.New("capture line contains a newline")
		}
		if err != nil {
			if nw.written > 0 {
				// Part of the line is in the file: end it so the next line starts clean.
				f.Write([]byte{'\n'})
			}
			return fmt.Errorf("write capture line: %w", err)
		}
		if _, err := f.Write([]byte{'\n'}); err != nil {
			return fmt.Errorf("write capture line: %w", err)
		}
		return nil
	})
}

// newlineGuard counts bytes reaching the file and notes any newline past the repair byte.
type newlineGuard struct {
	w          io.Writer
	written    int64
	allowOne   bool
	sawNewline bool
}

func (g *newlineGuard) Write(p []byte) (int, error) {
	q := p
	if g.allowOne && len(q) > 0 && q[0] == '\n' {
		g.allowOne = false
		q = q[1:]
	}
	if bytes.IndexByte(q, '\n') >= 0 {
		g.sawNewline = true
		return 0, errors.New("capture line contains a newline")
	}
	n, err := g.w.Write(p)
	g.written += int64(n)
	return n, err
}

// appendLocked opens the capture file for append, takes the exclusive lock, tells write whether the
// tail needs repair, fsyncs, and syncs the directory the first time the file gets content.
func (s *Store) appendLocked(id string, write func(f *os.File, repair bool) error) error {
	p, err := s.CapturePath(id)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_APPEND|os.O_CREATE, FileMode)
	if err != nil {
		return fmt.Errorf("open capture file: %w", err)
	}
	defer f.Close()
	if err := fsutil.Lock(f, true); err != nil {
		return err
	}
	defer fsutil.Unlock(f)
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat capture file: %w", err)
	}
	repair := false
	if size := st.Size(); size > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], size-1); err != nil {
			return fmt.Errorf("read capture file tail: %w", err)
		}
		repair = last[0] != '\n'
	}
	if err := write(f, repair); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync capture file: %w", err)
	}
	if st.Size() == 0 {
		// The file may be new: make its directory entry durable too (once per rollout).
		if err := fsutil.SyncDir(s.dir); err != nil {
			return err
		}
	}
	return nil
}

// CheckWritable proves that the store can hold captures: it creates a hidden probe file in the
// directory, writes and fsyncs a byte, and removes it. It fails (naming the directory) on a
// read-only or full file system, missing permissions, or a directory that is gone; the gateway
// calls it at startup so it never runs while losing every call.
func (s *Store) CheckWritable() error {
	p := filepath.Join(s.dir, fmt.Sprintf(".modelcalls-write-check-%d-%s", os.Getpid(), NewModelCallID()[:8]))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, FileMode)
	if err != nil {
		return fmt.Errorf("capture dir %s is not writable: %w", s.dir, err)
	}
	_, werr := f.Write([]byte{'\n'})
	serr := f.Sync()
	cerr := f.Close()
	rerr := os.Remove(p)
	if err := errors.Join(werr, serr, cerr, rerr); err != nil {
		return fmt.Errorf("capture dir %s is not writable: %w", s.dir, err)
	}
	return nil
}

// MarkIncomplete creates the empty incomplete marker for id (idempotent) and syncs the directory,
// recording that a capture write for this rollout failed (reference §3.3).
func (s *Store) MarkIncomplete(id string) error {
	p, err := s.MarkerPath(id)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, FileMode)
	if err != nil {
		return fmt.Errorf("create incomplete marker: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create incomplete marker: %w", err)
	}
	return fsutil.SyncDir(s.dir)
}

// Stat reports whether the capture file and the incomplete marker of id exist. Errors other than
// "does not exist" (permissions, invalid id) are returned.
func (s *Store) Stat(id string) (hasCapture, hasMarker bool, err error) {
	cp, err := s.CapturePath(id)
	if err != nil {
		return false, false, err
	}
	mp, _ := s.MarkerPath(id)
	if hasCapture, err = exists(cp); err != nil {
		return false, false, err
	}
	if hasMarker, err = exists(mp); err != nil {
		return false, false, err
	}
	return hasCapture, hasMarker, nil
}

func exists(p string) (bool, error) {
	_, err := os.Stat(p)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, fmt.Errorf("stat %s: %w", p, err)
}

// Clear removes the capture file, the incomplete marker and the claims directory of id; missing
// files are not an error (reference §9.1, plus the claims of SPEC §4).
func (s *Store) Clear(id string) error {
	cp, err := s.CapturePath(id)
	if err != nil {
		return err
	}
	mp, _ := s.MarkerPath(id)
	clp, _ := s.ClaimsPath(id)
	for _, p := range []string{cp, mp} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("clear capture: %w", err)
		}
	}
	if err := os.RemoveAll(clp); err != nil {
		return fmt.Errorf("clear capture claims: %w", err)
	}
	return nil
}

// Rollouts lists the rollout ids that have a capture file or an incomplete marker in the store,
// sorted. Files whose id part is not a valid rollout id are ignored.
func (s *Store) Rollouts() ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list capture dir: %w", err)
	}
	seen := map[string]bool{}
	for _, e := range ents {
		name := e.Name()
		var id string
		switch {
		case strings.HasSuffix(name, CaptureSuffix):
			id = strings.TrimSuffix(name, CaptureSuffix)
		case strings.HasSuffix(name, MarkerSuffix):
			id = strings.TrimSuffix(name, MarkerSuffix)
		default:
			continue
		}
		if rollout.Validate(id) == nil {
			seen[id] = true
		}
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}
