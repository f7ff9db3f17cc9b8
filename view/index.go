package view

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/record"
	"github.com/modelcalls/modelcalls/rollout"
)

// RolloutSummary is one row of the rollout list (GET /api/rollouts) and the head of a rollout's page.
// Token sums add the calls where the count is known and are null when no call knows it (0 is a
// count: a call that reports 0 makes the sum 0); the latency sum adds the calls that have one.
type RolloutSummary struct {
	ID              string   `json:"id"`
	Dir             string   `json:"dir"`              // capture dir holding the rollout
	HasCapture      bool     `json:"has_capture"`      // <id>.capture.jsonl exists
	Calls           int      `json:"calls"`            // readable capture lines (records)
	Errors          int      `json:"errors"`           // calls with an error_category
	Pending         int      `json:"pending"`          // live claims: capture writes still in progress
	Abandoned       int      `json:"abandoned"`        // stale claims: writes whose process is gone
	DamagedLines    int      `json:"damaged_lines"`    // unreadable lines (torn, invalid JSON, bad envelope)
	Incomplete      bool     `json:"incomplete"`       // the <id>.capture.incomplete marker exists
	TokensIn        *int64   `json:"tokens_in"`        // tokens
	TokensOut       *int64   `json:"tokens_out"`       // tokens
	TokensCached    *int64   `json:"tokens_cached"`    // prompt tokens read from the cache
	TokensReasoning *int64   `json:"tokens_reasoning"` // reasoning tokens (part of tokens_out)
	LatencyMS       float64  `json:"latency_ms"`       // sum of the calls' latency_total_ms, milliseconds
	MaxTTFTMS       *float64 `json:"max_ttft_ms"`      // largest latency_ttft_ms, milliseconds
	StartedAt       *float64 `json:"started_at"`       // earliest started_at, seconds since the Unix epoch
	EndedAt         *float64 `json:"ended_at"`         // latest completed_at, seconds since the Unix epoch
	DurationS       *float64 `json:"duration_s"`       // ended_at - started_at, seconds
	Model           *string  `json:"model"`            // the model of most calls (ties: first seen)
	Dialect         *string  `json:"dialect"`          // the dialect of most calls
	// Record holds the top-level scalar fields (string, number, bool, null) of the rollout's record
	// in the --rollouts file, as written there; nil without one.
	Record map[string]json.RawMessage `json:"record,omitempty"`
	// InRecords is true when the rollout has a record in the --rollouts file.
	InRecords bool `json:"in_records"`
}

// callStat is the part of one call the overview needs, kept for every indexed call, and where its
// line is in the capture file, so that a call's page reads that line alone. NaN and -1 mean
// unknown.
type callStat struct {
	start, end, latency, ttft  float64 // end: completed_at
	in, out, reasoning, cached int64
	creation                   int64
	model, dialect, errcat     uint32 // interned strings; 0 = unknown / no error
	cacheHit                   int8   // -1 unknown, 0 miss, 1 hit
	off                        int64  // the line's offset in the capture file, bytes
	size                       int    // the line's length without its newline, bytes
	line, index                int    // 1-based line number, capture index (call_index)
}

// fileKey identifies the state of a rollout's files; when it changes the rollout is read again.
type fileKey struct {
	size        int64
	mtime       int64
	hasCapture  bool
	marker      bool
	live, stale int
}

type entry struct {
	sum     RolloutSummary
	calls   []callStat    // readable lines, in file order
	damaged []DamagedLine // unreadable lines, in file order
	key     fileKey
	store   *capture.Store
	// resume is where the next read of the capture file goes on: the file is read incrementally,
	// only what was appended since. done and doneDamaged count the calls and damaged lines read
	// from complete lines; the rest came from a last line without its newline yet, read again.
	resume            capture.Resume
	done, doneDamaged int
}

// recordFields is what the viewer keeps of one rollout record.
type recordFields struct {
	raw map[string]json.RawMessage
	val map[string]any // float64, string, bool or nil
}

// Progress tells how far the index has got.
type Progress struct {
	Indexed  int  `json:"indexed"`  // rollouts read in the current pass
	Total    int  `json:"total"`    // rollouts found in the current pass
	Complete bool `json:"complete"` // the first full pass is done
	Passes   int  `json:"passes"`   // full passes completed
	// Errors lists problems of the last pass (a dir that cannot be listed, a rollout that cannot be
	// read, an unreadable --rollouts file), at most 20.
	Errors []string `json:"errors"`
}

// Index holds a summary of every rollout of the capture dirs and keeps it current by rescanning.
// It never writes to the capture dirs.
type Index struct {
	stores       []*capture.Store
	rolloutsPath string
	log          *slog.Logger

	mu       sync.RWMutex
	entries  map[string]*entry
	version  uint64
	changed  chan struct{} // closed and replaced when version moves
	progress Progress
	strMu    sync.Mutex // guards strs (appends) and strIdx; readers copy strs under it
	strs     []string   // interned strings, [0] = ""
	strIdx   map[string]uint32
	records  map[string]*recordFields
	recKeys  []string // record field names, sorted
	recKey   fileKey
	overview *Overview
	ovVer    uint64

	// scanned counts the bytes of capture lines the index has read (for tests: a live update reads
	// only what was appended).
	scanned atomic.Int64

	digMu    sync.Mutex // guards digests and digClock
	digests  map[string]*digest
	digClock uint64

	linMu    sync.Mutex // guards lineages
	lineages map[string]lineageCached

	// MinInterval is the shortest pause between two scans; the pause grows to 4x the last scan's
	// duration so that a large dir does not keep a core busy.
	MinInterval time.Duration
}

func newIndex(stores []*capture.Store, rolloutsPath string, log *slog.Logger) *Index {
	return &Index{
		stores: stores, rolloutsPath: rolloutsPath, log: log,
		entries: map[string]*entry{}, changed: make(chan struct{}), progress: Progress{Errors: []string{}},
		strs: []string{""}, strIdx: map[string]uint32{"": 0},
		MinInterval: 500 * time.Millisecond,
	}
}

// Run scans until ctx is done.
func (x *Index) Run(ctx context.Context) {
	for {
		start := time.Now()
		x.scan(ctx)
		wait := max(x.MinInterval, 4*time.Since(start))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Progress returns how far indexing has got.
func (x *Index) Progress() Progress {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.progress
}

// Version returns the change token and a channel closed when it next moves.
func (x *Index) Version() (uint64, <-chan struct{}) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.version, x.changed
}

// bump moves the version; x.mu must be held for writing.
func (x *Index) bump() {
	x.version++
	close(x.changed)
	x.changed = make(chan struct{})
}

// intern returns the index of *p in the string table; x.strMu must be held.
func (x *Index) intern(p *string) uint32 {
	if p == nil {
		return 0
	}
	if i, ok := x.strIdx[*p]; ok {
		return i
	}
	x.strs = append(x.strs, *p)
	i := uint32(len(x.strs) - 1)
	x.strIdx[*p] = i
	return i
}

// found is one rollout id seen in a dir listing.
type found struct {
	store       *capture.Store
	capture     fs.DirEntry
	marker      bool
	claimStores []*capture.Store   // dirs holding claims of the rollout
	claims      capture.ClaimCount // summed over those dirs
}

// scan makes one pass over the capture dirs: it lists them, reads every rollout whose files changed
// since the last pass, and drops rollouts whose files are gone. Changes are published in batches
// (every 200 ms) so that the first rollouts of a large dir show while the rest is read.
func (x *Index) scan(ctx context.Context) {
	var errs []string
	note := func(format string, a ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Sprintf(format, a...))
		}
	}
	recsChanged := x.loadRecords(note)

	ids := map[string]*found{}
	// get returns the entry of a valid rollout id, adding it on first sight; nil for an invalid id
	// (a file name that only looks like a capture).
	get := func(id string) *found {
		if rollout.Validate(id) != nil {
			return nil
		}
		f := ids[id]
		if f == nil {
			f = &found{}
			ids[id] = f
		}
		return f
	}
	for _, st := range x.stores {
		ents, err := os.ReadDir(st.Dir())
		if err != nil {
			note("list %s: %v", st.Dir(), err)
			continue
		}
		for _, e := range ents {
			name := e.Name()
			var id, kind string
			switch {
			case strings.HasSuffix(name, capture.CaptureSuffix):
				id, kind = strings.TrimSuffix(name, capture.CaptureSuffix), "capture"
			case strings.HasSuffix(name, capture.MarkerSuffix):
				id, kind = strings.TrimSuffix(name, capture.MarkerSuffix), "marker"
			default:
				continue
			}
			f := get(id)
			if f == nil {
				continue
			}
			// The first dir holding the capture file or the marker owns the rollout (as merge
			// picks it); claims count in every dir.
			switch kind {
			case "capture":
				if f.store == nil || f.store == st {
					f.store, f.capture = st, e
				}
			case "marker":
				if f.store == nil || f.store == st {
					f.store, f.marker = st, true
				}
			}
		}
		// Claims live in the dir's claim slot files (and per-call dirs of earlier versions): one
		// read per dir and pass gives every rollout's counts, including rollouts whose only trace
		// so far is a call in flight.
		cl, err := st.AllClaims()
		if err != nil {
			note("claims in %s: %v", st.Dir(), err)
		}
		for id, c := range cl {
			f := get(id)
			if f == nil {
				continue
			}
			f.claimStores = append(f.claimStores, st)
			f.claims.Add(c)
		}
	}
	x.mu.RLock()
	for id := range x.records {
		if ids[id] == nil {
			ids[id] = &found{}
		}
	}
	x.mu.RUnlock()

	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)

	x.mu.Lock()
	removed := false
	for id := range x.entries {
		if ids[id] == nil {
			delete(x.entries, id)
			removed = true
		}
	}
	x.progress.Total = len(sorted)
	if !x.progress.Complete {
		x.progress.Indexed = 0
	}
	if removed || recsChanged {
		x.applyRecordsLocked()
		x.bump()
	}
	x.mu.Unlock()

	// The previous pass's file keys, copied once so that the loop below takes no lock per rollout.
	x.mu.RLock()
	prevs := make(map[string]*entry, len(x.entries))
	for id, e := range x.entries {
		prevs[id] = e
	}
	x.mu.RUnlock()

	// Changed rollouts are applied in batches, every 200 ms, under one write lock: readers (page
	// requests) are never held up for longer than one batch, and the indexer never waits for them
	// once per rollout.
	var batch []*entry
	lastPublish, flushes := time.Now(), x.progress.Passes
	if !x.progress.Complete {
		flushes = 0
	}
	flush := func(indexed int, passDone bool) {
		x.mu.Lock()
		for _, e := range batch {
			x.applyRecordLocked(e)
			x.entries[e.sum.ID] = e
			x.version++
		}
		x.mu.Unlock()
		x.publish(indexed, passDone, errs, len(batch) > 0)
		batch, lastPublish = batch[:0], time.Now()
		flushes++
	}
	for i, id := range sorted {
		if ctx.Err() != nil {
			return
		}
		f := ids[id]
		var key fileKey
		if f.capture != nil {
			if info, err := f.capture.Info(); err == nil {
				key.size, key.mtime, key.hasCapture = info.Size(), info.ModTime().UnixNano(), true
			}
		}
		key.marker = f.marker
		key.live, key.stale = f.claims.Live, f.claims.Stale
		st := f.store
		if st == nil && len(f.claimStores) > 0 {
			st = f.claimStores[0]
		}
		if old, ok := prevs[id]; !ok || old.key != key || old.store != st {
			e, err := x.readRollout(id, st, key, old)
			if err != nil {
				note("read rollout %s: %v", id, err)
			}
			batch = append(batch, e)
		}
		// The first rollouts of the first pass go out at once: they are the list's first page.
		if len(batch) > 0 && (time.Since(lastPublish) > 200*time.Millisecond || (flushes == 0 && len(batch) >= 100)) {
			flush(i+1, false)
		}
	}
	flush(len(sorted), true)
}

// publish updates the progress and, when something changed (rollouts, the first completed pass,
// the pass's errors), moves the version so that waiters wake.
func (x *Index) publish(indexed int, passDone bool, errs []string, changed bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.progress.Indexed = indexed
	if passDone {
		if !x.progress.Complete || strings.Join(errs, "\n") != strings.Join(x.progress.Errors, "\n") {
			changed = true
		}
		x.progress.Complete = true
		x.progress.Passes++
		x.progress.Errors = errs
		if x.progress.Errors == nil {
			x.progress.Errors = []string{}
		}
	}
	if changed {
		x.bump()
	}
}

// readRollout reads one rollout's capture with the tolerant read and summarises it. With prev (the
// rollout's previous entry, from the same store) it reads only what was appended to the file since
// prev was read; a file cleared, replaced or rewritten since is read again from its start. prev is
// not modified: readers may hold it.
func (x *Index) readRollout(id string, st *capture.Store, key fileKey, prev *entry) (*entry, error) {
	e := &entry{key: key, store: st}
	s := &e.sum
	s.ID, s.HasCapture, s.Incomplete, s.Pending, s.Abandoned = id, key.hasCapture, key.marker, key.live, key.stale
	if st == nil {
		return e, nil
	}
	s.Dir = st.Dir()
	if !key.hasCapture {
		return e, nil
	}
	if prev != nil && prev.store == st && prev.sum.HasCapture {
		// Clipped: appending copies, and never writes into the arrays prev's readers see.
		e.calls, e.damaged = slices.Clip(prev.calls[:prev.done]), slices.Clip(prev.damaged[:prev.doneDamaged])
		e.resume, e.done, e.doneDamaged = prev.resume, prev.done, prev.doneDamaged
	}
	err := x.readAppended(id, e)
	if errors.Is(err, capture.ErrRewritten) {
		e.calls, e.damaged, e.resume, e.done, e.doneDamaged = nil, nil, capture.Resume{}, 0, 0
		err = x.readAppended(id, e)
	}
	if err != nil && !errors.Is(err, capture.ErrRewritten) {
		// The file may have been cleared between listing and reading: keep an empty row, the
		// next pass drops it.
		if errors.Is(err, fs.ErrNotExist) {
			return e, nil
		}
		return e, err
	}
	x.summarize(e)
	return e, nil
}

// readAppended reads e's capture file from e.resume on, appending its lines to e.calls and
// e.damaged (a line is damaged when capture.CheckLine or the record build refuses it).
func (x *Index) readAppended(id string, e *entry) error {
	resume, err := e.store.ScanFrom(id, e.resume, func(l capture.ScannedLine) {
		x.scanned.Add(int64(len(l.Data)))
		if l.Complete {
			defer func() { e.done, e.doneDamaged = len(e.calls), len(e.damaged) }()
		}
		damage := func(err error) {
			e.damaged = append(e.damaged, DamagedLine{Line: l.Line, Index: l.Index, Error: err.Error()})
		}
		if err := capture.CheckLine(l.Data); err != nil {
			damage(err)
			return
		}
		r, err := record.BuildRecord(l.Data, l.Index)
		if err != nil {
			damage(err)
			return
		}
		c := callStat{off: l.Offset, size: len(l.Data), line: l.Line, index: l.Index}
		c.start, c.end, c.latency, c.ttft = f64(r.StartedAt), f64(r.CompletedAt), f64(r.LatencyTotalMS), f64(r.LatencyTTFTMS)
		c.in, c.out, c.reasoning, c.cached = i64(r.TokensIn), i64(r.TokensOut), i64(r.TokensReasoning), i64(r.CachedTokens)
		c.creation = i64(r.CacheCreationTokens)
		x.strMu.Lock()
		c.model, c.dialect, c.errcat = x.intern(r.Model), x.intern(r.Dialect), x.intern(r.ErrorCategory)
		x.strMu.Unlock()
		c.cacheHit = -1
		if r.CacheHit != nil {
			c.cacheHit = 0
			if *r.CacheHit {
				c.cacheHit = 1
			}
		}
		e.calls = append(e.calls, c)
	})
	if err == nil {
		e.resume = resume
	}
	return err
}

// summarize sets e's call-derived summary fields from e.calls and e.damaged.
func (x *Index) summarize(e *entry) {
	s := &e.sum
	s.Calls, s.DamagedLines, s.Errors = len(e.calls), len(e.damaged), 0
	s.TokensIn, s.TokensOut, s.TokensCached, s.TokensReasoning = nil, nil, nil, nil
	s.LatencyMS, s.MaxTTFTMS, s.StartedAt, s.EndedAt, s.DurationS = 0, nil, nil, nil, nil
	models, dialects := map[uint32]int{}, map[uint32]int{}
	var modelOrder, dialectOrder []uint32
	for i := range e.calls {
		c := &e.calls[i]
		if c.errcat != 0 {
			s.Errors++
		}
		addKnown(&s.TokensIn, c.in)
		addKnown(&s.TokensOut, c.out)
		addKnown(&s.TokensCached, c.cached)
		addKnown(&s.TokensReasoning, c.reasoning)
		if !math.IsNaN(c.latency) {
			s.LatencyMS += c.latency
		}
		if !math.IsNaN(c.ttft) && (s.MaxTTFTMS == nil || c.ttft > *s.MaxTTFTMS) {
			s.MaxTTFTMS = ptr(c.ttft)
		}
		if !math.IsNaN(c.start) && (s.StartedAt == nil || c.start < *s.StartedAt) {
			s.StartedAt = ptr(c.start)
		}
		if !math.IsNaN(c.end) && (s.EndedAt == nil || c.end > *s.EndedAt) {
			s.EndedAt = ptr(c.end)
		}
		if c.model != 0 {
			if models[c.model] == 0 {
				modelOrder = append(modelOrder, c.model)
			}
			models[c.model]++
		}
		if c.dialect != 0 {
			if dialects[c.dialect] == 0 {
				dialectOrder = append(dialectOrder, c.dialect)
			}
			dialects[c.dialect]++
		}
	}
	if s.StartedAt != nil && s.EndedAt != nil {
		s.DurationS = ptr(*s.EndedAt - *s.StartedAt)
	}
	x.strMu.Lock()
	s.Model, s.Dialect = x.mostFrequent(models, modelOrder), x.mostFrequent(dialects, dialectOrder)
	x.strMu.Unlock()
}

// mostFrequent returns the interned string counted most often (ties: first in order); nil for
// none. x.strMu must be held.
func (x *Index) mostFrequent(counts map[uint32]int, order []uint32) *string {
	best := -1
	for i, k := range order {
		if best < 0 || counts[k] > counts[order[best]] {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	return ptr(x.strs[order[best]])
}

// loadRecords (re)reads the --rollouts file when its size or mtime changed. It reports whether the
// records changed.
func (x *Index) loadRecords(note func(string, ...any)) bool {
	if x.rolloutsPath == "" {
		return false
	}
	info, err := os.Stat(x.rolloutsPath)
	if err != nil {
		note("rollouts file: %v", err)
		return false
	}
	key := fileKey{size: info.Size(), mtime: info.ModTime().UnixNano(), hasCapture: true}
	x.mu.RLock()
	same := x.recKey == key
	x.mu.RUnlock()
	if same {
		return false
	}
	recs, keys, err := readRecordsFile(x.rolloutsPath, note)
	if err != nil {
		note("rollouts file: %v", err)
		return false
	}
	x.mu.Lock()
	x.records, x.recKeys, x.recKey = recs, keys, key
	x.mu.Unlock()
	return true
}

// readRecordsFile reads a JSONL file of rollout records: for each line with a derivable rollout id
// (rollout.FromLine) it keeps the top-level scalar fields. Lines without an id, or that are not
// JSON objects, are noted and skipped; a later record of the same id replaces an earlier one.
func readRecordsFile(path string, note func(string, ...any)) (map[string]*recordFields, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	recs := map[string]*recordFields{}
	keys := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<30)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		id, ok, err := rollout.FromLine(line)
		if err != nil || !ok {
			note("%s:%d: no rollout id: %v", path, n, err)
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(line, &obj); err != nil {
			note("%s:%d: %v", path, n, err)
			continue
		}
		rf := &recordFields{raw: map[string]json.RawMessage{}, val: map[string]any{}}
		for k, v := range obj {
			if k == rollout.FieldModelCallCapture || len(v) == 0 || v[0] == '{' || v[0] == '[' {
				continue
			}
			var val any
			if json.Unmarshal(v, &val) != nil {
				continue
			}
			rf.raw[k] = bytes.Clone(v)
			rf.val[k] = val
			keys[k] = true
		}
		recs[id] = rf
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	return recs, names, nil
}

func (x *Index) applyRecordLocked(e *entry) {
	if rf := x.records[e.sum.ID]; rf != nil {
		e.sum.Record, e.sum.InRecords = rf.raw, true
	} else {
		e.sum.Record, e.sum.InRecords = nil, false
	}
}

func (x *Index) applyRecordsLocked() {
	for _, e := range x.entries {
		x.applyRecordLocked(e)
	}
}

func f64(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

func i64(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

// addKnown adds a count to a sum that is null until a known count (v >= 0; -1 is unknown) arrives.
func addKnown(sum **int64, v int64) {
	if v < 0 {
		return
	}
	if *sum == nil {
		*sum = new(int64)
	}
	**sum += v
}
