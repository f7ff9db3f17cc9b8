package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/internal/jsonl"
	"github.com/modelcalls/modelcalls/internal/ordered"
)

// mergeOptions are the flags of `modelcalls merge`.
type mergeOptions struct {
	recordsOptions
	out             string
	includePayloads bool
	lineage         bool
	workers         int
	// duplicates is --duplicate-rollouts: "warn" names rollouts merged into several records on
	// stderr, "error" does that and exits 1.
	duplicates string
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
		Use:   "merge --capture-dir DIR [--in FILE] [--out FILE] [--include-payloads] [--lineage] [--wait DUR]",
		Short: "Attach captured model calls (ng_model_call_capture) to JSONL rollout records",
		Long: `Read JSONL rollout records from --in (default stdin) and write each one to --out (default stdout)
with ng_model_call_capture = {rollout_id, metrics, calls, gaps} attached. Every other byte of the
record is kept, in order; an existing ng_model_call_capture is replaced in place, else the field is
appended last. Records are merged in parallel and written in input order.

Before reading a rollout's capture, merge waits up to --wait for its outstanding capture writes
(claims); claims still live then give the gap model_call_capture_pending.

--lineage also derives each rollout's lineage (modelcalls lineage; docs/lineage.md): every attached
call gets "parent_call_id" and "relation", and the attachment gets "lineage" = {main_chain, calls,
roots, extends, forks, retries, resamples, compactions, main_chain_length, off_main_chain,
audited_edges, audit_failures}. NeMo Gym's readers ignore these keys. It parses every request and
response, so it is off by default.

Lines that are not JSON objects, or whose rollout id cannot be derived or is invalid, are written
unchanged and reported on stderr with their line number (the first 10; the rest are counted in one
line); merge then exits 1 after writing everything.

Several records that resolve to the same rollout id each get all of its calls, so whatever adds up
the records downstream counts that rollout's calls and tokens once per record. After writing
everything merge names each such rollout on stderr with its record count and line numbers;
with --duplicate-rollouts=error it then exits 1. Records without any _ng_* rollout field, and blank lines, are written unchanged
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
	o.addFlags(f, "capture directory (required; repeat to search several in order, the first holding a rollout wins)",
		"longest wait per rollout for outstanding capture writes (0: look once, do not wait)")
	f.StringVar(&o.out, "out", "", "file to write the merged records to, replaced only when all is written (default: stdout; - is stdout)")
	f.BoolVar(&o.includePayloads, "include-payloads", false, "keep request, response, request_raw and response_raw in each attached call")
	f.BoolVar(&o.lineage, "lineage", false, "add parent_call_id and relation to each attached call and a lineage summary to the attachment (docs/lineage.md)")
	f.IntVar(&o.workers, "workers", defaultMergeWorkers(), "rollouts merged at once")
	f.StringVar(&o.duplicates, "duplicate-rollouts", "warn", "a rollout id attached to several records: warn (name it on stderr) or error (name it and exit 1)")
	return cmd
}

// mergeOutcome is what the pipeline hands back for one input line.
type mergeOutcome struct {
	line   jsonl.Line
	out    []byte // the line to write, without its terminator
	res    modelcalls.MergeResult
	blank  bool
	report error // non-nil: written unchanged, reported with its line number; merge exits 1
	fatal  error // non-nil: stop (the run was cancelled)
}

// maxReportedLines is how many lines passed through unchanged merge names on stderr one by one; the
// rest are counted in one line (a file that is not rollout records at all would otherwise give a
// line of stderr per line of input).
const maxReportedLines = 10

// mergeSummary counts what merge did, for the summary line on stderr.
type mergeSummary struct {
	rollouts, calls, damaged int
	gaps                     map[string]int
	silent, blank, reported  int
	// first is the input line number of the first record each rollout id was attached to; dups
	// holds every line number of the ids attached to more than one record.
	first map[string]int
	dups  map[string][]int
}

// attached notes that rollout id was attached to the record on input line num.
func (m *mergeSummary) attached(id string, num int) {
	f, seen := m.first[id]
	switch {
	case !seen:
		m.first[id] = num
	case m.dups[id] == nil:
		m.dups[id] = []int{f, num}
	default:
		m.dups[id] = append(m.dups[id], num)
	}
}

// maxDuplicateLines is how many line numbers a duplicate rollout's report lists.
const maxDuplicateLines = 10

// duplicates returns one report per rollout id attached to more than one record, in the order of
// their first records: the id, the record count, and the first line numbers.
func (m *mergeSummary) duplicates() []string {
	ids := make([]string, 0, len(m.dups))
	for id := range m.dups {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return m.first[a] - m.first[b] })
	reports := make([]string, 0, len(ids))
	for _, id := range ids {
		lines := m.dups[id]
		nums := make([]string, 0, min(len(lines), maxDuplicateLines))
		for _, n := range lines[:min(len(lines), maxDuplicateLines)] {
			nums = append(nums, fmt.Sprint(n))
		}
		more := ""
		if len(lines) > maxDuplicateLines {
			more = ", ..."
		}
		reports = append(reports, fmt.Sprintf("rollout %s merged into %d records (lines %s%s): each carries all its calls, so its calls and tokens count %d times",
			id, len(lines), strings.Join(nums, ", "), more, len(lines)))
	}
	return reports
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
	if err := o.check(); err != nil {
		return err
	}
	if o.workers < 1 {
		return usageErrorf("--workers %d: must be >= 1", o.workers)
	}
	if o.duplicates != "warn" && o.duplicates != "error" {
		return usageErrorf("--duplicate-rollouts %q: want warn or error", o.duplicates)
	}
	opts := modelcalls.MergeOptions{IncludePayloads: o.includePayloads, DrainTimeout: o.wait, Lineage: o.lineage}
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
	lr := jsonl.NewReader(in)
	sum := mergeSummary{gaps: map[string]int{}, first: map[string]int{}, dups: map[string][]int{}}
	var lastUnlisted int // line number of the last reported line past maxReportedLines
	next := func() (jsonl.Line, int64, bool, error) {
		l, ok, err := lr.Next()
		return l, int64(len(l.Body)), ok, err
	}
	work := func(ctx context.Context, l jsonl.Line) mergeOutcome {
		oc := mergeOutcome{line: l, out: l.Body}
		if len(bytes.TrimSpace(l.Body)) == 0 {
			oc.blank = true
			return oc
		}
		merged, res, err := merger.Merge(ctx, l.Body)
		switch {
		case errors.Is(err, modelcalls.ErrNotRolloutRecord):
			oc.report = err
		case err != nil:
			oc.fatal = fmt.Errorf("line %d: %w", l.Num, err)
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
			if sum.reported <= maxReportedLines {
				bar.clear()
				fmt.Fprintf(s.ErrOut, "modelcalls merge: line %d: passed through unchanged: %v\n", oc.line.Num, oc.report)
			} else {
				lastUnlisted = oc.line.Num
			}
		case !oc.res.Attached:
			sum.silent++
		default:
			sum.rollouts++
			sum.attached(oc.res.RolloutID, oc.line.Num)
			sum.calls += oc.res.Calls
			sum.damaged += oc.res.Damaged
			for _, g := range oc.res.Gaps {
				sum.gaps[g.Code]++
			}
		}
		out.w.Write(oc.out)
		if _, err := out.w.Write(oc.line.EOL); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		bar.add(int64(len(oc.line.Body) + len(oc.line.EOL)))
		return nil
	}
	lim := ordered.Limits{Workers: o.workers, MaxItems: 4 * o.workers, MaxBytes: mergeWindowBytes}
	err = ordered.Run(ctx, lim, next, work, emit)
	bar.finish()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%v: --out %s was not replaced", context.Cause(ctx), out.target)
			switch {
			case out.direct != nil:
				err = fmt.Errorf("%v: the output written to %s is incomplete", context.Cause(ctx), out.target)
			case out.file == nil:
				err = fmt.Errorf("%v: the output on stdout is incomplete", context.Cause(ctx))
			}
		}
		return withExit(ExitFailure, err)
	}
	if err := out.commit(); err != nil {
		return withExit(ExitFailure, err)
	}
	if n := sum.reported - maxReportedLines; n > 0 {
		fmt.Fprintf(s.ErrOut, "modelcalls merge: %s passed through unchanged too, not listed (the last is line %d): not JSON objects, or records whose rollout id cannot be derived\n",
			plural(n, "more line", "more lines"), lastUnlisted)
	}
	dups := sum.duplicates()
	for _, d := range dups {
		fmt.Fprintf(s.ErrOut, "modelcalls merge: %s\n", d)
	}
	fmt.Fprintf(s.ErrOut, "modelcalls merge: %s\n", &sum)
	if sum.reported > 0 || len(dups) > 0 && o.duplicates == "error" {
		return silentExit{code: ExitFailure}
	}
	return nil
}
