package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/modelcalls/modelcalls/internal/uring"
)

// plan holds the iteration counts of one run.
type plan struct {
	rounds    int           // ABAB rounds of the non-streaming rows
	seqCalls  int           // calls per subject per round, one client
	workers   int           // concurrent rollouts
	concDur   time.Duration // per subject per round, concurrent rollouts
	fsyncN    int           // fsync probes per round
	sseRounds int           // ABAB rounds of the SSE row
	streams   int           // streams per subject per SSE round
	pace      time.Duration // upstream pause between SSE events
	bigBytes  int64         // the big SSE stream of the memory row
	mRollouts int           // merge data set: rollouts
	mCalls    int           // merge data set: calls per rollout
	mRounds   int           // ABAB rounds of the merge row
	tRollouts int           // token export data set: rollouts (of mCalls calls each)
}

var fullPlan = plan{
	rounds: 8, seqCalls: 600, workers: 64, concDur: 1500 * time.Millisecond, fsyncN: 200,
	sseRounds: 6, streams: 10, pace: time.Millisecond,
	bigBytes:  100 << 20,
	mRollouts: 10000, mCalls: 20, mRounds: 2,
	tRollouts: 200,
}

var quickPlan = plan{
	rounds: 2, seqCalls: 100, workers: 64, concDur: 300 * time.Millisecond, fsyncN: 50,
	sseRounds: 2, streams: 3, pace: time.Millisecond,
	bigBytes:  8 << 20,
	mRollouts: 200, mCalls: 20, mRounds: 1,
	tRollouts: 50,
}

func main() {
	var (
		out        = flag.String("out", "BENCHMARKS.md", "where to write the results (Markdown)")
		quick      = flag.Bool("quick", false, "small iteration counts (a smoke run; figures are noisy)")
		mitmMode   = flag.String("mitm", "auto", "mitmproxy peer: auto (run when mitmdump is installed), off, on (fail when missing)")
		installMit = flag.Bool("install-mitmproxy", false, "apt-get install mitmproxy first when mitmdump is missing")
		micro      = flag.Bool("micro", true, "also run the go test -bench micro-benchmarks and include them")
		tmpBase    = flag.String("dir", "", "directory for capture files and the merge data set (default: the system temp dir)")
		keep       = flag.Bool("keep", false, "keep the capture files and data set")
		only       = flag.String("only", "", "comma-separated rows to run (latency,sse,rss,merge,store,otel,view,tokexport,tokens); default all")
		cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the whole run (clients, upstream and proxies) to this file")
		ioUring    = flag.String("io-uring", "on", "on: capture writes use io_uring where the kernel offers it; off: plain system calls only (sets "+uring.EnvVar+"=off for the run and its child processes), to A/B the capture rows")

		childMode = flag.String("child", "", "internal: serve one proxy in a child process (gateway|bare)")
		childUp   = flag.String("child-upstream", "", "internal: upstream URL for -child")
		childDir  = flag.String("child-capture-dir", "", "internal: capture dir for -child")
	)
	flag.Parse()
	switch *ioUring {
	case "on":
	case "off":
		os.Setenv(uring.EnvVar, "off")
	default:
		fmt.Fprintf(os.Stderr, "bench: -io-uring %q: want on or off\n", *ioUring)
		os.Exit(2)
	}
	if *childMode != "" {
		if err := childMain(*childMode, *childUp, *childDir); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		return
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: cpu profile:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	p := fullPlan
	if *quick {
		p = quickPlan
	}
	r := &runner{plan: p, mitmMode: *mitmMode, installMitm: *installMit, runMicroB: *micro, keep: *keep,
		quick: *quick, rows: map[string]bool{}}
	for _, row := range strings.Split(*only, ",") {
		if row = strings.TrimSpace(row); row != "" {
			r.rows[row] = true
		}
	}
	r.command = "go run ./test/bench " + strings.Join(os.Args[1:], " ")
	if err := r.run(*tmpBase, *out); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// runner carries one run's setup and results.
type runner struct {
	plan
	mitmMode    string
	installMitm bool
	runMicroB   bool
	keep        bool
	quick       bool
	rows        map[string]bool
	command     string
	commit      string

	fx       *fixtures
	up       *upstream
	workDir  string
	started  time.Time
	loadAt   [2]string
	phases   []phase
	notes    []string
	mitmInfo string

	lat   *latencyResult
	sse   *sseResult
	rss   []rssResult
	merge *mergeResult
	store *storeRow
	otel  *otelResult // row 7, otel.go
	view  *viewResult // row 8, view.go
	// rows 9 and 10, tokens.go
	tokExport  *tokExportResult
	tokCapture *tokCaptureResult
	micro      []string
	mErr       string
}

type phase struct {
	name string
	took time.Duration
}

func (r *runner) want(row string) bool { return len(r.rows) == 0 || r.rows[row] }

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(r.started).Seconds(), fmt.Sprintf(format, args...))
}

func (r *runner) timed(name string, f func() error) error {
	t := time.Now()
	r.logf("%s ...", name)
	err := f()
	r.phases = append(r.phases, phase{name, time.Since(t)})
	r.logf("%s done in %.1fs", name, time.Since(t).Seconds())
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (r *runner) run(base, out string) error {
	r.started = time.Now()
	r.commit = gitCommit() // before anything runs: the code the binary was built from
	r.loadAt[0] = loadAvg()
	r.logf("GOMAXPROCS %d, load %s", runtime.GOMAXPROCS(0), r.loadAt[0])
	var err error
	if r.fx, err = loadFixtures(); err != nil {
		return err
	}
	if r.workDir, err = os.MkdirTemp(base, "modelcalls-bench-"); err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	if !r.keep {
		defer os.RemoveAll(r.workDir)
	}
	if r.up, err = startUpstream(r.fx); err != nil {
		return err
	}
	defer r.up.close()
	ctx := context.Background()

	for _, row := range []struct {
		name, title string // -only name; the phase's name in the log and the timings table
		run         func() error
	}{
		{"latency", "latency and throughput (rows 1-3)", func() error { return r.runLatency(ctx) }},
		{"sse", "SSE timing (row 4)", func() error { return r.runSSE(ctx) }},
		{"rss", "peak memory (row 5)", func() error { return r.runRSSRow(ctx) }},
		{"merge", "merge throughput (row 6)", r.runMergeRow},
		{"store", "capture store alone (store row)", r.runStoreRow},
		{"otel", "live OTLP export (row 7)", func() error { return r.runOTelRow(ctx) }},
		{"view", "viewer first page (row 8)", r.runViewRow},
		{"tokexport", "export tokens throughput (row 9)", r.runTokExportRow},
		{"tokens", "--tokens capture cost (row 10)", func() error { return r.runTokCaptureRow(ctx) }},
	} {
		if !r.want(row.name) {
			continue
		}
		if err := r.timed(row.title, row.run); err != nil {
			return err
		}
	}
	if r.runMicroB && len(r.rows) == 0 {
		if err := r.timed("micro-benchmarks", func() error { return r.runMicro() }); err != nil {
			r.mErr = err.Error()
			r.logf("micro-benchmarks failed: %v", err)
		}
	}
	r.loadAt[1] = loadAvg()
	report := r.report()
	if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	abs, _ := filepath.Abs(out)
	r.logf("wrote %s (total %.1fs, load %s)", abs, time.Since(r.started).Seconds(), r.loadAt[1])
	fmt.Print(r.summary())
	return nil
}

func (r *runner) runRSSRow(ctx context.Context) error {
	for _, x := range []struct{ mode, shape string }{{"bare", shapeRecorded}, {"gateway", shapeRecorded}, {"gateway", shapeContent}} {
		mode := x.mode
		dir := filepath.Join(r.workDir, "rss-"+mode+"-"+x.shape)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
		res, err := runRSS(ctx, mode, r.up.url, dir, r.fx, r.bigBytes, x.shape)
		if err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
		r.logf("rss %s (%s deltas): idle %d KiB, peak %d KiB, growth %d KiB, %.0f MB/s", mode, x.shape, res.idle.VmRSS, res.peak.VmHWM,
			res.growthKiB(), mbps(res.bytes, res.elapsed))
		r.rss = append(r.rss, res)
		os.RemoveAll(dir)
	}
	return nil
}

func (r *runner) runMergeRow() error {
	dir := filepath.Join(r.workDir, "merge")
	var d *mergeData
	err := r.timed("  write merge data set", func() error {
		var err error
		d, err = writeMergeData(dir, r.fx, r.mRollouts, r.mCalls)
		return err
	})
	if err != nil {
		return err
	}
	r.logf("merge data: %d rollouts, %d lines, %.1f MB", len(d.ids), d.lines, float64(d.bytes)/1e6)
	res, err := runMerge(d, r.mRounds)
	if err != nil {
		return err
	}
	r.merge = res
	if !r.keep {
		os.RemoveAll(dir)
	}
	return nil
}

// loadAvg returns the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
