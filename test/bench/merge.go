package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/cputime"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// mergeData is a capture directory of rollouts x calls lines, every line a real capture line
// written by NeMo Gym (testdata/gym-capture), cycled.
type mergeData struct {
	dir   string
	ids   []string
	bytes int64
	lines int
}

// writeMergeData writes the data set without fsync (it is the reader that is measured).
func writeMergeData(dir string, fx *fixtures, rollouts, calls int) (*mergeData, error) {
	k := 0
	return writeDataSet(dir, "merge data", rollouts, calls, func(_, _ int) ([]byte, error) {
		line := fx.gymLines[k%len(fx.gymLines)]
		k++
		return line, nil
	})
}

// writeDataSet writes rollouts capture files ("<r/100>-<r%100>") of calls lines each into dir,
// line(r, c) giving call c of rollout r, without fsync; what names the data set in errors.
func writeDataSet(dir, what string, rollouts, calls int, line func(r, c int) ([]byte, error)) (*mergeData, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("%s dir: %w", what, err)
	}
	d := &mergeData{dir: dir}
	for r := range rollouts {
		id := fmt.Sprintf("%d-%d", r/100, r%100)
		if err := writeRollout(filepath.Join(dir, id+capture.CaptureSuffix), d, calls, func(c int) ([]byte, error) { return line(r, c) }); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		d.ids = append(d.ids, id)
	}
	return d, nil
}

// writeRollout writes one capture file of calls lines, counting them into d.
func writeRollout(path string, d *mergeData, calls int, line func(c int) ([]byte, error)) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 256<<10)
	for c := range calls {
		b, err := line(c)
		if err != nil {
			f.Close()
			return err
		}
		w.Write(b)
		w.WriteByte('\n')
		d.bytes += int64(len(b) + 1)
		d.lines++
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// mergePass is one timed pass over the whole data set.
type mergePass struct {
	elapsed time.Duration
	cpu     time.Duration // user + system time of the process over the pass (cputime.Process; less disturbed by other work than elapsed)
	bytes   int64
	records int
	out     int64 // merged output bytes (merge pass only)
}

// timed runs pass and sets p's elapsed and CPU time to what it took.
func (p *mergePass) timed(pass func() error) error {
	start, cpu := time.Now(), cputime.Process()
	err := pass()
	p.elapsed, p.cpu = time.Since(start), cputime.Process()-cpu
	return err
}

// readRaw is the baseline: every capture file opened and read line by line with bufio, nothing
// decoded.
func (d *mergeData) readRaw() (mergePass, error) {
	var p mergePass
	err := d.readFiles(&p, "raw read", func(_ string, br *bufio.Reader) error {
		for {
			line, err := br.ReadSlice('\n')
			p.bytes += int64(len(line))
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("raw read: %w", err)
			}
			p.records++
		}
	})
	return p, err
}

// readValidate is a second reference: the same bufio read, plus one strict validating scan of each
// line (internal/jsonscan.Validate, what the readers use). No reader that checks every line can
// beat it by much: it is the ceiling for any merge that validates each byte once.
func (d *mergeData) readValidate() (mergePass, error) {
	var p mergePass
	err := d.readFiles(&p, "validate read", func(id string, br *bufio.Reader) error {
		for {
			line, err := br.ReadSlice('\n')
			if err == bufio.ErrBufferFull {
				return fmt.Errorf("validate read: line longer than the buffer: %w", errUnexpected)
			}
			if len(line) > 1 {
				if verr := jsonscan.Validate(line[:len(line)-1]); verr != nil {
					return fmt.Errorf("validate read %s: %w", id, verr)
				}
				p.records++
			}
			p.bytes += int64(len(line))
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("validate read: %w", err)
			}
		}
	})
	return p, err
}

// readFiles opens every capture file of the data set in turn and hands it to read through one
// 64 KiB bufio.Reader, timed into p; what names the pass in an open error.
func (d *mergeData) readFiles(p *mergePass, what string, read func(id string, br *bufio.Reader) error) error {
	return p.timed(func() error {
		br := bufio.NewReaderSize(nil, 64<<10)
		for _, id := range d.ids {
			f, err := os.Open(filepath.Join(d.dir, id+capture.CaptureSuffix))
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			br.Reset(f)
			err = read(id, br)
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// readRecords is the subject: modelcalls.ReadAvailableRecords for every rollout (shared lock,
// tolerant read, one ModelCallRecord built per line), as merge does before it aggregates.
func (d *mergeData) readRecords() (mergePass, error) {
	var p mergePass
	store, err := capture.OpenExisting(d.dir)
	if err != nil {
		return p, err
	}
	err = p.timed(func() error {
		for _, id := range d.ids {
			recs, damaged, err := modelcalls.ReadAvailableRecords(store, id)
			if err != nil {
				return fmt.Errorf("read records: %w", err)
			}
			if damaged != 0 {
				return fmt.Errorf("read records %s: %d damaged lines: %w", id, damaged, errUnexpected)
			}
			p.records += len(recs)
		}
		return nil
	})
	p.bytes = d.bytes
	return p, err
}

// mergeRecords is the whole merge of `modelcalls merge`: one rollout record line per rollout through
// a modelcalls.Merger with default options (claims checked, tolerant read, records built,
// aggregated, ng_model_call_capture spliced into the line, payloads left out).
func (d *mergeData) mergeRecords() (mergePass, error) {
	var p mergePass
	m, err := modelcalls.NewMerger([]string{d.dir}, modelcalls.MergeOptions{})
	if err != nil {
		return p, err
	}
	ctx := context.Background()
	line := make([]byte, 0, 128)
	err = p.timed(func() error {
		for i, id := range d.ids {
			task, idx := i/100, i%100
			line = fmt.Appendf(line[:0], `{"_ng_task_index": %d, "_ng_rollout_index": %d, "reward": 1.0}`, task, idx)
			out, res, err := m.Merge(ctx, line)
			if err != nil {
				return fmt.Errorf("merge %s: %w", id, err)
			}
			if res.RolloutID != id || !res.Attached || res.Damaged != 0 || len(out) <= len(line) {
				return fmt.Errorf("merge %s: %+v: %w", id, res, errUnexpected)
			}
			p.records += res.Calls
			p.out += int64(len(out))
		}
		return nil
	})
	p.bytes = d.bytes
	return p, err
}

// mergeResult is the merge row: ABAB passes of the baseline and the subjects on one core.
type mergeResult struct {
	data                          *mergeData
	raw, validate, records, merge []mergePass
}

func mbps(bytes int64, d time.Duration) float64 { return float64(bytes) / 1e6 / d.Seconds() }

// bestCPU returns the pass that used the least CPU time.
func bestCPU(ps []mergePass) mergePass {
	return leastBy(ps, func(p mergePass) time.Duration { return p.cpu })
}

// best returns the fastest pass (least disturbed by other work on the machine).
func best(ps []mergePass) mergePass {
	return leastBy(ps, func(p mergePass) time.Duration { return p.elapsed })
}

// leastBy returns the first pass with the least key.
func leastBy(ps []mergePass, key func(mergePass) time.Duration) mergePass {
	b := ps[0]
	for _, p := range ps[1:] {
		if key(p) < key(b) {
			b = p
		}
	}
	return b
}

// runMerge measures both readers with GOMAXPROCS=1, interleaved, rounds times each.
func runMerge(d *mergeData, rounds int) (*mergeResult, error) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	res := &mergeResult{data: d}
	// Warm the page cache so both readers see the same (cached) bytes.
	if _, err := d.readRaw(); err != nil {
		return nil, err
	}
	// Each pass, with its check of what it read (nil: none) and where its measurement goes.
	passes := []struct {
		run   func() (mergePass, error)
		check func(p mergePass) error
		into  *[]mergePass
	}{
		{d.readRaw, func(p mergePass) error {
			if p.bytes != d.bytes || p.records != d.lines {
				return fmt.Errorf("raw read saw %d bytes %d lines, wrote %d, %d: %w", p.bytes, p.records, d.bytes, d.lines, errUnexpected)
			}
			return nil
		}, &res.raw},
		{d.readValidate, nil, &res.validate},
		{d.readRecords, func(p mergePass) error {
			if p.records != d.lines {
				return fmt.Errorf("records: got %d, want %d: %w", p.records, d.lines, errUnexpected)
			}
			return nil
		}, &res.records},
		{d.mergeRecords, func(p mergePass) error {
			if p.records != d.lines {
				return fmt.Errorf("merge: %d calls attached, want %d: %w", p.records, d.lines, errUnexpected)
			}
			return nil
		}, &res.merge},
	}
	for range rounds {
		for _, pass := range passes {
			runtime.GC()
			p, err := pass.run()
			if err != nil {
				return nil, err
			}
			if pass.check != nil {
				if err := pass.check(p); err != nil {
					return nil, err
				}
			}
			*pass.into = append(*pass.into, p)
		}
	}
	return res, nil
}
