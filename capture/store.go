package capture

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcalls/modelcalls/internal/fsutil"
	"github.com/modelcalls/modelcalls/rollout"
)

// File name suffixes of the store: <rollout_id> plus the suffix names each file of a rollout. The
// capture file and the marker are NeMo Gym's CaptureStore names; the others are ours.
const (
	CaptureSuffix = ".capture.jsonl"
	MarkerSuffix  = ".capture.incomplete"
	// ClaimsSuffix names the per-call claims directory of earlier versions; it is still read and
	// cleared, never created.
	ClaimsSuffix = ".capture.claims"
	// OrphanSuffix names the file that keeps the lines of calls that were in flight when their
	// rollout was cleared (they belong to the earlier attempt, not to the next one's capture).
	OrphanSuffix = ".capture.orphaned.jsonl"
	// ClearedSuffix names the list of model calls that were in flight when the rollout was last
	// cleared (one model call id per line); present only while such calls may still be running.
	ClearedSuffix = ".capture.cleared"
)

// File and directory modes used for everything the store creates (before the umask).
const (
	FileMode fs.FileMode = 0o640
	DirMode  fs.FileMode = 0o750
)

// bigLineBuffer is how much of a line AppendFunc gathers in memory before it starts writing; lines up
// to this size still go out in one write(2).
const bigLineBuffer = 1 << 20

// Store is a capture directory. It keeps recently used capture files open (at most MaxOpenFiles
// beyond those in use) and, once it has claimed a write, one claim slot file; every append still
// locks the file it writes, so one Store may be shared by any number of goroutines, and several
// processes (on several hosts of a shared POSIX file system) may use the same directory at once.
type Store struct {
	dir string
	// MaxOpenFiles bounds the capture files kept open between appends (least recently used are
	// closed first); 0 means DefaultMaxOpenFiles. Set it before the store is used.
	MaxOpenFiles int

	files    fileCache
	claims   claims
	orphaned atomic.Int64
	symlinks atomic.Int64
}

func (s *Store) maxOpen() int {
	if s.MaxOpenFiles > 0 {
		return s.MaxOpenFiles
	}
	return DefaultMaxOpenFiles
}

// noteSymlink counts a symlink refused where a store file belongs.
func (s *Store) noteSymlink() { s.symlinks.Add(1) }

// SymlinksRefused is how many times this Store found a symlink where a capture file, marker, claim
// slot file or claims directory belongs, and refused to follow it.
func (s *Store) SymlinksRefused() int64 { return s.symlinks.Load() }

// OrphanedLines is how many lines this Store wrote to <id>.capture.orphaned.jsonl because their
// rollout was cleared while the call was in flight.
func (s *Store) OrphanedLines() int64 { return s.orphaned.Load() }

// Close closes the capture files kept open and removes this process's claim slot file when no claim
// is outstanding in it. The store stays usable: later appends reopen what they need.
func (s *Store) Close() error {
	s.files.closeAll()
	s.claims.mu.Lock()
	defer s.claims.mu.Unlock()
	sf := s.claims.sf
	if sf == nil || len(s.claims.live) > 0 {
		return nil
	}
	s.claims.sf = nil
	ownSlotFiles.Delete(fileID{sf.dev, sf.ino})
	if sf.atPath() {
		os.Remove(sf.path)
	}
	return sf.f.Close()
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
// Append adds the '\n'. The capture file is kept open across appends (Store.MaxOpenFiles), opened
// O_APPEND|O_NOFOLLOW (created with FileMode), locked exclusively for every append, its torn tail
// repaired, and the pending lines of concurrent callers written with one write and made durable with
// one fdatasync before the lock is released (group commit). When Append returns nil the line is
// durable. A symlink at the capture file's path is refused (the error wraps ErrSymlink).
func (s *Store) Append(id string, line []byte) error {
	if bytes.IndexByte(line, '\n') >= 0 {
		return errors.New("append capture line: line contains a newline")
	}
	if err := rollout.Validate(id); err != nil {
		return err
	}
	return s.appendLine(id, nil, line)
}

// AppendExchange encodes ex with EncodeExchange and appends it like Append. When this Store holds a
// live claim for (id, ex.ModelCallID), the line goes to the capture file that claim pinned, or to
// <id>.capture.orphaned.jsonl when the rollout was cleared while the call was in flight. When ex has
// a ResponseRawFrom reader, or its payloads exceed 1 MiB, the line is streamed to the file like
// AppendFunc instead, so a large line is never held in memory twice.
func (s *Store) AppendExchange(id string, ex *Exchange) error {
	if err := rollout.Validate(id); err != nil {
		return err
	}
	claim := s.lookupClaim(id, ex.ModelCallID)
	size := len(ex.Request) + len(ex.Response) + len(ex.TokenCapture)
	if ex.RequestRaw != nil {
		size += len(*ex.RequestRaw)
	}
	if ex.ResponseRaw != nil {
		size += len(*ex.ResponseRaw)
	}
	streamed := ex.ResponseRawFrom != nil
	if t := ex.ResponseRawEscaped; t != nil {
		size += len(t.Bytes)
		streamed = streamed || t.From != nil
	}
	if streamed || size > bigLineBuffer {
		// Stream big lines to the file instead of building them in memory first.
		return s.commit(id, claim, &appendReq{write: func(w io.Writer) error { return WriteExchange(w, ex) }})
	}
	// The line is built once, with its newline, in a recycled buffer sized for it up front, except
	// for its large parts (the request and response objects, the escaped response_raw: refMin bytes
	// and more), which the buffer only refers to: the write gathers them from where they are, so
	// that a stream's terminal event does not wait for a copy of its whole body first.
	lb := getLineBuf(inlineSize(ex, size) + lineOverhead)
	defer putLineBuf(lb)
	if err := WriteExchange(lb, ex); err != nil {
		return err
	}
	lb.b = append(lb.b, '\n')
	if len(lb.segs) == 0 {
		return s.commit(id, claim, &appendReq{line: lb.b})
	}
	return s.commit(id, claim, &appendReq{segs: lb.done()})
}

// inlineSize is what of size (the payloads and raw texts of ex) the line buffer holds itself: the
// parts known to go to the write by reference (a compact request, the escaped response_raw, each
// refMin bytes or more) are left out. The response is counted in: whether it is compact, and so
// referred to rather than compacted into the buffer, is only found while the line is written.
func inlineSize(ex *Exchange, size int) int {
	if ex.RequestCompact && len(ex.Request) >= refMin {
		size -= len(ex.Request)
	}
	if t := ex.ResponseRawEscaped; t != nil && len(t.Bytes) >= refMin {
		size -= len(t.Bytes)
	}
	return max(size, 0)
}

// refMin is the size from which a part of a line is written from where it is instead of copied
// into the line buffer: below it, a copy costs less than the kernel's handling of one more iovec.
const refMin = 4 << 10

// lineOverhead is room for a line's keys and small values beyond its payloads and raw text (a
// little more than the escaping of typical text adds).
const lineOverhead = 2 << 10

// lineBuf is a growing byte slice to build one line in. A line whose large parts it only refers to
// (ref) is the sequence segs, gathered by done: pieces of b and the referred slices, in order.
type lineBuf struct {
	b    []byte
	segs [][]byte
	mark int // where in b the piece not yet in segs starts
}

func (l *lineBuf) Write(p []byte) (int, error) {
	l.b = append(l.b, p...)
	return len(p), nil
}

// ref appends p to the line without copying it; p must not change until the line is written.
func (l *lineBuf) ref(p []byte) {
	l.cut()
	l.segs = append(l.segs, p)
}

// cut ends the current piece of b. A piece keeps pointing into the array it was written to even
// when b grows into a new one later.
func (l *lineBuf) cut() {
	if len(l.b) > l.mark {
		l.segs = append(l.segs, l.b[l.mark:len(l.b):len(l.b)])
		l.mark = len(l.b)
	}
}

// done returns the line as segments (after at least one ref).
func (l *lineBuf) done() [][]byte {
	l.cut()
	return l.segs
}

func (l *lineBuf) WriteString(s string) (int, error) {
	l.b = append(l.b, s...)
	return len(s), nil
}

// keptLineBufs holds recycled line buffers of up to keptLineBufMax bytes. A sync.Pool is emptied by
// every second garbage collection, and a stream's terminal event comes hundreds of milliseconds
// after the previous line: through a sync.Pool it found no buffer and paid for a fresh ~90 KB one
// (allocation, zeroing, page faults: ~50 µs of the terminal event's hold on the bench machine).
// Larger buffers, up to bigLineBuffer, go to lineBufs.
var keptLineBufs = make(chan *lineBuf, 16)

const keptLineBufMax = 256 << 10

var lineBufs sync.Pool // of *lineBuf

// getLineBuf returns an empty line buffer with room for at least n bytes.
func getLineBuf(n int) *lineBuf {
	var lb *lineBuf
	if n <= keptLineBufMax {
		select {
		case lb = <-keptLineBufs:
		default:
		}
	}
	if lb == nil {
		lb, _ = lineBufs.Get().(*lineBuf)
	}
	if lb == nil {
		lb = &lineBuf{}
	}
	if cap(lb.b) < n {
		lb.b = make([]byte, 0, n+n/8)
	}
	lb.b, lb.segs, lb.mark = lb.b[:0], lb.segs[:0], 0
	return lb
}

// putLineBuf recycles lb, unless it is too large to keep around.
func putLineBuf(lb *lineBuf) {
	clear(lb.segs) // keep nothing of the caller's reachable
	lb.segs = lb.segs[:0]
	switch c := cap(lb.b); {
	case c <= keptLineBufMax:
		select {
		case keptLineBufs <- lb:
		default:
			lineBufs.Put(lb)
		}
	case c <= bigLineBuffer+lineOverhead:
		lineBufs.Put(lb)
	}
}

// AppendFunc appends one line produced by write, for lines too large to build in memory (a spooled
// 100 MiB stream). write must emit exactly one JSON object and no newline; AppendFunc adds the '\n'.
// The line is gathered in a 1 MiB buffer, so lines up to that size still go out in one write; larger
// ones are written in pieces while the exclusive lock keeps other writers out. If write fails or emits
// a newline after part of the line reached the file, the partial line is terminated with '\n' (it
// reads back as one damaged line) and the error is returned.
func (s *Store) AppendFunc(id string, write func(w io.Writer) error) error {
	if err := rollout.Validate(id); err != nil {
		return err
	}
	return s.commit(id, nil, &appendReq{write: write})
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

// CheckWritable proves that the store can hold captures: it creates a hidden probe file in the
// directory, writes and fsyncs a byte, and removes it. It fails (naming the directory) on a
// read-only or full file system, missing permissions, or a directory that is gone; the gateway
// calls it at startup so it never runs while losing every call. On a system where the store cannot
// write (Windows) it fails saying so.
func (s *Store) CheckWritable() error {
	if err := WriteSupported(); err != nil {
		return err
	}
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
	_, err := os.Lstat(p)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, fmt.Errorf("stat %s: %w", p, err)
}

// Clear removes the capture file, the incomplete marker and the per-call claims directory of
// earlier versions of id, and the claims of id that dead processes left in slot files; missing files
// are not an error (clearing before dispatch must work on a fresh rollout). See ClearRollout for calls still in flight.
func (s *Store) Clear(id string) error {
	_, err := s.ClearRollout(id)
	return err
}

// ClearReport says what ClearRollout found.
type ClearReport struct {
	// InFlight is how many live claims of the rollout Clear listed in <id>.capture.cleared: calls in
	// flight whose lines will go to <id>.capture.orphaned.jsonl.
	InFlight int
	// Removed is true when a capture file, marker or claim was there to remove.
	Removed bool
}

// ClearRollout is Clear, reporting what it found. Before anything is removed, the live claims of id
// (calls in flight, in any process) are listed in <id>.capture.cleared (written to a temporary name
// and renamed into place; removed when none is live): their appends check that list under the
// capture file's lock and write to <id>.capture.orphaned.jsonl instead, so an earlier attempt's call
// never lands in the next attempt's capture. The capture file is removed while Clear holds its
// exclusive flock, so an append in progress finishes first. Nothing is followed: a symlink at any of
// these paths is itself removed, its target left alone. The orphan file is never removed by Clear.
func (s *Store) ClearRollout(id string) (ClearReport, error) {
	var rep ClearReport
	if err := WriteSupported(); err != nil {
		return rep, fmt.Errorf("clear capture: %w", err)
	}
	cp, err := s.CapturePath(id)
	if err != nil {
		return rep, err
	}
	mp, _ := s.MarkerPath(id)
	clp, _ := s.ClaimsPath(id)
	live := map[string]bool{}
	if err := s.scanSlotFiles(func(rec slotRecord, isLive, torn bool) {
		if rec.id != id {
			return
		}
		rep.Removed = true
		if isLive && !torn {
			live[rec.mcid] = true
		}
	}); err != nil {
		return rep, fmt.Errorf("clear capture: %w", err)
	}
	rep.InFlight = len(live)
	if err := s.writeCleared(id, live); err != nil {
		return rep, fmt.Errorf("clear capture: %w", err)
	}
	for _, p := range []string{cp, mp, clp} {
		if _, err := os.Lstat(p); err == nil {
			rep.Removed = true
		}
	}
	if err := removeLocked(cp); err != nil {
		return rep, fmt.Errorf("clear capture: %w", err)
	}
	if err := os.Remove(mp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return rep, fmt.Errorf("clear capture: %w", err)
	}
	// RemoveAll removes a symlink itself and never descends through one.
	if err := os.RemoveAll(clp); err != nil {
		return rep, fmt.Errorf("clear capture claims: %w", err)
	}
	if err := s.clearDeadClaims(id); err != nil {
		return rep, fmt.Errorf("clear capture claims: %w", err)
	}
	return rep, nil
}

// ClearedPath returns <dir>/<id>.capture.cleared, the list of calls that were in flight when the
// rollout was last cleared; errors as CapturePath.
func (s *Store) ClearedPath(id string) (string, error) { return s.path(id, ClearedSuffix) }

// maxClearedBytes bounds how much of a cleared list is read (about 30,000 model call ids).
const maxClearedBytes = 1 << 20

// readCleared returns the model call ids listed in <id>.capture.cleared (nil when there is none). A
// symlink there is refused (not followed, counted) and lists nothing.
func (s *Store) readCleared(id string) (map[string]bool, error) {
	p, err := s.ClearedPath(id)
	if err != nil {
		return nil, err
	}
	f, err := openReadNoFollow(p)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, nil
		case errors.Is(err, errIsSymlink):
			s.noteSymlink()
			return nil, nil
		}
		return nil, fmt.Errorf("read cleared list: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxClearedBytes))
	if err != nil {
		return nil, fmt.Errorf("read cleared list: %w", err)
	}
	set := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			set[l] = true
		}
	}
	return set, nil
}

// writeCleared replaces <id>.capture.cleared with the model call ids in live (one per line), or
// removes it when live is empty. The list is written under a temporary name and renamed into place,
// so a reader sees the old list or the new one, never part of one.
func (s *Store) writeCleared(id string, live map[string]bool) error {
	p, err := s.ClearedPath(id)
	if err != nil {
		return err
	}
	if len(live) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	ids := make([]string, 0, len(live))
	for m := range live {
		ids = append(ids, m)
	}
	sort.Strings(ids)
	tmp := filepath.Join(s.dir, fmt.Sprintf(".%s.%d-%s.tmp", id+ClearedSuffix, os.Getpid(), NewModelCallID()[:8]))
	// O_EXCL: a name that exists, a symlink included, is not opened.
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, FileMode)
	if err != nil {
		return fmt.Errorf("write cleared list: %w", err)
	}
	_, werr := f.WriteString(strings.Join(ids, "\n") + "\n")
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write cleared list: %w", err)
	}
	// rename replaces whatever is at p, a symlink included, without following it.
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write cleared list: %w", err)
	}
	return fsutil.SyncDir(s.dir)
}

// entries lists the capture dir.
func (s *Store) entries() ([]os.DirEntry, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list capture dir: %w", err)
	}
	return ents, nil
}

// Rollouts lists the rollout ids that have a capture file or an incomplete marker in the store,
// sorted. Files whose id part is not a valid rollout id are ignored.
func (s *Store) Rollouts() ([]string, error) {
	ents, err := s.entries()
	if err != nil {
		return nil, err
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
