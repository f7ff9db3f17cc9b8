package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	modelcalls "github.com/modelcalls/modelcalls"
)

// mergeOptions are the flags of `modelcalls merge`.
type mergeOptions struct {
	captureDirs     []string
	in, out         string
	includePayloads bool
	wait            time.Duration
	workers         int
}

// defaultMergeWorkers: merge workers spend most of their time waiting (quiescence polls, file reads),
// so there are more of them than cores.
func defaultMergeWorkers() int { return max(8, 4*runtime.GOMAXPROCS(0)) }

// mergeWindowBytes bounds the input bytes read but not yet written (together with the item window of
// 4 x workers lines); one line larger than this is still admitted on its own.
const mergeWindowBytes = 256 << 20

func newMergeCmd(s *Streams) *cobra.Command {
	var o mergeOptions
	cmd := &cobra.Command{
		Use:   "merge --capture-dir DIR [--in FILE] [--out FILE] [--include-payloads] [--wait DUR]",
		Short: "Attach captured model calls (ng_model_call_capture) to JSONL rollout records",
		Long: `Read JSONL rollout records from --in (default stdin) and write each one to --out (default stdout)
with ng_model_call_capture = {rollout_id, metrics, calls, gaps} attached. Every other byte of the
record is kept, in order; an existing ng_model_call_capture is replaced in place, else the field is
appended last. Records are merged in parallel and written in input order.

Before reading a rollout's capture, merge waits up to --wait for its outstanding capture writes
(claims); claims still live then give the gap model_call_capture_pending.

Lines that are not JSON objects, or whose rollout id cannot be derived or is invalid, are written
unchanged and reported on stderr with their line number; merge then exits 1 after writing
everything. Records without any _ng_* rollout field, and blank lines, are written unchanged
silently. A summary goes to stderr; a progress bar too when stderr is a terminal.

Without --in, records are read from stdin; on a terminal merge says so (end the input with
Ctrl-D). SIGINT or SIGTERM stop it at once, even while it waits for input; --out is then left as
it was.`,
		Example: `  modelcalls merge --capture-dir ./captures --in rollouts.jsonl --out merged.jsonl
  modelcalls merge --capture-dir ./captures < rollouts.jsonl > merged.jsonl
  modelcalls merge --capture-dir ./run1 --capture-dir ./run2 --in rollouts.jsonl --out rollouts.jsonl   # in place
  modelcalls merge --capture-dir ./captures --in rollouts.jsonl --wait 0 --include-payloads`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMerge(cmd.Context(), s, &o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.captureDirs, "capture-dir", nil, "capture directory (required; repeat to search several in order, the first holding a rollout wins)")
	f.StringVar(&o.in, "in", "", "JSONL rollout records to read (default: stdin; - is stdin)")
	f.StringVar(&o.out, "out", "", "file to write the merged records to, replaced only when all is written (default: stdout; - is stdout)")
	f.BoolVar(&o.includePayloads, "include-payloads", false, "keep request, response, request_raw and response_raw in each attached call")
	f.DurationVar(&o.wait, "wait", modelcalls.CaptureDrainTimeout, "longest wait per rollout for outstanding capture writes (0: look once, do not wait)")
	f.IntVar(&o.workers, "workers", defaultMergeWorkers(), "rollouts merged at once")
	return cmd
}

// checkCaptureDirs returns an ExitUsage error when no dir was given and an ExitNotFound error when
// one does not exist or is not a directory.
func checkCaptureDirs(dirs []string) error {
	if len(dirs) == 0 {
		return usageErrorf("--capture-dir is required (the directory the proxy writes <rollout_id>.capture.jsonl files to)")
	}
	for _, d := range dirs {
		if d == "" {
			return usageErrorf("--capture-dir must not be empty")
		}
		if err := checkDir(d); err != nil {
			return err
		}
	}
	return nil
}

// checkDir returns an ExitNotFound error naming dir when it does not exist or is not a directory.
func checkDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return withExit(ExitNotFound, fmt.Errorf("capture dir %s does not exist", dir))
	case err != nil:
		return withExit(ExitNotFound, fmt.Errorf("capture dir: %w", err))
	case !st.IsDir():
		return withExit(ExitNotFound, fmt.Errorf("capture dir %s is not a directory", dir))
	}
	return nil
}

// openInput opens --in ("" or "-": stdin). size is the size of a regular file, else -1. When the
// input is stdin and stdin is a terminal, it tells the user on stderr that it is waiting for input
// (prog names the command), so a forgotten --in does not look like a hang.
func openInput(s *Streams, prog, name string) (r io.Reader, size int64, closeFn func(), err error) {
	regularSize := func(f *os.File) int64 {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			return st.Size()
		}
		return -1
	}
	if name == "" || name == "-" {
		size = -1
		if f, ok := s.In.(*os.File); ok {
			size = regularSize(f)
			if isTerminal(f) {
				fmt.Fprintf(s.ErrOut, "modelcalls %s: reading rollout records from stdin (Ctrl-D to end)\n", prog)
			}
		}
		return s.In, size, func() {}, nil
	}
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil, withExit(ExitNotFound, fmt.Errorf("--in %s does not exist", name))
	}
	if err != nil {
		return nil, 0, nil, withExit(ExitFailure, fmt.Errorf("open --in: %w", err))
	}
	return f, regularSize(f), func() { f.Close() }, nil
}

// output is where merged lines go: stdout, or a temp file next to --out that replaces it on commit,
// so --out never holds a half-written result and may even name the --in file.
type output struct {
	w         *bufio.Writer
	file      *os.File
	target    string
	committed bool
}

func openOutput(s *Streams, name string) (*output, error) {
	if name == "" || name == "-" {
		return &output{w: bufio.NewWriterSize(s.Out, 1<<20)}, nil
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return nil, withExit(ExitFailure, fmt.Errorf("create --out: %w", err))
	}
	return &output{w: bufio.NewWriterSize(f, 1<<20), file: f, target: name}, nil
}

// commit flushes and, for a file, syncs it and renames it over the target.
func (o *output) commit() error {
	if err := o.w.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if o.file == nil {
		return nil
	}
	if err := o.file.Chmod(0o644); err != nil {
		return fmt.Errorf("chmod --out: %w", err)
	}
	if err := o.file.Sync(); err != nil {
		return fmt.Errorf("sync --out: %w", err)
	}
	if err := o.file.Close(); err != nil {
		return fmt.Errorf("close --out: %w", err)
	}
	if err := os.Rename(o.file.Name(), o.target); err != nil {
		return fmt.Errorf("replace --out: %w", err)
	}
	o.committed = true
	return nil
}

// abort removes the temp file of an output that was not committed.
func (o *output) abort() {
	if o.file != nil && !o.committed {
		o.file.Close()
		os.Remove(o.file.Name())
	}
}

// mergeOutcome is what the pipeline hands back for one input line.
type mergeOutcome struct {
	line   jsonlLine
	out    []byte // the line to write, without its terminator
	res    modelcalls.MergeResult
	blank  bool
	report error // non-nil: written unchanged and reported (SPEC §8)
	fatal  error // non-nil: stop (the run was cancelled)
}

// mergeSummary counts what merge did, for the summary line on stderr.
type mergeSummary struct {
	rollouts, calls, damaged int
	gaps                     map[string]int
	silent, blank, reported  int
}

func (m *mergeSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "merged %s, %s", plural(m.rollouts, "rollout", "rollouts"), plural(m.calls, "call", "calls"))
	if m.damaged > 0 {
		fmt.Fprintf(&b, " (%s)", plural(m.damaged, "damaged capture line", "damaged capture lines"))
	}
	b.WriteString("; gaps: ")
	if len(m.gaps) == 0 {
		b.WriteString("none")
	} else {
		codes := make([]string, 0, len(m.gaps))
		for c := range m.gaps {
			codes = append(codes, c)
		}
		slices.Sort(codes)
		for i, c := range codes {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s=%d", c, m.gaps[c])
		}
	}
	passed := m.silent + m.blank + m.reported
	fmt.Fprintf(&b, "; passed through: %d lines", passed)
	if passed > 0 {
		fmt.Fprintf(&b, " (%d without rollout fields, %d blank, %d reported)", m.silent, m.blank, m.reported)
	}
	return b.String()
}

func runMerge(ctx context.Context, s *Streams, o *mergeOptions) error {
	if err := checkCaptureDirs(o.captureDirs); err != nil {
		return err
	}
	if o.wait < 0 {
		return usageErrorf("--wait %s: must be >= 0 (0: look once, do not wait)", o.wait)
	}
	if o.workers < 1 {
		return usageErrorf("--workers %d: must be >= 1", o.workers)
	}
	opts := modelcalls.MergeOptions{IncludePayloads: o.includePayloads, DrainTimeout: o.wait}
	if o.wait == 0 {
		opts.DrainTimeout = -1 // MergeOptions: negative means look once
	}
	merger, err := modelcalls.NewMerger(o.captureDirs, opts)
	if err != nil {
		return withExit(ExitNotFound, err)
	}
	// SIGINT/SIGTERM stop the run cleanly: the read of stdin (a terminal or pipe) is abandoned,
	// workers stop waiting, the temp --out file is removed. The handler is in place before the
	// stdin prompt is shown, so a Ctrl-C right after it is caught too.
	ctx, stop := interruptContext(ctx)
	defer stop()
	in, size, closeIn, err := openInput(s, "merge", o.in)
	if err != nil {
		return err
	}
	defer closeIn()
	in = newCtxReader(ctx, in)
	out, err := openOutput(s, o.out)
	if err != nil {
		return err
	}
	defer out.abort()

	bar := newProgress(s.ErrOut, size)
	lr := newLineReader(in)
	sum := mergeSummary{gaps: map[string]int{}}
	next := func() (jsonlLine, int64, bool, error) {
		l, ok, err := lr.next()
		return l, int64(len(l.body)), ok, err
	}
	work := func(ctx context.Context, l jsonlLine) mergeOutcome {
		oc := mergeOutcome{line: l, out: l.body}
		if len(bytes.TrimSpace(l.body)) == 0 {
			oc.blank = true
			return oc
		}
		merged, res, err := merger.Merge(ctx, l.body)
		switch {
		case errors.Is(err, modelcalls.ErrNotRolloutRecord):
			oc.report = err
		case err != nil:
			oc.fatal = fmt.Errorf("line %d: %w", l.num, err)
		default:
			oc.out, oc.res = merged, res
		}
		return oc
	}
	emit := func(oc mergeOutcome) error {
		if oc.fatal != nil {
			return oc.fatal
		}
		switch {
		case oc.blank:
			sum.blank++
		case oc.report != nil:
			sum.reported++
			bar.clear()
			fmt.Fprintf(s.ErrOut, "modelcalls merge: line %d: passed through unchanged: %v\n", oc.line.num, oc.report)
		case !oc.res.Attached:
			sum.silent++
		default:
			sum.rollouts++
			sum.calls += oc.res.Calls
			sum.damaged += oc.res.Damaged
			for _, g := range oc.res.Gaps {
				sum.gaps[g.Code]++
			}
		}
		out.w.Write(oc.out)
		if _, err := out.w.Write(oc.line.eol); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		bar.add(int64(len(oc.line.body) + len(oc.line.eol)))
		return nil
	}
	lim := pipelineLimits{workers: o.workers, maxItems: 4 * o.workers, maxBytes: mergeWindowBytes}
	err = runOrdered(ctx, lim, next, work, emit)
	bar.finish()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%v: --out %s was not replaced", context.Cause(ctx), out.target)
			if out.file == nil {
				err = fmt.Errorf("%v: the output on stdout is incomplete", context.Cause(ctx))
			}
		}
		return withExit(ExitFailure, err)
	}
	if err := out.commit(); err != nil {
		return withExit(ExitFailure, err)
	}
	fmt.Fprintf(s.ErrOut, "modelcalls merge: %s\n", &sum)
	if sum.reported > 0 {
		return silentExit{code: ExitFailure}
	}
	return nil
}

// progress draws a progress bar on stderr when stderr is a terminal and does nothing otherwise. With
// a known input size it counts bytes, else it spins and counts lines.
type progress struct {
	bar   *progressbar.ProgressBar
	bytes bool
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

func newProgress(w io.Writer, size int64) *progress {
	if !isTerminal(w) {
		return &progress{}
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("merging"),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
	}
	if size > 0 {
		opts = append(opts, progressbar.OptionShowBytes(true), progressbar.OptionSetPredictTime(true))
		return &progress{bar: progressbar.NewOptions64(size, opts...), bytes: true}
	}
	opts = append(opts, progressbar.OptionShowCount(), progressbar.OptionSetItsString("lines"), progressbar.OptionShowIts())
	return &progress{bar: progressbar.NewOptions64(-1, opts...)}
}

// add records one written line of n bytes.
func (p *progress) add(n int64) {
	switch {
	case p.bar == nil:
	case p.bytes:
		p.bar.Add64(n)
	default:
		p.bar.Add64(1)
	}
}

// clear takes the bar off the terminal so a message can be printed; the next add redraws it.
func (p *progress) clear() {
	if p.bar != nil {
		p.bar.Clear()
	}
}

// finish ends the bar (and the spinner's redraw goroutine) and clears it.
func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}

// pipelineLimits bound the ordered pipeline: how many jobs run at once, and how many jobs (and input
// bytes) may be read but not yet emitted. The byte bound always admits one job, however large, so a
// single huge line cannot stall the pipeline.
type pipelineLimits struct {
	workers  int   // goroutines running fn
	maxItems int   // jobs read and not yet emitted
	maxBytes int64 // summed job weights read and not yet emitted
}

// runOrdered reads jobs with next (from the calling goroutine's point of view, sequentially), runs fn
// on them on lim.workers goroutines, and hands each result to emit in the order the jobs were read.
// next returns (job, weight in bytes, ok); ok false means the input is exhausted; a non-nil error stops
// reading, and runOrdered returns it after emitting every result of the jobs read before it. An emit
// error stops everything and is returned. fn gets a context that is cancelled once the run stops early.
// All goroutines have exited when runOrdered returns.
func runOrdered[J, R any](ctx context.Context, lim pipelineLimits, next func() (J, int64, bool, error),
	fn func(context.Context, J) R, emit func(R) error) error {
	lim.workers = max(1, lim.workers)
	lim.maxItems = max(1, lim.maxItems)
	lim.maxBytes = max(1, lim.maxBytes)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bud := newBudget(lim.maxItems, lim.maxBytes)
	stopBudget := context.AfterFunc(ctx, bud.close)
	defer stopBudget()

	type slot struct {
		job    J
		weight int64
		done   chan R // buffered: a worker never blocks on it
	}
	work := make(chan *slot)
	order := make(chan *slot, lim.maxItems)
	var readErr error // written by the producer before it closes order

	var wg sync.WaitGroup
	for range lim.workers {
		wg.Go(func() {
			for s := range work {
				s.done <- fn(ctx, s.job)
			}
		})
	}
	wg.Go(func() {
		defer close(order)
		defer close(work)
		for {
			job, weight, ok, err := next()
			if err != nil {
				readErr = err
				return
			}
			if !ok || !bud.acquire(weight) {
				return
			}
			if ctx.Err() != nil {
				bud.release(weight)
				return
			}
			s := &slot{job: job, weight: weight, done: make(chan R, 1)}
			select {
			case work <- s:
			case <-ctx.Done():
				bud.release(weight)
				return
			}
			order <- s // never blocks: the budget admits at most maxItems slots
		}
	})

	var emitErr error
	for s := range order {
		r := <-s.done
		if emitErr == nil {
			if emitErr = emit(r); emitErr != nil {
				// Close the budget here, not only from the AfterFunc (which runs in a goroutine of
				// its own): the releases below must not admit more jobs in the meantime.
				cancel()
				bud.close()
			}
		}
		bud.release(s.weight)
	}
	wg.Wait()
	if emitErr != nil {
		return emitErr
	}
	if readErr != nil {
		return readErr
	}
	return ctx.Err()
}

// budget admits jobs while fewer than maxItems are outstanding and their weights fit maxBytes (an
// empty budget admits any single job). close wakes every waiter and makes acquire fail.
type budget struct {
	mu       sync.Mutex
	cond     sync.Cond
	items    int
	bytes    int64
	maxItems int
	maxBytes int64
	closed   bool
}

func newBudget(maxItems int, maxBytes int64) *budget {
	b := &budget{maxItems: maxItems, maxBytes: maxBytes}
	b.cond.L = &b.mu
	return b
}

func (b *budget) acquire(w int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.closed && b.items > 0 && (b.items >= b.maxItems || b.bytes+w > b.maxBytes) {
		b.cond.Wait()
	}
	if b.closed {
		return false
	}
	b.items++
	b.bytes += w
	return true
}

func (b *budget) release(w int64) {
	b.mu.Lock()
	b.items--
	b.bytes -= w
	b.mu.Unlock()
	b.cond.Broadcast()
}

func (b *budget) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cond.Broadcast()
}

// jsonlLine is one input line: its 1-based number, the content without the line terminator, and the
// terminator exactly as read ("\n", "\r\n", or "" for a last line without one).
type jsonlLine struct {
	num  int
	body []byte
	eol  []byte
}

var (
	eolLF   = []byte("\n")
	eolCRLF = []byte("\r\n")
)

// lineReader reads lines of any length from r (bufio.Reader, not Scanner: rollout records can be
// many megabytes) keeping the terminator apart so output can reproduce the input byte for byte.
type lineReader struct {
	r    *bufio.Reader
	num  int
	read int64 // bytes consumed so far
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 1<<20)}
}

// next returns the next line; ok is false at the end of input.
func (lr *lineReader) next() (jsonlLine, bool, error) {
	b, err := lr.r.ReadBytes('\n')
	if len(b) == 0 {
		if err == nil || errors.Is(err, io.EOF) {
			return jsonlLine{}, false, nil
		}
		return jsonlLine{}, false, fmt.Errorf("read line %d: %w", lr.num+1, err)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return jsonlLine{}, false, fmt.Errorf("read line %d: %w", lr.num+1, err)
	}
	lr.num++
	lr.read += int64(len(b))
	l := jsonlLine{num: lr.num, body: b}
	switch {
	case bytes.HasSuffix(b, eolCRLF):
		l.body, l.eol = b[:len(b)-2], eolCRLF
	case bytes.HasSuffix(b, eolLF):
		l.body, l.eol = b[:len(b)-1], eolLF
	}
	return l, true, nil
}
