package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/fsutil"
)

// The store row: the capture store alone, no HTTP, what the gateway does to it for every captured
// call (claim, append one capture-sized line, release), from 64 goroutines into 64 files and into
// one file, against the per-call-file pattern the store used before (a claim file created with
// O_EXCL and removed after the line; the capture file opened, flocked, fstat'ed, its last byte
// pread, written, fsynced and closed on every append), in the same run, ABAB.

// storeSubject is one way of doing claim + append + release.
type storeSubject struct {
	name string
	op   func(id string, line []byte) error
}

// storeRow holds the row's results by subject and file layout.
type storeRow struct {
	order []string
	by    map[string]*subjectStats // "<subject> / <layout>"
}

const (
	storeLayoutOwn = "64 writers, 64 files"
	storeLayoutOne = "64 writers, one file"
)

func (r *runner) runStoreRow() error {
	dir := filepath.Join(r.workDir, "store-row")
	legacyDir, newDir := filepath.Join(dir, "per-call-files"), filepath.Join(dir, "slots")
	for _, d := range []string{legacyDir, newDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
	}
	store, err := capture.Open(newDir)
	if err != nil {
		return err
	}
	defer store.Close()
	n := len(r.fx.jsonRequest) + len(r.fx.jsonResponse) + 400 // capture-sized
	line := make([]byte, 0, n)
	line = append(line, `{"x":"`...)
	for len(line) < n-2 {
		line = append(line, 'x')
	}
	line = append(line, `"}`...)
	subjects := []storeSubject{
		{"per-call claim file, open/close per append (per-call files)", func(id string, l []byte) error { return legacyCall(legacyDir, id, l) }},
		{"claim slot, kept files, group commit (slot store)", func(id string, l []byte) error {
			c, err := store.Claim(id, capture.NewModelCallID())
			if err != nil {
				return err
			}
			if err := c.Append(l); err != nil {
				return err
			}
			return c.Release()
		}},
	}
	row := &storeRow{by: map[string]*subjectStats{}}
	layouts := []struct {
		name string
		idOf func(int) string
	}{{storeLayoutOwn, func(w int) string { return fmt.Sprintf("store-%02d", w) }}, {storeLayoutOne, func(int) string { return "store-one" }}}
	for _, lay := range layouts {
		for _, s := range subjects {
			k := s.name + " / " + lay.name
			row.order = append(row.order, k)
			row.by[k] = &subjectStats{}
		}
	}
	dur := r.concDur / 2
	// Warm-up (files created, page cache), not recorded.
	for _, s := range subjects {
		if _, err := runStoreOps(s.op, line, r.workers, 100*time.Millisecond, layouts[0].idOf); err != nil {
			return err
		}
	}
	for round := range r.rounds {
		for _, lay := range layouts {
			for _, s := range alternate(round, subjects) {
				c0 := processCPU()
				res, err := runStoreOps(s.op, line, r.workers, dur, lay.idOf)
				if err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
				st := row.by[s.name+" / "+lay.name]
				st.cpu += processCPU() - c0
				st.addConc(res)
			}
		}
		r.logf("  store round %d/%d done", round+1, r.rounds)
	}
	r.store = row
	return nil
}

// runStoreOps runs op from workers goroutines for about dur, worker w into rollout idOf(w).
func runStoreOps(op func(string, []byte) error, line []byte, workers int, dur time.Duration, idOf func(int) string) (loadResult, error) {
	return closedLoop(workers, dur, func(w int) func() (time.Duration, error) {
		id := idOf(w)
		return func() (time.Duration, error) {
			t := time.Now()
			err := op(id, line)
			return time.Since(t), err
		}
	})
}

// legacyCall is the per-call-file pattern, for comparison: claim file, append with open/close,
// claim removed.
func legacyCall(dir, id string, line []byte) error {
	claims := filepath.Join(dir, id+capture.ClaimsSuffix)
	p := filepath.Join(claims, capture.NewModelCallID())
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(claims, 0o750); err == nil {
			f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
		}
	}
	if err != nil {
		return err
	}
	f.Write([]byte(`{"pid":1,"host":"h","started_at":1.0}`))
	f.Close()
	cf, err := os.OpenFile(filepath.Join(dir, id+capture.CaptureSuffix), os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return err
	}
	defer cf.Close()
	if err := fsutil.Lock(cf, true); err != nil {
		return err
	}
	st, err := cf.Stat()
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(line)+2)
	if st.Size() > 0 {
		var last [1]byte
		if _, err := cf.ReadAt(last[:], st.Size()-1); err != nil {
			return err
		}
		if last[0] != '\n' {
			buf = append(buf, '\n')
		}
	}
	buf = append(append(buf, line...), '\n')
	if _, err := cf.Write(buf); err != nil {
		return err
	}
	if err := cf.Sync(); err != nil {
		return err
	}
	if st.Size() == 0 {
		if err := fsutil.SyncDir(dir); err != nil {
			return err
		}
	}
	fsutil.Unlock(cf)
	return os.Remove(p)
}
