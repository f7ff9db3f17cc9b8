package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/mattn/go-runewidth"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// callsOptions are the flags of `modelcalls calls`.
type callsOptions struct {
	reportOptions
	includePayloads bool
	columns         string
}

func newCallsCmd(s *Streams) *cobra.Command {
	var o callsOptions
	cmd := &cobra.Command{
		Use:   "calls --capture-dir DIR ROLLOUT_ID [--format table|tsv|json] [--model M] [--status S] [--error E]",
		Short: "Show the captured model calls of one rollout",
		Long: `Read <DIR>/<ROLLOUT_ID>.capture.jsonl and show one row per captured model call: dialect, model,
HTTP status, finish reason, tokens, cache, latency, time to first token, tool calls, error
category and who answered (source: upstream, or local: <reason> when the gateway or a replay
answered itself, which is not an error), then the rollout's metrics (the sums merge attaches).

Output: a table when stdout is a terminal, tab-separated values with
a header line when it is not (a pipe or a file; unknown values are empty fields), or with
--format json (or --json) one ModelCallRecord per line (the records merge attaches, every field
present, null when unknown); --include-payloads adds request, response, request_raw and response_raw.

The table fits the terminal: it shows the widest layout whose cells fit whole (a long tool calls
cell may be cut to 20 columns): every column ("full", also off a terminal), "wide" (#, model,
status, finish, tok in, tok out, cached tok, latency ms, ttft ms, tool calls, error) or "compact"
(#, model, status, tok in/out, latency, tools, error), where cells that still do not fit are cut
with "…"; a line under the table names the columns left out. --columns picks a layout by name, or the columns by key: call_index,
dialect, model, status_code, finish_reason, tokens_in, tokens_out, tokens_in_out, tokens_reasoning,
tokens_total, cached_tokens, latency_total_ms, latency, latency_ttft_ms, tool_calls, tool_count,
error_category, response_source.

--model, --status and --error keep only the matching calls (repeat a flag or comma-separate values
for several; a call must match every flag given; an empty value is a usage error, exit 2). A --model
value no call of the rollout has is said on stderr, with the rollout's models. --error takes any, none, a known error category
(timeout, rate_limit, auth, not_found, client_error, upstream_error, connection, exception,
incomplete, stream_truncated, capture_parse_error, cancelled, capture_too_large) or a category some
call in DIR has (other producers may write their own); any other value is a usage error (exit 2)
that lists both. The capture dir may also be given as the first argument (modelcalls calls DIR
ROLLOUT_ID). --capture-dir may be repeated: the rollout is read from the first dir that holds it,
as merge reads it (stderr says when a later dir holds it too).

Damaged capture lines are reported on stderr with their line numbers and skipped. Lines in
<ROLLOUT_ID>.capture.orphaned.jsonl (calls still in flight when the rollout was cleared with
clear --force) are not shown; stderr says how many there are. The exit code is
0 when the rollout was read, 3 when DIR or the rollout does not exist (the error offers rollout ids
like the one given), 2 for an invalid rollout id.

Without ROLLOUT_ID (modelcalls calls DIR): list the rollouts of DIR instead, one per line: id,
calls, errors (calls with an error category), last activity (the latest completed_at), damaged
lines and the incomplete mark; a table, TSV or JSON lines as above.`,
		Example: `  modelcalls calls --capture-dir ./captures r1
  modelcalls calls --capture-dir ./captures r1 --error any          # only the failing calls
  modelcalls calls --capture-dir ./captures r1 --status 4xx,5xx --format json
  modelcalls calls --capture-dir ./captures r1 | cut -f1,4,11        # TSV when piped
  modelcalls calls ./captures r1                                     # the positional form
  modelcalls calls ./captures                                        # list the rollouts`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dirs, ok := noRolloutArg(o.captureDirs, args); ok {
				format, err := resolveFormat(o.format, o.json, s.Out)
				if err != nil {
					return err
				}
				return listRollouts(cmd.Context(), s, "calls", dirs, format)
			}
			dirs, rest, err := captureDirArgs("calls", o.captureDirs, args, "ROLLOUT_ID")
			if err != nil {
				return err
			}
			return runCalls(s, &o, dirs, rest[0])
		},
	}
	f := cmd.Flags()
	o.addFlags(f, "capture directory (or give it as the first argument); repeat to look in several in order, the first holding the rollout wins, as in merge",
		"same as --format json: one JSON record per line")
	f.BoolVar(&o.includePayloads, "include-payloads", false, "with --format json: include request, response, request_raw and response_raw")
	f.StringVar(&o.columns, "columns", "", "table columns: a layout (compact, wide, full) or comma-separated column keys (default: the widest layout that fits the terminal)")
	return cmd
}

// rolloutCalls is what one rollout's capture holds, read tolerantly.
type rolloutCalls struct {
	dir        string   // the capture dir it was read from
	shadowed   []string // later capture dirs that hold the rollout too (not read)
	path       string
	records    []modelcalls.ModelCallRecord
	lines      [][]byte         // each record's capture line as read, before any filter (lineage reads keys the record does not carry)
	damages    []capture.Damage // one per damaged line, in line order
	hasCapture bool
	incomplete bool
	claims     capture.ClaimCount
	orphans    []orphanFile // the rollout's orphan files that hold lines
	total      int          // records before a filter was applied
	// tokenCaptures holds the token_capture object of each call whose line has one, by call_index
	// (it is not part of the record; show's token summary reads it).
	tokenCaptures map[int][]byte
}

// orphanFile is a <id>.capture.orphaned.jsonl: the lines of calls that were still in flight when
// the rollout was cleared (clear --force), kept apart from the capture of the next attempt.
type orphanFile struct {
	path  string
	lines int
}

// orphanNote is the stderr hint about o: calls and show never show its lines.
func orphanNote(id string, o orphanFile) string {
	return fmt.Sprintf("rollout %s: %s in %s not shown: calls of an earlier attempt, still in flight when the rollout was cleared (clear --force), wrote there instead of into this capture (%s lists them); clear never removes that file",
		id, plural(o.lines, "line", "lines"), o.path, id+capture.ClearedSuffix)
}

// readOrphan counts the lines of store's orphan file of id (capture.Store.OrphanLines); ok is false
// when there is none, or it holds no line.
func readOrphan(store *capture.Store, id string) (orphanFile, bool, error) {
	p, err := store.OrphanPath(id)
	if err != nil {
		return orphanFile{}, false, err
	}
	n, err := store.OrphanLines(id)
	if err != nil {
		return orphanFile{}, false, err
	}
	return orphanFile{path: p, lines: n}, n > 0, nil
}

// readRolloutCalls reads rollout id from store like modelcalls.ReadAvailableRecords does, but keeps
// the line number and reason of every damaged line (unreadable lines, and lines whose record cannot
// be built) so they can be reported.
func readRolloutCalls(store *capture.Store, id string) (*rolloutCalls, error) {
	rc := &rolloutCalls{}
	var err error
	if rc.path, err = store.CapturePath(id); err != nil {
		return nil, err
	}
	if rc.hasCapture, rc.incomplete, err = store.Stat(id); err != nil {
		return nil, err
	}
	if rc.claims, err = store.Claims(id); err != nil {
		return nil, err
	}
	if o, ok, err := readOrphan(store, id); err != nil {
		return nil, err
	} else if ok {
		rc.orphans = append(rc.orphans, o)
	}
	entries, damages, err := store.ReadAvailable(id)
	if err != nil {
		return nil, err
	}
	rc.records = make([]modelcalls.ModelCallRecord, 0, len(entries))
	di := 0
	for _, e := range entries {
		for di < len(damages) && damages[di].Line < e.Line {
			rc.damages = append(rc.damages, damages[di])
			di++
		}
		rec, err := modelcalls.BuildRecord(e.Data, e.Index)
		if err != nil {
			rc.damages = append(rc.damages, capture.Damage{Index: e.Index, Line: e.Line, Err: err})
			continue
		}
		rc.records = append(rc.records, *rec)
		rc.lines = append(rc.lines, e.Data)
		if bytes.Contains(e.Data, []byte(`"token_capture":`)) {
			if tc := jsonscan.Lookup(e.Data, "token_capture"); jsonscan.IsObject(tc) {
				if rc.tokenCaptures == nil {
					rc.tokenCaptures = map[int][]byte{}
				}
				rc.tokenCaptures[e.Index] = tc
			}
		}
	}
	rc.damages = append(rc.damages, damages[di:]...)
	return rc, nil
}

func runCalls(s *Streams, o *callsOptions, dirs []string, id string) error {
	format, err := resolveFormat(o.format, o.json, s.Out)
	if err != nil {
		return err
	}
	if o.includePayloads && format != formatJSON {
		return usageErrorf("--include-payloads needs --format json (tables and TSV never show payloads)")
	}
	if err := o.filter.check(); err != nil {
		return err
	}
	width := outputWidth(s.Out)
	cols, err := resolveCallsColumns(o.columns)
	if err != nil {
		return err
	}
	if o.columns != "" && format != formatTable {
		return usageErrorf("--columns is for the table (--format table); TSV and JSON carry every field")
	}
	if err := checkRolloutID("ROLLOUT_ID", id); err != nil {
		return err
	}
	rc, err := loadRollout(dirs, id)
	if err != nil {
		return err
	}
	if err := o.filter.checkErrorValues(dirs, rc.records); err != nil {
		return err
	}
	for _, d := range rc.shadowed {
		fmt.Fprintf(s.ErrOut, "modelcalls calls: rollout %s is also in %s, not shown: it is read from %s, the first --capture-dir that holds it (as merge reads it)\n", id, d, rc.dir)
	}
	for _, d := range rc.damages {
		fmt.Fprintf(s.ErrOut, "modelcalls calls: %s:%d: damaged line skipped: %v\n", rc.path, d.Line, d.Err)
	}
	if rc.incomplete {
		fmt.Fprintf(s.ErrOut, "modelcalls calls: rollout %s is marked incomplete: a capture write failed, calls may be missing\n", id)
	}
	if rc.claims.Live > 0 || rc.claims.Stale > 0 {
		fmt.Fprintf(s.ErrOut, "modelcalls calls: rollout %s: %d capture writes in progress, %d abandoned (stale claims)\n",
			id, rc.claims.Live, rc.claims.Stale)
	}
	for _, orphan := range rc.orphans {
		fmt.Fprintf(s.ErrOut, "modelcalls calls: %s\n", orphanNote(id, orphan))
	}

	if len(o.filter.models) > 0 {
		seen := map[string]bool{}
		noteModels(seen, rc.records)
		if n := o.filter.unmatchedModelsNote("of rollout "+id, "its models", seen); n != "" {
			fmt.Fprintf(s.ErrOut, "modelcalls calls: %s\n", n)
		}
	}
	rc.total = len(rc.records)
	rc.records = o.filter.apply(rc.records)
	w := bufio.NewWriter(s.Out)
	switch format {
	case formatJSON:
		for i := range rc.records {
			// Written in pieces: a record with payloads is never built whole in memory.
			rc.records[i].WriteJSON(w, o.includePayloads)
			w.WriteByte('\n')
		}
	case formatTSV:
		writeCallsTSV(w, rc.records)
	default:
		layout := ""
		if cols == nil {
			layout = callsLayoutFor(rc.records, width)
			cols, _ = resolveCallsColumns(layout)
		}
		if err := printCallsTable(w, rc, cols, width); err != nil {
			return withExit(ExitFailure, err)
		}
		if layout != "" && width > 0 {
			for _, l := range wrapParts(layoutHint(layout, width), " ", width) {
				fmt.Fprintln(w, l)
			}
		}
	}
	if err := w.Flush(); err != nil {
		return withExit(ExitFailure, fmt.Errorf("write output: %w", err))
	}
	return nil
}

// callColumn is one column `modelcalls calls` can show in its table: key names it for --columns
// (the record field it shows, as in the TSV header), header is what the table prints.
type callColumn struct {
	key, header string
	right       bool // numeric: right-aligned
	shrink      bool // cut first when the table is wider than the terminal
	cell        func(r *modelcalls.ModelCallRecord) string
}

// callColumns are every column of the calls table, in table order.
var callColumns = []callColumn{
	{"call_index", "#", true, false, func(r *modelcalls.ModelCallRecord) string { return strconv.Itoa(r.CallIndex) }},
	{"dialect", "dialect", false, false, func(r *modelcalls.ModelCallRecord) string { return str(r.Dialect) }},
	{"model", "model", false, true, func(r *modelcalls.ModelCallRecord) string { return str(r.Model) }},
	{"status_code", "status", true, false, func(r *modelcalls.ModelCallRecord) string { return intp(r.StatusCode) }},
	{"finish_reason", "finish", false, true, finishCell},
	{"tokens_in", "tok in", true, false, func(r *modelcalls.ModelCallRecord) string { return i64p(r.TokensIn) }},
	{"tokens_out", "tok out", true, false, func(r *modelcalls.ModelCallRecord) string { return i64p(r.TokensOut) }},
	{"tokens_in_out", "tok in/out", true, false, func(r *modelcalls.ModelCallRecord) string { return i64p(r.TokensIn) + "/" + i64p(r.TokensOut) }},
	{"tokens_reasoning", "reasoning tok", true, false, func(r *modelcalls.ModelCallRecord) string { return i64p(r.TokensReasoning) }},
	{"tokens_total", "total tok", true, false, func(r *modelcalls.ModelCallRecord) string { return i64p(r.TokensTotal) }},
	{"cached_tokens", "cached tok", true, false, cachedCell},
	{"latency_total_ms", "latency ms", true, false, func(r *modelcalls.ModelCallRecord) string { return msp(r.LatencyTotalMS) }},
	{"latency", "latency", true, false, func(r *modelcalls.ModelCallRecord) string { return secondsCell(r.LatencyTotalMS) }},
	{"latency_ttft_ms", "ttft ms", true, false, func(r *modelcalls.ModelCallRecord) string { return msp(r.LatencyTTFTMS) }},
	{"tool_calls", "tool calls", false, true, func(r *modelcalls.ModelCallRecord) string { return toolCallsCell(r.ToolCalls) }},
	{"tool_count", "tools", true, false, func(r *modelcalls.ModelCallRecord) string { return strconv.Itoa(len(r.ToolCalls)) }},
	{"error_category", "error", false, true, errorCell},
	{"response_source", "source", false, true, sourceCell},
}

// callsLayouts are the named column sets of the calls table; --columns takes a name or a list of
// column keys. Without --columns the table picks the widest layout whose cells fit the terminal
// (callsLayoutFor).
var callsLayouts = map[string][]string{
	"full": {"call_index", "dialect", "model", "status_code", "finish_reason", "tokens_in", "tokens_out", "tokens_reasoning",
		"tokens_total", "cached_tokens", "latency_total_ms", "latency_ttft_ms", "tool_calls", "error_category", "response_source"},
	"wide": {"call_index", "model", "status_code", "finish_reason", "tokens_in", "tokens_out", "cached_tokens",
		"latency_total_ms", "latency_ttft_ms", "tool_calls", "error_category"},
	"compact": {"call_index", "model", "status_code", "tokens_in_out", "latency", "tool_count", "error_category"},
}

// callsLayoutFor is the widest layout (full, wide, compact) whose table of records fits in width
// columns with every header and cell whole but the tool calls, which may be cut to
// minToolCallsWidth (their count comes first); compact when none does (its cells are then cut).
// width <= 0 (not a terminal) is full. The layout follows the content: a rollout of short model
// names gets the full layout on a narrower terminal than one of long names.
func callsLayoutFor(records []modelcalls.ModelCallRecord, width int) string {
	if width <= 0 {
		return "full"
	}
	for _, name := range []string{"full", "wide"} {
		cols, _ := resolveCallsColumns(name)
		if callsTableWidth(cols, callsRows(cols, records)) <= width {
			return name
		}
	}
	return "compact"
}

// minToolCallsWidth is the narrowest the tool calls cells are cut to while a layout counts as
// fitting ("2: get_weather, sear…").
const minToolCallsWidth = 20

// callsTableWidth is the width of the table of cols and rows with the tool calls cut to
// minToolCallsWidth, nothing else cut.
func callsTableWidth(cols []callColumn, rows [][]string) int {
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = c.header
	}
	total := tableWidth(header, rows)
	if i := slices.IndexFunc(cols, func(c callColumn) bool { return c.key == "tool_calls" }); i >= 0 {
		total -= toolCallsExcess(rows, i, runewidth.StringWidth(header[i]), minToolCallsWidth)
	}
	return total
}

// toolCallsExcess is how many columns the widest cell of column i of rows is over the larger of
// floor and the header's width hw.
func toolCallsExcess(rows [][]string, i, hw, floor int) int {
	widest := 0
	for _, r := range rows {
		widest = max(widest, runewidth.StringWidth(r[i]))
	}
	return max(0, widest-max(hw, floor))
}

// cutToolCalls cuts the tool calls cells of rows (column i of cols) so that the table is no wider
// than width, never below minToolCallsWidth: a layout that fits with them cut keeps every other
// cell whole (fitColumns would cut the widest text column first, often the model).
func cutToolCalls(cols []callColumn, rows [][]string, width int) {
	i := slices.IndexFunc(cols, func(c callColumn) bool { return c.key == "tool_calls" })
	if i < 0 || width <= 0 {
		return
	}
	header := make([]string, len(cols))
	for j, c := range cols {
		header[j] = c.header
	}
	over := tableWidth(header, rows) - width
	if over <= 0 {
		return
	}
	widest := 0
	for _, r := range rows {
		widest = max(widest, runewidth.StringWidth(r[i]))
	}
	to := max(widest-over, minToolCallsWidth, runewidth.StringWidth(header[i]))
	for _, r := range rows {
		if runewidth.StringWidth(r[i]) > to {
			r[i] = runewidth.Truncate(r[i], to, "…")
		}
	}
}

// callsRows are the cells of the calls table: one row per record, one cell per column.
func callsRows(cols []callColumn, records []modelcalls.ModelCallRecord) [][]string {
	rows := make([][]string, 0, len(records))
	for i := range records {
		row := make([]string, len(cols))
		for j, c := range cols {
			row[j] = c.cell(&records[i])
		}
		rows = append(rows, row)
	}
	return rows
}

// resolveCallsColumns turns --columns (a layout name, or comma-separated column keys) into
// columns, nil for "" (the layout callsLayoutFor picks by width). An unknown name is a usage error
// listing the known ones.
func resolveCallsColumns(spec string) ([]callColumn, error) {
	if spec == "" {
		return nil, nil
	}
	keys, ok := callsLayouts[spec]
	if !ok {
		keys = strings.Split(spec, ",")
	}
	var cols []callColumn
	for _, k := range keys {
		k = strings.TrimSpace(k)
		i := slices.IndexFunc(callColumns, func(c callColumn) bool { return c.key == k })
		if i < 0 {
			known := make([]string, len(callColumns))
			for j, c := range callColumns {
				known[j] = c.key
			}
			return nil, usageErrorf("--columns: unknown column %q%s (layouts: compact, wide, full; columns: %s)", k,
				didYouMean(similarNames(k, append([]string{"compact", "wide", "full"}, known...))), strings.Join(known, ", "))
		}
		cols = append(cols, callColumns[i])
	}
	return cols, nil
}

// finishCell shows finish_reason, else the Responses API's response_status.
func finishCell(r *modelcalls.ModelCallRecord) string {
	if r.FinishReason == nil {
		return str(r.ResponseStatus)
	}
	return *r.FinishReason
}

// secondsCell shows milliseconds as seconds with one decimal ("1.2s"), or milliseconds under one
// second ("85ms", "0.06ms" under 10), for the compact layout.
func secondsCell(p *float64) string {
	switch {
	case p == nil:
		return unknownCell
	case *p < 10:
		return strconv.FormatFloat(*p, 'f', 2, 64) + "ms"
	case *p < 1000:
		return strconv.FormatFloat(*p, 'f', 0, 64) + "ms"
	}
	return strconv.FormatFloat(*p/1000, 'f', 1, 64) + "s"
}

// printCallsTable draws the table of rc's records in the columns cols, fitted to width (0: no
// limit), then the metrics line.
func printCallsTable(w io.Writer, rc *rolloutCalls, cols []callColumn, width int) error {
	names := make([]string, len(cols))
	right := make([]bool, len(cols))
	var shrinkable []int
	for i, c := range cols {
		names[i], right[i] = c.header, c.right
		if c.shrink {
			shrinkable = append(shrinkable, i)
		}
	}
	rows := callsRows(cols, rc.records)
	cutToolCalls(cols, rows, width)
	if err := renderTable(w, names, right, rows, width, shrinkable); err != nil {
		return err
	}
	m := modelcalls.AggregateRecords(rc.records)
	parts := []string{fmt.Sprintf("calls %d", m.NumCalls),
		fmt.Sprintf("tokens in %s out %s reasoning %s total %s", i64p(m.TokensIn), i64p(m.TokensOut), i64p(m.TokensReasoning), i64p(m.TokensTotal)),
		"cached " + i64p(m.CachedTokens), "latency total " + msp(m.LatencyTotalMS) + " ms"}
	if rc.total > len(rc.records) {
		parts = append(parts, fmt.Sprintf("(%d of %d calls match the filter)", len(rc.records), rc.total))
	}
	if len(rc.damages) > 0 {
		parts = append(parts, fmt.Sprintf("damaged lines %d", len(rc.damages)))
	}
	if rc.incomplete {
		parts = append(parts, "incomplete")
	}
	if rc.claims.Live > 0 {
		parts = append(parts, fmt.Sprintf("pending writes %d", rc.claims.Live))
	}
	for _, l := range wrapParts(parts, "  ", width) {
		fmt.Fprintln(w, l)
	}
	return nil
}

// layoutHint is the words of the line under a table whose layout was chosen by the terminal's
// width: which layout, and the headers of the full layout's columns it leaves out, so a person at
// 80 columns knows finish reasons and TTFT are there and how to ask for them. nil when none is
// left out. A header is one word, so lines break only between headers.
func layoutHint(layout string, width int) []string {
	shown := callsLayouts[layout]
	covers := func(k string) bool { // the compact layout's merged columns stand for the full ones
		switch k {
		case "tokens_in", "tokens_out":
			return slices.Contains(shown, "tokens_in_out")
		case "latency_total_ms":
			return slices.Contains(shown, "latency")
		case "tool_calls":
			return slices.Contains(shown, "tool_count")
		}
		return false
	}
	var hidden []string
	for _, k := range callsLayouts["full"] {
		if !slices.Contains(shown, k) && !covers(k) {
			i := slices.IndexFunc(callColumns, func(c callColumn) bool { return c.key == k })
			hidden = append(hidden, callColumns[i].header+",")
		}
	}
	if len(hidden) == 0 {
		return nil
	}
	hidden[len(hidden)-1] = strings.TrimSuffix(hidden[len(hidden)-1], ",")
	words := append([]string{fmt.Sprintf("%s layout for %d columns; not shown:", layout, width)}, hidden...)
	return append(words, "(--columns full shows every column)")
}

// newTable returns a table with the given header; right[i] right-aligns column i.
func newTable(w io.Writer, header []string, right []bool) *tablewriter.Table {
	align := make([]tw.Align, len(right))
	for i, r := range right {
		align[i] = tw.AlignLeft
		if r {
			align[i] = tw.AlignRight
		}
	}
	t := tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: align}),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
	)
	hdr := make([]any, len(header))
	for i, h := range header {
		hdr[i] = h
	}
	t.Header(hdr...)
	return t
}

// Cell formatting: "-" stands for unknown (null).
const unknownCell = "-"

func str(p *string) string {
	if p == nil {
		return unknownCell
	}
	return *p
}

func intp(p *int) string {
	if p == nil {
		return unknownCell
	}
	return strconv.Itoa(*p)
}

func i64p(p *int64) string {
	if p == nil {
		return unknownCell
	}
	return strconv.FormatInt(*p, 10)
}

// msp formats milliseconds with two decimals (the capture rounds to 0.01 ms).
func msp(p *float64) string {
	if p == nil {
		return unknownCell
	}
	return strconv.FormatFloat(*p, 'f', 2, 64)
}

// cachedCell shows cached_tokens, with "+<n> written" for Anthropic cache creation.
func cachedCell(r *modelcalls.ModelCallRecord) string {
	c := i64p(r.CachedTokens)
	if r.CacheCreationTokens != nil && *r.CacheCreationTokens > 0 {
		c += " +" + strconv.FormatInt(*r.CacheCreationTokens, 10) + " written"
	}
	return c
}

// toolCallsCell shows the tool-call count and names, e.g. "2: get_weather, search".
func toolCallsCell(calls []modelcalls.ToolCall) string {
	if len(calls) == 0 {
		return ""
	}
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = str(c.Name)
	}
	s := strconv.Itoa(len(calls)) + ": " + strings.Join(names, ", ")
	const maxLen = 40
	if len(s) > maxLen {
		s = s[:maxLen-3] + "..."
	}
	return s
}

// errorCell shows error_category, empty when the call has none.
func errorCell(r *modelcalls.ModelCallRecord) string {
	if r.ErrorCategory == nil {
		return ""
	}
	return *r.ErrorCategory
}

// sourceCell shows who answered (response_source): "upstream", or "local: <local_response_reason>"
// when the gateway (or a replay) answered itself. It has a column of its own: a local answer is
// not an error (a replayed run's calls are all local, status 200), and the error column shows
// error_category only.
func sourceCell(r *modelcalls.ModelCallRecord) string {
	if r.ResponseSource == nil {
		return unknownCell
	}
	if *r.ResponseSource == "local" && r.LocalResponseReason != nil {
		return "local: " + *r.LocalResponseReason
	}
	return *r.ResponseSource
}

// callsTSVHeader names the TSV columns of `modelcalls calls` by their record fields.
var callsTSVHeader = []string{
	"call_index", "model_call_id", "dialect", "model", "status_code", "finish_reason", "response_status",
	"tokens_in", "tokens_out", "tokens_reasoning", "tokens_total", "cached_tokens", "cache_creation_tokens",
	"latency_total_ms", "latency_ttft_ms", "tool_calls", "error_category", "response_source", "local_response_reason",
}

// writeCallsTSV writes one line per record, fields as in callsTSVHeader; tool_calls is the
// comma-separated tool names; unknown values are empty.
func writeCallsTSV(w io.Writer, records []modelcalls.ModelCallRecord) {
	rows := make([][]string, len(records))
	for i := range records {
		r := &records[i]
		names := make([]string, len(r.ToolCalls))
		for j, c := range r.ToolCalls {
			names[j] = tsvStr(c.Name)
		}
		rows[i] = []string{
			strconv.Itoa(r.CallIndex), tsvStr(r.ModelCallID), tsvStr(r.Dialect), tsvStr(r.Model), tsvInt(r.StatusCode),
			tsvStr(r.FinishReason), tsvStr(r.ResponseStatus),
			tsvInt64(r.TokensIn), tsvInt64(r.TokensOut), tsvInt64(r.TokensReasoning), tsvInt64(r.TokensTotal),
			tsvInt64(r.CachedTokens), tsvInt64(r.CacheCreationTokens),
			tsvFloat(r.LatencyTotalMS), tsvFloat(r.LatencyTTFTMS), strings.Join(names, ","),
			tsvStr(r.ErrorCategory), tsvStr(r.ResponseSource), tsvStr(r.LocalResponseReason),
		}
	}
	writeTSV(w, callsTSVHeader, rows)
}
