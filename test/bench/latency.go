package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/modelcalls/modelcalls/capture"
)

// Subject names of the non-streaming rows.
const (
	sDirect = "direct"
	sBare   = "bare ReverseProxy"
	sGwOff  = "gateway, capture off"
	sGwOn   = "gateway, capture on"
	sGwOne  = "gateway, capture on, one file"
	sMitm   = "mitmdump -w"
)

// subjectStats accumulates one subject's batches over all rounds.
type subjectStats struct {
	seq     durations // one client
	conc    durations // concurrent rollouts
	calls   int       // concurrent calls completed
	elapsed time.Duration
	cpu     time.Duration // process CPU time (user + system) spent in the concurrent batches
	machine machineTimes  // the whole machine's steal and idle time in the concurrent batches
}

// addConc records one concurrent batch.
func (s *subjectStats) addConc(r loadResult) {
	s.conc = append(s.conc, r.lat...)
	s.calls += r.calls
	s.elapsed += r.elapsed
}

// cpuPerCall is the whole process's CPU time per concurrent call (clients and upstream included,
// which are the same for every subject, so differences between subjects are the proxy's cost).
func (s *subjectStats) cpuPerCall() time.Duration {
	if s.calls == 0 {
		return 0
	}
	return s.cpu / time.Duration(s.calls)
}

// machineCells renders the concurrent batches' host steal per call and the share of the machine's
// CPU time that was idle, as two table cells ("-" where /proc/stat was not readable).
func (s *subjectStats) machineCells() string {
	if !s.machine.ok || s.calls == 0 || s.elapsed <= 0 {
		return "- | -"
	}
	idle := float64(s.machine.idle) / (float64(s.elapsed) * float64(runtime.NumCPU()))
	return fmt.Sprintf("%s | %.0f%%", us(s.machine.steal/time.Duration(s.calls)), 100*idle)
}

func (s *subjectStats) callsPerSec() float64 {
	if s.elapsed == 0 {
		return 0
	}
	return float64(s.calls) / s.elapsed.Seconds()
}

// latencyResult holds rows 1-3 and the fsync probe.
type latencyResult struct {
	order []string
	by    map[string]*subjectStats
	fsync durations // back to back
	// fsyncMachine is the machine's steal and idle time over the back-to-back fsync probe runs
	// (the probe's write and sync of each line, nothing else running in the bench).
	fsyncMachine machineTimes
	// fsyncPaced is the same probe, one fsync after each bare-proxy call (pacedFsyncs): the
	// baseline row 1's capture-on goal is judged against.
	fsyncPaced durations
	// bareAfterFsync is the latency of those bare-proxy calls, each (but the first of a batch) made
	// right after a probe fsync: the bare proxy at the cadence of a captured call, which always
	// follows the previous call's fsync. Reported, not judged.
	bareAfterFsync durations
	claim          durations    // capture.Store.Claim
	release        durations    // Claim.Release
	storeOwn       subjectStats // storeLoad, each worker its own rollout file
	storeOne       subjectStats // storeLoad, all workers into one rollout file
	// The gateway's own capture-write histogram (append + fsync per call), by phase.
	gwWrite map[string]*writeStat
	// Row 2 with the gateway alone in a child process, by GOMAXPROCS of the child.
	childProcs map[int]*subjectStats
	mitm       bool
	mitmNote   string
	lineLen    int
}

// runLatency measures non-streaming latency (one client and concurrent rollouts) and calls/s for
// every subject, interleaving subjects within each round and reversing the order every other round
// (ABBA...), with an fsync probe batch in every round.
func (r *runner) runLatency(ctx context.Context) error {
	res := &latencyResult{by: map[string]*subjectStats{}, gwWrite: map[string]*writeStat{}, childProcs: map[int]*subjectStats{}}
	for _, k := range []string{"1 client", fmt.Sprintf("%d concurrent, own files", r.workers), fmt.Sprintf("%d concurrent, one file", r.workers)} {
		res.gwWrite[k] = &writeStat{}
	}
	capDir := filepath.Join(r.workDir, "capture")
	p, err := startProxies(r.up.url, capDir, sBare, sBareSync, sGwOff, sGwOn)
	if err != nil {
		return err
	}
	defer p.close()
	servers, gwOn := p.servers, p.gwOn
	subjects := []*subject{
		newSubject(sDirect, r.up.url, false),
		newSubject(sBare, servers[sBare].url, true),
		newSubject(sBareSync, servers[sBareSync].url, true),
		newSubject(sGwOff, servers[sGwOff].url, true),
		newSubject(sGwOn, servers[sGwOn].url, true),
	}
	oneFile := newSubject(sGwOne, servers[sGwOn].url, true)
	bareSubj := subjects[1]

	var m *mitm
	switch r.mitmMode {
	case "off":
		res.mitmNote = "skipped (-mitm off)"
	default:
		bin, err := findMitmdump(r.installMitm, r.logf)
		switch {
		case err != nil:
			return err
		case bin == "" && r.mitmMode == "on":
			return fmt.Errorf("mitmdump not installed (-mitm on; add -install-mitmproxy or apt-get install mitmproxy)")
		case bin == "":
			res.mitmNote = "skipped: mitmdump not installed (apt-get install mitmproxy, or run with -install-mitmproxy)"
		default:
			m, err = startMitm(bin, r.up.url, r.workDir)
			if err != nil {
				return err
			}
			defer m.stop()
			res.mitm = true
			res.mitmNote = m.version
			subjects = append(subjects, newSubject(sMitm, m.url, true))
		}
	}
	r.logf("mitmproxy peer: %s", res.mitmNote)
	for _, s := range append(subjects, oneFile) {
		res.order = append(res.order, s.name)
		res.by[s.name] = &subjectStats{}
		defer s.closeIdle()
	}

	probe, err := newFsyncProbe(mustMkdir(capDir), len(r.fx.jsonRequest)+len(r.fx.jsonResponse)+400)
	if err != nil {
		return err
	}
	defer probe.close()
	res.lineLen = len(r.fx.jsonRequest) + len(r.fx.jsonResponse) + 400
	probeStore, err := capture.Open(capDir)
	if err != nil {
		return err
	}
	claims := &claimProbe{store: probeStore}
	storeLine := append(append([]byte(`{"x":"`), bytes.Repeat([]byte("x"), res.lineLen-8)...), `"}`...) // capture-sized

	// Warm-up: connections, the capture files, the page cache; not recorded.
	for _, s := range append(subjects, oneFile) {
		if _, err := s.sequential(ctx, r.fx, "lat1", 20); err != nil {
			return err
		}
		if _, err := s.concurrent(ctx, r.fx, r.workers, 100*time.Millisecond, r.ownFile); err != nil {
			return err
		}
	}

	for round := range r.rounds {
		for _, s := range alternate(round, subjects) {
			st := res.by[s.name]
			w0 := captureWrites(gwOn)
			seq, err := s.sequential(ctx, r.fx, "lat1", r.seqCalls)
			if err != nil {
				return err
			}
			w1 := captureWrites(gwOn)
			st.seq = append(st.seq, seq.lat...)
			c0, m0 := processCPU(), readMachineTimes()
			conc, err := s.concurrent(ctx, r.fx, r.workers, r.concDur, r.ownFile)
			if err != nil {
				return err
			}
			st.cpu += processCPU() - c0
			st.machine.add(readMachineTimes().sub(m0))
			w2 := captureWrites(gwOn)
			if s.name == sGwOn {
				res.gwWrite["1 client"].add(w1.sub(w0))
				res.gwWrite[fmt.Sprintf("%d concurrent, own files", r.workers)].add(w2.sub(w1))
			}
			st.addConc(conc)
			if s.name == sGwOn {
				// 64 concurrent calls into one rollout file, right after the own-file batch.
				c1, m1 := processCPU(), readMachineTimes()
				one, err := oneFile.concurrent(ctx, r.fx, r.workers, r.concDur, func(int) string { return "one-file" })
				if err != nil {
					return err
				}
				res.by[sGwOne].cpu += processCPU() - c1
				res.by[sGwOne].machine.add(readMachineTimes().sub(m1))
				res.gwWrite[fmt.Sprintf("%d concurrent, one file", r.workers)].add(captureWrites(gwOn).sub(w2))
				res.by[sGwOne].addConc(one)
			}
		}
		m0 := readMachineTimes()
		f, _, err := probe.run(r.fsyncN)
		if err != nil {
			return err
		}
		res.fsyncMachine.add(readMachineTimes().sub(m0))
		res.fsync = append(res.fsync, f...)
		// The same fsync at the cadence the gateway's 1-client fsyncs see: one after each call
		// through the bare proxy. On a virtual disk an fsync issued after other work takes longer
		// than one of a back-to-back burst (the device is no longer busy), and that is the
		// fsync a captured call pays.
		paced, bareAfter, err := pacedFsyncs(ctx, bareSubj, r.fx, probe, r.fsyncN)
		if err != nil {
			return err
		}
		res.fsyncPaced = append(res.fsyncPaced, paced...)
		res.bareAfterFsync = append(res.bareAfterFsync, bareAfter...)
		cl, rel, err := claims.run(r.fsyncN)
		if err != nil {
			return err
		}
		res.claim = append(res.claim, cl...)
		res.release = append(res.release, rel...)
		for _, x := range []struct {
			st   *subjectStats
			idOf func(int) string
		}{{&res.storeOwn, func(w int) string { return fmt.Sprintf("store-%02d", w) }}, {&res.storeOne, func(int) string { return "store-one" }}} {
			c0, m0 := processCPU(), readMachineTimes()
			sl, err := storeLoad(probeStore, storeLine, r.workers, r.concDur/3, x.idOf)
			if err != nil {
				return err
			}
			x.st.cpu += processCPU() - c0
			x.st.machine.add(readMachineTimes().sub(m0))
			x.st.addConc(sl)
		}
		r.logf("  round %d/%d: bare seq p50 %s ms, gw-on seq p50 %s ms, fsync p50 %s ms", round+1, r.rounds,
			ms(res.by[sBare].seq.pct(50)), ms(res.by[sGwOn].seq.pct(50)), ms(res.fsync.pct(50)))
	}
	if err := r.childProcsRow(ctx, res); err != nil {
		return err
	}
	if m != nil {
		res.mitmNote = fmt.Sprintf("%s (flow file %.1f MB)", m.version, float64(m.flowBytes())/1e6)
	}
	r.lat = res
	return nil
}

func (r *runner) ownFile(w int) string { return fmt.Sprintf("rollout-%02d", w) }

// pacedFsyncs makes n calls through s one after another and, after each, one probe append+fsync:
// the fsyncs timed alone, at the cadence of one per call, and the calls that followed an fsync.
func pacedFsyncs(ctx context.Context, s *subject, fx *fixtures, probe *fsyncProbe, n int) (fsyncs, calls durations, err error) {
	buf := make([]byte, 32<<10)
	fsyncs = make(durations, 0, n)
	for i := range n {
		d, err := s.call(ctx, "lat1", fx, buf)
		if err != nil {
			return nil, nil, err
		}
		if i > 0 {
			calls = append(calls, d)
		}
		f, _, err := probe.run(1)
		if err != nil {
			return nil, nil, err
		}
		fsyncs = append(fsyncs, f...)
	}
	return fsyncs, calls, nil
}

// alternate is s in round's order: as given in even rounds, reversed in odd ones, so that a slow
// drift of the machine (page cache, clock, other load) falls on every subject alike.
func alternate[T any](round int, s []T) []T {
	if round%2 == 0 {
		return s
	}
	return reversed(s)
}

func reversed[T any](s []T) []T {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

func mustMkdir(dir string) string {
	os.MkdirAll(dir, 0o750)
	return dir
}

// childProcs are the GOMAXPROCS values the gateway-alone experiment compares.
var childProcs = []int{2, 8}

// childProcsRow runs row 2 (capture on, own files) against the gateway alone in a child process,
// once per GOMAXPROCS in childProcs, interleaved over the rounds. It shows how much of the gap to
// the bare proxy comes from goroutines blocked in file syscalls (claim create, fsync) holding the
// process's Ps while network goroutines wait.
func (r *runner) childProcsRow(ctx context.Context, res *latencyResult) error {
	children := map[int]*subject{}
	for _, n := range childProcs {
		dir := filepath.Join(r.workDir, fmt.Sprintf("capture-child-%d", n))
		c, err := startChild("gateway", r.up.url, dir, fmt.Sprintf("GOMAXPROCS=%d", n))
		if err != nil {
			return err
		}
		defer c.stop()
		s := newSubject(fmt.Sprintf("gateway child GOMAXPROCS=%d", n), c.url, true)
		defer s.closeIdle()
		if _, err := s.concurrent(ctx, r.fx, r.workers, 100*time.Millisecond, r.ownFile); err != nil {
			return err
		}
		children[n] = s
		res.childProcs[n] = &subjectStats{}
	}
	rounds := max(1, r.rounds/2)
	for round := range rounds {
		for _, n := range alternate(round, childProcs) {
			conc, err := children[n].concurrent(ctx, r.fx, r.workers, r.concDur, r.ownFile)
			if err != nil {
				return err
			}
			st := res.childProcs[n]
			st.addConc(conc)
		}
	}
	return nil
}

// writeStat accumulates count and sum of the gateway's capture-write histogram.
type writeStat struct {
	count uint64
	sum   float64 // seconds
}

func (w writeStat) sub(o writeStat) writeStat { return writeStat{w.count - o.count, w.sum - o.sum} }

func (w *writeStat) add(o writeStat) { w.count += o.count; w.sum += o.sum }

func (w *writeStat) meanMS() float64 {
	if w.count == 0 {
		return 0
	}
	return w.sum / float64(w.count) * 1e3
}
