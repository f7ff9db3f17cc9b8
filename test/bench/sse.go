package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcalls/modelcalls/capture"
)

// sseStats accumulates one subject's paced streams.
type sseStats struct {
	ttft     durations // request sent -> first event read
	delivery durations // non-terminal events: read by the client - written by the upstream
	terminal durations // the terminal event ([DONE]): same
	gaps     durations // between successive client reads
	held     int       // non-terminal events read only after the upstream had written the next event
	sendGaps durations // between successive upstream writes
	events   int       // non-terminal events
	chunks   int
	streams  int
}

// sseResult is row 4.
type sseResult struct {
	order []string
	by    map[string]*sseStats
	pace  time.Duration
	// fsync times the fsync of an append of the streams' capture line size (lineLen) on the capture
	// disk, one after every stream: the floor of the terminal event's hold. writeSync times the
	// same append's write (the copy into the page cache) and fsync together.
	fsync     durations
	writeSync durations
	lineLen   int
}

// runSSE streams the 200-event fixture, paced, through each subject one stream at a time, and
// times every event at the client against the instant the upstream wrote it.
func (r *runner) runSSE(ctx context.Context) error {
	res := &sseResult{by: map[string]*sseStats{}, pace: r.pace}
	capDir := filepath.Join(r.workDir, "capture-sse")
	p, err := startProxies(r.up.url, capDir, sBare, sGwOn)
	if err != nil {
		return err
	}
	defer p.close()
	subjects := []*subject{
		newSubject(sDirect, r.up.url, false),
		newSubject(sBare, p.servers[sBare].url, true),
		newSubject(sGwOn, p.servers[sGwOn].url, true),
	}
	for _, s := range subjects {
		defer s.closeIdle()
		res.order = append(res.order, s.name)
		res.by[s.name] = &sseStats{}
		if _, err := s.stream(ctx, r.up, r.fx, "sse", r.pace); err != nil { // warm-up
			return err
		}
	}
	// The warm-up stream left one line in the gateway's capture file: probe fsync with its size.
	st, err := os.Stat(filepath.Join(capDir, "sse"+capture.CaptureSuffix))
	if err != nil {
		return fmt.Errorf("sse capture line: %w", err)
	}
	res.lineLen = int(st.Size())
	probe, err := newFsyncProbe(capDir, res.lineLen)
	if err != nil {
		return err
	}
	defer probe.close()
	for round := range r.sseRounds {
		order := subjects
		if round%2 == 1 {
			order = reversed(subjects)
		}
		for _, s := range order {
			st := res.by[s.name]
			for range r.streams {
				sr, err := s.stream(ctx, r.up, r.fx, "sse", r.pace)
				if err != nil {
					return err
				}
				st.add(sr)
				// One probe sync after every stream: the disk sees the cadence the gateway's
				// terminal syncs see (one every ~200 ms), not a burst of back-to-back syncs.
				f, w, err := probe.run(1)
				if err != nil {
					return err
				}
				res.fsync = append(res.fsync, f...)
				res.writeSync = append(res.writeSync, w...)
			}
		}
		r.logf("  round %d/%d: ttft p50 bare %s ms, gateway %s ms", round+1, r.sseRounds,
			ms(res.by[sBare].ttft.pct(50)), ms(res.by[sGwOn].ttft.pct(50)))
	}
	r.sse = res
	return nil
}

func (st *sseStats) add(sr streamResult) {
	st.streams++
	st.ttft = append(st.ttft, sr.ttft)
	last := len(sr.delivery) - 1
	for i, d := range sr.delivery {
		if i == last {
			st.terminal = append(st.terminal, d)
			continue
		}
		st.delivery = append(st.delivery, d)
		st.events++
	}
	st.held += sr.held
	st.sendGaps = append(st.sendGaps, sr.sendGaps...)
	st.gaps = append(st.gaps, sr.gaps...)
	st.chunks += sr.chunks
}

func (st *sseStats) heldPct() string {
	if st.events == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(st.held)/float64(st.events))
}
