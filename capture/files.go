package capture

import (
	"bufio"
	"bytes"
	"container/list"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/modelcalls/modelcalls/internal/fsutil"
)

// DefaultMaxOpenFiles is how many capture files a Store keeps open between appends when
// Store.MaxOpenFiles is 0. Files pinned by a claim or an append in progress stay open beyond it.
const DefaultMaxOpenFiles = 256

// ErrSymlink is wrapped by the error of any store operation that found a symbolic link where a
// capture file, marker, claim slot file or claims directory belongs. The store never follows one.
var ErrSymlink = errors.New("refusing to follow a symlink in the capture dir")

// errIsSymlink is openReadNoFollow's error for a symlink at the path (not followed).
var errIsSymlink = errors.New("is a symlink")

// errReplaced says the open capture file is no longer the one at its path; the append reopens and
// tries again.
var errReplaced = errors.New("capture file replaced")

// errCleared says the append's claim was listed by a clear of its rollout: the line goes to the
// orphan file.
var errCleared = errors.New("rollout cleared while the call was in flight")

// syncHook, when set (tests), runs in place of fdatasync on a capture file.
var syncHook func(f *os.File) error

// openFile is one capture file kept open between appends, with its group-commit queue.
type openFile struct {
	id       string
	path     string
	f        *os.File
	dev, ino uint64
	// mnt is the id of the mount the file was opened through (statx STATX_MNT_ID); hasMnt is false
	// where the kernel does not report one (before Linux 5.8), and the dir's read-only flag is
	// checked with statfs instead.
	mnt    uint64
	hasMnt bool
	refs   int           // claims and appends holding it (fileCache.mu)
	elem   *list.Element // in the LRU while refs == 0
	gone   bool          // no longer the cache's entry for id: closed at refs == 0

	gmu     sync.Mutex
	pending []*appendReq
	leading bool
	broken  bool // a write or sync failed: the file's state is unknown, reopen
	// end is the file's size after this Store's last batch, whose last byte is then its '\n' (the
	// group-commit leader's, under the flock); 0 when unknown. A file still of that size needs no
	// torn-tail read.
	end int64
}

type appendReq struct {
	line      []byte                // one line with its '\n', or nil when segs or write is set
	segs      [][]byte              // one line with its '\n', as the pieces to write in order
	write     func(io.Writer) error // a large line streamed under the lock (AppendFunc)
	claimMCID string                // the model call id of the append's claim ("" when unclaimed)
	claimFile *openFile             // the capture file the claim pinned when it was made, or nil
	done      chan appendResult     // buffered 1
}

type appendResult struct {
	err  error
	lead bool // the previous leader hands the next batch to this caller
}

// fileCache keeps capture files open across appends, bounded by an LRU of unpinned files.
type fileCache struct {
	mu  sync.Mutex
	m   map[string]*openFile
	lru list.List // of *openFile with refs == 0, most recent at the front
	// lastMax is the bound last given to evictLocked.
	lastMax int
}

func (e *openFile) isBroken() bool {
	e.gmu.Lock()
	defer e.gmu.Unlock()
	return e.broken
}

// pinKept returns id's capture file pinned when the cache holds it open, without a system call;
// nil otherwise.
func (c *fileCache) pinKept(id string) *openFile {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[id]
	if e == nil || e.gone {
		return nil
	}
	c.pin(e)
	return e
}

// pin takes a reference (c.mu held).
func (c *fileCache) pin(e *openFile) {
	if e.refs == 0 && e.elem != nil {
		c.lru.Remove(e.elem)
		e.elem = nil
	}
	e.refs++
}

// release drops a reference; an unpinned file goes to the LRU (or is closed when retired).
func (c *fileCache) release(e *openFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	if e.refs > 0 {
		return
	}
	if e.gone {
		e.f.Close()
		return
	}
	e.elem = c.lru.PushFront(e)
	c.evictLocked(0)
}

// retire removes e from the cache; it is closed when its last reference goes.
func (c *fileCache) retire(e *openFile) {
	c.mu.Lock()
	c.retireLocked(e)
	c.mu.Unlock()
}

func (c *fileCache) retireLocked(e *openFile) {
	if c.m[e.id] == e {
		delete(c.m, e.id)
	}
	if e.gone {
		return
	}
	e.gone = true
	if e.refs == 0 {
		if e.elem != nil {
			c.lru.Remove(e.elem)
			e.elem = nil
		}
		e.f.Close()
	}
}

// evictLocked closes least recently used unpinned files while more than max are open (max <= 0:
// the limit last given).
func (c *fileCache) evictLocked(max int) {
	if max > 0 {
		c.lastMax = max
	}
	for len(c.m) > c.lastMax && c.lru.Len() > 0 {
		e := c.lru.Remove(c.lru.Back()).(*openFile)
		e.elem = nil
		delete(c.m, e.id)
		e.gone = true
		e.f.Close()
	}
}

// closeAll closes every unpinned file (Store.Close).
func (c *fileCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.lru.Len() > 0 {
		e := c.lru.Remove(c.lru.Back()).(*openFile)
		e.elem = nil
		delete(c.m, e.id)
		e.gone = true
		e.f.Close()
	}
}

// openCount is how many capture files the cache holds open (tests).
func (c *fileCache) openCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// appendLine appends one line (no '\n' yet) for rollout id, through the claim's pinned file when
// claim is non-nil.
func (s *Store) appendLine(id string, claim *Claim, line []byte) error {
	buf := make([]byte, len(line)+1)
	copy(buf, line)
	buf[len(line)] = '\n'
	return s.commit(id, claim, &appendReq{line: buf})
}

// commit hands req to the group commit of the rollout's capture file, reopening it when it was
// removed or replaced. A claimed append whose claim a clear listed goes to the orphan file.
func (s *Store) commit(id string, claim *Claim, req *appendReq) error {
	if claim != nil {
		req.claimMCID, req.claimFile = claim.modelCallID, claim.file
	}
	for try := 0; ; try++ {
		e, err := s.files.acquire(s, id, true)
		if err != nil {
			return err
		}
		err = s.groupCommit(e, req)
		if errors.Is(err, errReplaced) {
			s.files.retire(e)
		}
		s.files.release(e)
		if errors.Is(err, errCleared) {
			return s.appendOrphan(id, req)
		}
		if !errors.Is(err, errReplaced) || try == 3 {
			return err
		}
	}
}

// groupCommit queues req on e. The first caller to find no leader becomes the leader: it writes
// every pending line in one write under the exclusive flock and syncs once; each caller returns only
// after the sync that covers its line. A leader that finds more lines queued when it is done hands
// the next batch to the first of their callers (leader/follower group commit).
func (s *Store) groupCommit(e *openFile, req *appendReq) error {
	req.done = make(chan appendResult, 1)
	e.gmu.Lock()
	e.pending = append(e.pending, req)
	if e.leading {
		e.gmu.Unlock()
		r := <-req.done
		if !r.lead {
			return r.err
		}
		e.gmu.Lock()
	} else {
		e.leading = true
	}
	batch := e.pending
	e.pending = nil
	e.gmu.Unlock()

	errs := s.writeBatch(e, batch)
	var mine error
	for i, r := range batch {
		if r == req {
			mine = errs[i]
		} else {
			r.done <- appendResult{err: errs[i]}
		}
	}
	e.gmu.Lock()
	if len(e.pending) > 0 {
		next := e.pending[0]
		e.gmu.Unlock()
		next.done <- appendResult{lead: true}
	} else {
		e.leading = false
		e.gmu.Unlock()
	}
	return mine
}

// writeBatch appends the batch's lines to e under the exclusive flock: it checks that e is still
// the file at its path (else every request gets errReplaced), repairs a torn tail, writes the
// buffered lines in one write and streamed lines in turn, and fdatasyncs once (plus the directory
// when the file had no content yet). It returns one error per request.
func (s *Store) writeBatch(e *openFile, batch []*appendReq) []error {
	errs := make([]error, len(batch))
	fail := func(err error) []error {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	if err := fsutil.Lock(e.f, true); err != nil {
		return fail(err)
	}
	defer fsutil.Unlock(e.f)
	size, ok, err := e.atPath(s.dir)
	if err != nil {
		return fail(err)
	}
	if !ok {
		// Cleared or replaced since it was opened: Clear takes this lock before it unlinks, so a
		// line is never written into a file that is already gone. A mount put over the dir since
		// (a read-only bind mount) counts as a replacement: the reopen goes through it.
		return fail(errReplaced)
	}
	var clearedSet map[string]bool
	for i, r := range batch {
		if r.claimMCID == "" || r.claimFile == e {
			// Unclaimed; or the file was open, and pinned by the claim, from the claim to now, and
			// the path still names it: the rollout was not cleared since the claim (a clear unlinks
			// the file under this lock before it lists the claims, and an inode held open cannot be
			// reused for a new file at the path), so no clear can have listed the claim.
			continue
		}
		if clearedSet == nil {
			set, err := s.readCleared(e.id)
			if err != nil {
				return fail(err)
			}
			if clearedSet = set; set == nil {
				clearedSet = map[string]bool{}
			}
		}
		if clearedSet[r.claimMCID] {
			errs[i] = errCleared
		}
	}
	repair := false
	e.gmu.Lock()
	ours := e.end == size
	e.gmu.Unlock()
	if size > 0 && !ours {
		var last [1]byte
		if _, err := e.f.ReadAt(last[:], size-1); err != nil {
			return fail(fmt.Errorf("read capture file tail: %w", err))
		}
		repair = last[0] != '\n'
	}
	broken := false
	var iov [][]byte // the buffered lines' bytes, as they are: written with one vectored write
	var buffered []int
	// wrote counts the bytes of buffered lines written; tracked says the batch wrote nothing else,
	// so that the file's new size is known to end with a '\n' of ours.
	var wrote int64
	tracked := true
	// unsynced says something was written without RWF_DSYNC: the batch ends with an fdatasync.
	unsynced := false
	// flush writes the buffered lines in one write, durable when it returns (RWF_DSYNC) where the
	// kernel offers that; after a failed write the tail may be torn, so the rest of the batch fails
	// too (the callers mark the rollout incomplete).
	flush := func() {
		if len(buffered) == 0 {
			return
		}
		if repair {
			iov = append([][]byte{{'\n'}}, iov...)
			repair = false
		}
		n, dsynced, err := writeDsync(e.f, iov)
		unsynced = unsynced || !dsynced
		if err != nil {
			broken = true
			err = fmt.Errorf("write capture line: %w", err)
			for _, i := range buffered {
				errs[i] = err
			}
		} else {
			wrote += int64(n)
		}
		clear(iov)
		iov, buffered = iov[:0], buffered[:0]
	}
	for i, r := range batch {
		if errs[i] != nil {
			continue // cleared: goes to the orphan file
		}
		if broken {
			errs[i] = errors.New("write capture line: an earlier write of the batch failed")
			continue
		}
		if r.write == nil {
			if r.segs != nil {
				iov = append(iov, r.segs...)
			} else {
				iov = append(iov, r.line)
			}
			buffered = append(buffered, i)
			continue
		}
		flush()
		if broken {
			errs[i] = errors.New("write capture line: an earlier write of the batch failed")
			continue
		}
		errs[i] = streamLine(e.f, repair, r.write)
		repair, tracked, unsynced = false, false, true
	}
	flush()
	serr := error(nil)
	switch {
	case !unsynced:
		// Every byte went out with RWF_DSYNC (or nothing was written).
	case syncHook != nil:
		serr = syncHook(e.f)
	default:
		serr = fdatasync(e.f)
	}
	if serr != nil {
		broken = true
		for i := range errs {
			if errs[i] == nil || !errors.Is(errs[i], errCleared) {
				errs[i] = fmt.Errorf("fsync capture file: %w", serr)
			}
		}
	} else if size == 0 && (wrote > 0 || !tracked) {
		// The file may be new: make its directory entry durable too (once per rollout).
		if err := fsutil.SyncDir(s.dir); err != nil {
			fail(err)
		}
	}
	e.gmu.Lock()
	e.end = 0
	if broken {
		// After a failed write or sync the file's state is unknown; the next append reopens it.
		e.broken = true
	} else if tracked && wrote > 0 {
		e.end = size + wrote
	}
	e.gmu.Unlock()
	return errs
}

// streamLine writes one large line produced by write to f (the exclusive lock held), the repair byte
// first when set. The line is gathered in a 1 MiB buffer; if write fails or emits a newline after
// part of the line reached the file, the partial line is ended with '\n' (it reads back as one
// damaged line).
func streamLine(f *os.File, repair bool, write func(io.Writer) error) error {
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
			f.Write([]byte{'\n'})
		}
		return fmt.Errorf("write capture line: %w", err)
	}
	if _, err := f.Write([]byte{'\n'}); err != nil {
		return fmt.Errorf("write capture line: %w", err)
	}
	return nil
}

// OrphanPath returns <dir>/<id>.capture.orphaned.jsonl, where the lines of calls that were in
// flight when their rollout was cleared go; errors as CapturePath.
func (s *Store) OrphanPath(id string) (string, error) { return s.path(id, OrphanSuffix) }

// OrphanLines counts the lines of id's orphan file (OrphanPath) that are not blank, a last line
// without its newline included; a line of any length counts once. It is 0 when there is no such
// file or it is not a regular file: the file is opened without following a symlink (and without
// blocking on a FIFO), and checked on the descriptor it is read from, so nothing swapped in after
// the check is read. Errors: those of OrphanPath, and those of opening or reading the file.
func (s *Store) OrphanLines(id string) (int, error) {
	p, err := s.OrphanPath(id)
	if err != nil {
		return 0, err
	}
	f, err := openReadNoFollow(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errIsSymlink) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return 0, err
	} else if !st.Mode().IsRegular() {
		return 0, nil
	}
	n := 0
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadSlice('\n')
		if len(bytes.TrimSpace(line)) > 0 && (err == nil || err == io.EOF) {
			n++
		}
		if err == bufio.ErrBufferFull {
			// A long line: read on to its end, count it once.
			for err == bufio.ErrBufferFull {
				_, err = r.ReadSlice('\n')
			}
			n++
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
}
