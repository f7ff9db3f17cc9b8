package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/mattn/go-runewidth"
	"github.com/spf13/cobra"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/ordered"
	"github.com/modelcalls/modelcalls/internal/stats"
)

// statsOptions are the flags of `modelcalls stats`.
type statsOptions struct {
	reportOptions
	by string
}

func newStatsCmd(s *Streams) *cobra.Command {
	var o statsOptions
	cmd := &cobra.Command{
		Use:   "stats --capture-dir DIR [--by model|rollout|dialect] [--format table|tsv|json] [--model M] [--status S] [--error E]",
		Short: "Run-wide statistics over every rollout capture in a capture dir",
		Long: `Read every <rollout_id>.capture.jsonl in DIR and summarise the run: rollouts, calls, errors by
category, token sums (in, out, reasoning, total; unknown counts are left out, and a sum no call knows
is shown as "-" / null), prompt-cache hit rate (calls with cache_hit true / calls whose cache_hit is
known) and cached tokens, latency and time-to-first-token percentiles, overall and per group: per
model by default, per rollout or per dialect with --by.

Percentiles are nearest-rank: the p-th percentile of n sorted samples is the sample at rank
ceil(p/100 * n), always a value that was observed. Latency is latency_total_ms, TTFT is
latency_ttft_ms, both in milliseconds. Every output rounds the same way: milliseconds (min, mean,
percentiles, max) to 2 decimals, the hit rate to 4 (the table shows it as a percentage with 1).

Output: tables when stdout is a terminal (cut to its width); tab-separated values when it is not,
one line per group after a first line "(all)" for the whole run; with --format json (or --json),
one JSON object. --model, --status and --error keep only the matching calls (an empty value is a
usage error, exit 2; a --model value no call in DIR has is said on stderr; the rollout and
damaged-line counts stay those of the whole dir); --error takes any, none, a known error category
or one some call in DIR has, as modelcalls calls does (anything else: exit 2, listing them). The capture dir may also be given as the only
argument (modelcalls stats DIR).

When some rollout has damaged capture lines or is marked incomplete, a one-line note on stderr
names them, in every format (the TSV has no column for it).

--capture-dir may be repeated: the statistics then cover the rollouts of every dir, each counted
once, from the first dir that holds it, as merge reads it (stderr names the rollouts held by
several dirs).

Exit code 3 when DIR does not exist; 1 when a capture file could not be read at all (reported on
stderr, the rest still counted).`,
		Example: `  modelcalls stats --capture-dir ./captures
  modelcalls stats --capture-dir ./captures --by rollout --error any    # which rollouts fail
  modelcalls stats --capture-dir ./captures --by dialect --format json
  modelcalls stats --capture-dir ./captures --model gpt-4.1 --status 2xx
  modelcalls stats ./captures                                          # the positional form`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dirs, _, err := captureDirArgs("stats", o.captureDirs, args)
			if err != nil {
				return err
			}
			return runStats(cmd.Context(), s, &o, dirs)
		},
	}
	f := cmd.Flags()
	o.addFlags(f, "capture directory (or give it as the argument); repeat to combine several: each rollout counted once, from the first dir that holds it, as in merge",
		"same as --format json: one JSON object")
	f.StringVar(&o.by, "by", stats.ByModel, "group the calls by model, rollout or dialect")
	return cmd
}

// rolloutStats is what one capture file contributes to the run-wide statistics.
type rolloutStats struct {
	id         string
	calls      []stats.Call
	damaged    int
	incomplete bool
	models     map[string]bool // of every call read, before the filter (nil without --model)
	err        error
}

// statsCall keeps the fields statistics need from a record (not its payloads).
func statsCall(id string, r *modelcalls.ModelCallRecord) stats.Call {
	return stats.Call{
		Rollout:             id,
		Model:               r.Model,
		Dialect:             r.Dialect,
		ErrorCategory:       r.ErrorCategory,
		TokensIn:            r.TokensIn,
		TokensOut:           r.TokensOut,
		TokensReasoning:     r.TokensReasoning,
		TokensTotal:         r.TokensTotal,
		CacheHit:            r.CacheHit,
		CachedTokens:        r.CachedTokens,
		CacheCreationTokens: r.CacheCreationTokens,
		LatencyMS:           r.LatencyTotalMS,
		TTFTMS:              r.LatencyTTFTMS,
		StartedAt:           r.StartedAt,
		CompletedAt:         r.CompletedAt,
	}
}

func readRolloutStats(store *capture.Store, id string, filter *callFilter) rolloutStats {
	rs := rolloutStats{id: id}
	records, damaged, incomplete, err := readRollout(store, id)
	rs.incomplete = incomplete
	if err != nil {
		rs.err = err
		return rs
	}
	rs.damaged = damaged
	if len(filter.models) > 0 {
		rs.models = map[string]bool{}
		noteModels(rs.models, records)
	}
	records = filter.apply(records)
	rs.calls = make([]stats.Call, len(records))
	for i := range records {
		rs.calls[i] = statsCall(id, &records[i])
	}
	return rs
}

// statsDamage names the rollouts with damaged lines and the incomplete ones, in id order, for the
// note on stderr.
type statsDamage struct {
	damaged    []string // "<id> (<n> lines)"
	incomplete []string
	models     map[string]bool // the models of the dir's calls, before the filter (with --model)
	shadowed   []string        // rollouts also held by a later dir, not read there: "<id> (in <dir>, read from <dir>)"
}

// maxNamedRollouts is how many rollouts the damage note names before it says "and N more".
const maxNamedRollouts = 5

// note returns the stderr line about damage ("" when there is none). It is printed for every
// format: the TSV has no column for it, and the table and JSON counts are easy to miss.
func (d *statsDamage) note() string {
	if len(d.damaged) == 0 && len(d.incomplete) == 0 {
		return ""
	}
	names := func(ids []string) string {
		if len(ids) > maxNamedRollouts {
			return strings.Join(ids[:maxNamedRollouts], ", ") + fmt.Sprintf(" and %d more", len(ids)-maxNamedRollouts)
		}
		return strings.Join(ids, ", ")
	}
	var parts []string
	if n := len(d.damaged); n > 0 {
		parts = append(parts, fmt.Sprintf("%s damaged capture lines, skipped: %s",
			plural(n, "rollout has", "rollouts have"), names(d.damaged)))
	}
	if n := len(d.incomplete); n > 0 {
		parts = append(parts, fmt.Sprintf("%s marked incomplete (a capture write failed, calls may be missing): %s",
			plural(n, "rollout is", "rollouts are"), names(d.incomplete)))
	}
	return "modelcalls stats: " + strings.Join(parts, "; ") + " (modelcalls calls DIR ROLLOUT_ID names the lines)"
}

// computeStats reads every rollout of the capture dirs (several at once) and accumulates them in
// id order. A rollout held by several dirs is read from the first that holds it, as merge reads it,
// and the others are listed in damage.shadowed. Rollouts that could not be read are reported to
// errOut and counted in failed.
func computeStats(ctx context.Context, dirs []string, o *statsOptions, errOut io.Writer) (report stats.Report, damage statsDamage, failed int, err error) {
	from := map[string]*capture.Store{} // rollout id -> the store it is read from
	var ids []string
	for _, dir := range dirs {
		store, err := openCaptureDir(dir)
		if err != nil {
			return report, damage, 0, err
		}
		dirIDs, err := store.Rollouts()
		if err != nil {
			return report, damage, 0, withExit(ExitFailure, err)
		}
		for _, id := range dirIDs {
			if first, ok := from[id]; ok {
				damage.shadowed = append(damage.shadowed, fmt.Sprintf("%s (in %s, read from %s)", id, dir, first.Dir()))
				continue
			}
			from[id] = store
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	acc := stats.Accumulator{By: o.by}
	workers := max(2, runtime.GOMAXPROCS(0))
	err = ordered.Each(ctx, workers, ids,
		func(_ context.Context, id string) rolloutStats { return readRolloutStats(from[id], id, &o.filter) },
		func(rs rolloutStats) error {
			if rs.err != nil {
				failed++
				fmt.Fprintf(errOut, "modelcalls stats: rollout %s not counted: %v\n", rs.id, rs.err)
				return nil
			}
			acc.AddRollout(rs.incomplete, rs.damaged)
			for m := range rs.models {
				if damage.models == nil {
					damage.models = map[string]bool{}
				}
				damage.models[m] = true
			}
			if rs.damaged > 0 {
				damage.damaged = append(damage.damaged, fmt.Sprintf("%s (%s)", rs.id, plural(rs.damaged, "line", "lines")))
			}
			if rs.incomplete {
				damage.incomplete = append(damage.incomplete, rs.id)
			}
			for _, c := range rs.calls {
				acc.Add(c)
			}
			return nil
		})
	if err != nil {
		return report, damage, failed, withExit(ExitFailure, err)
	}
	return acc.Report(), damage, failed, nil
}

func runStats(ctx context.Context, s *Streams, o *statsOptions, dirs []string) error {
	format, err := resolveFormat(o.format, o.json, s.Out)
	if err != nil {
		return err
	}
	switch o.by {
	case stats.ByModel, stats.ByRollout, stats.ByDialect:
	default:
		return usageErrorf("--by %q: want model, rollout or dialect", o.by)
	}
	if err := o.filter.check(); err != nil {
		return err
	}
	if err := checkCaptureDirs(dirs); err != nil {
		return err
	}
	if err := o.filter.checkErrorValues(dirs, nil); err != nil {
		return err
	}
	report, damage, failed, err := computeStats(ctx, dirs, o, s.ErrOut)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(s.Out)
	switch format {
	case formatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report.Rounded()); err != nil { // ms to 0.01, ratios to 4 decimals, as the TSV
			return withExit(ExitFailure, fmt.Errorf("encode stats: %w", err))
		}
	case formatTSV:
		writeStatsTSV(w, &report, o.by)
	default:
		if err := printStatsTables(w, &report, o.by, outputWidth(s.Out)); err != nil {
			return withExit(ExitFailure, err)
		}
	}
	if err := w.Flush(); err != nil {
		return withExit(ExitFailure, fmt.Errorf("write output: %w", err))
	}
	if len(o.filter.models) > 0 {
		dir := strings.Join(dirs, ", ")
		if n := o.filter.unmatchedModelsNote("in "+dir, "the models in "+dir, damage.models); n != "" {
			fmt.Fprintf(s.ErrOut, "modelcalls stats: %s\n", n)
		}
	}
	if n := len(damage.shadowed); n > 0 {
		names := damage.shadowed
		more := ""
		if n > maxNamedRollouts {
			names, more = names[:maxNamedRollouts], fmt.Sprintf(" and %d more", n-maxNamedRollouts)
		}
		fmt.Fprintf(s.ErrOut, "modelcalls stats: %s in more than one capture dir, counted once, from the first --capture-dir that holds it (as merge reads it): %s%s\n",
			plural(n, "rollout is", "rollouts are"), strings.Join(names, ", "), more)
	}
	if n := damage.note(); n != "" {
		fmt.Fprintln(s.ErrOut, n)
	}
	if failed > 0 {
		return silentExit{code: ExitFailure}
	}
	return nil
}

// statsGroup is one row of the per-group table: its name and summary.
type statsGroup struct {
	name string
	s    *stats.Summary
}

// statsGroups returns the groups of r for by: Models, or Groups for rollout and dialect.
func statsGroups(r *stats.Report, by string) []statsGroup {
	var out []statsGroup
	name := func(k *string) string {
		if k == nil {
			return "(unknown)"
		}
		return *k
	}
	if by == stats.ByRollout || by == stats.ByDialect {
		for i := range r.Groups {
			out = append(out, statsGroup{name(r.Groups[i].Key), &r.Groups[i].Summary})
		}
		return out
	}
	for i := range r.Models {
		out = append(out, statsGroup{name(r.Models[i].Model), &r.Models[i].Summary})
	}
	return out
}

// statsTSVHeader names the TSV columns of `modelcalls stats`; the first is the --by key.
var statsTSVHeader = []string{"calls", "errors", "tokens_in", "tokens_out", "tokens_reasoning", "tokens_total",
	"calls_with_usage", "cache_hit_rate", "cached_tokens", "cache_creation_tokens",
	"latency_ms_p50", "latency_ms_p90", "latency_ms_p99", "latency_ms_max", "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99", "ttft_ms_max",
	"elapsed_ms", "latency_sum_ms", "tokens_out_per_second"}

// writeStatsTSV writes the run as a first line "(all)", then one line per group.
func writeStatsTSV(w io.Writer, r *stats.Report, by string) {
	row := func(name string, s *stats.Summary) []string {
		rate := ""
		if s.Cache.HitRate != nil {
			rate = strconv.FormatFloat(*s.Cache.HitRate, 'f', 4, 64)
		}
		return []string{name, strconv.Itoa(s.Calls), strconv.Itoa(s.Errors),
			tsvInt64(s.Tokens.In), tsvInt64(s.Tokens.Out), tsvInt64(s.Tokens.Reasoning), tsvInt64(s.Tokens.Total),
			strconv.Itoa(s.Tokens.CallsWithUsage), rate, tsvInt64(s.Cache.CachedTokens), tsvInt64(s.Cache.CacheCreationTokens),
			tsvFloat(s.LatencyMS.P50), tsvFloat(s.LatencyMS.P90), tsvFloat(s.LatencyMS.P99), tsvFloat(s.LatencyMS.Max),
			tsvFloat(s.TTFTMS.P50), tsvFloat(s.TTFTMS.P90), tsvFloat(s.TTFTMS.P99), tsvFloat(s.TTFTMS.Max),
			tsvFloat(s.ElapsedMS), tsvFloat(s.LatencySumMS), tsvRate(s.TokensOutPerSecond)}
	}
	rows := [][]string{row("(all)", &r.Summary)}
	for _, g := range statsGroups(r, by) {
		rows = append(rows, row(g.name, g.s))
	}
	writeTSV(w, append([]string{by}, statsTSVHeader...), rows)
}

func printStatsTables(w io.Writer, r *stats.Report, by string, width int) error {
	rows := [][]string{
		{"rollouts", fmt.Sprintf("%d (%d incomplete, %d with damaged lines)", r.Rollouts, r.IncompleteRollouts, r.RolloutsWithDamage)},
		{"calls", strconv.Itoa(r.Calls)},
		{"damaged lines", strconv.Itoa(r.DamagedLines)},
		{"errors", errorsCell(&r.Summary)},
		{"tokens in / out / reasoning / total", fmt.Sprintf("%s / %s / %s / %s (%d calls with usage)",
			i64p(r.Tokens.In), i64p(r.Tokens.Out), i64p(r.Tokens.Reasoning), i64p(r.Tokens.Total), r.Tokens.CallsWithUsage)},
		{"cache hit rate", cacheCell(&r.Cache)},
		{"cached / cache-write tokens", i64p(r.Cache.CachedTokens) + " / " + i64p(r.Cache.CacheCreationTokens)},
		{"latency ms p50 / p90 / p99 / max", distCell(&r.LatencyMS)},
		{"ttft ms p50 / p90 / p99 / max", distCell(&r.TTFTMS)},
		{"elapsed / summed latency", secondsPair(r.ElapsedMS, r.LatencySumMS)},
		{"output tokens per second", rateOf(r.TokensOutPerSecond) + " (of the elapsed time)"},
	}
	if err := renderTable(w, []string{"run", "value"}, []bool{false, false}, rows, wrapValues(rows, width), []int{0, 1}); err != nil {
		return err
	}
	groups := statsGroups(r, by)
	if len(groups) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	cols := statsColumnsFor(groups, by, width)
	header := make([]string, len(cols))
	right := make([]bool, len(cols))
	for i, c := range cols {
		header[i], right[i] = c.header, c.right
	}
	if err := renderTable(w, header, right, statsRows(cols, groups), width, []int{0}); err != nil {
		return err
	}
	if len(cols)-1 < len(statsColumns) {
		var hidden []string
		for _, c := range statsColumns {
			if !slices.ContainsFunc(cols, func(k statsColumn) bool { return k.header == c.header }) {
				hidden = append(hidden, c.header+",")
			}
		}
		hidden[len(hidden)-1] = strings.TrimSuffix(hidden[len(hidden)-1], ",")
		words := append([]string{fmt.Sprintf("%d columns; not shown:", width)}, hidden...)
		for _, l := range wrapParts(append(words, "(--format tsv or json carries every figure)"), " ", width) {
			fmt.Fprintln(w, l)
		}
	}
	return nil
}

// wrapValues breaks each value (rows' second cell) too wide for width into lines between its
// words, so that the run table keeps every figure and note instead of cutting them with "…", and
// returns the width left to fit the table to: 0 once every line fits, width when it cannot be
// done (the labels leave fewer than minValueWidth columns, or one word is too wide) and the values
// are left whole, to be cut.
func wrapValues(rows [][]string, width int) int {
	if width <= 0 {
		return width
	}
	label := 0
	for _, r := range rows {
		label = max(label, runewidth.StringWidth(r[0]))
	}
	room := width - label - 7 // borders and padding of two columns
	if room < minValueWidth {
		return width
	}
	wrapped := make([]string, len(rows))
	for i, r := range rows {
		lines := wrapParts(strings.Fields(r[1]), " ", room)
		for _, l := range lines {
			if runewidth.StringWidth(l) > room {
				return width
			}
		}
		wrapped[i] = strings.Join(lines, "\n")
	}
	for i := range rows {
		rows[i][1] = wrapped[i]
	}
	return 0
}

// minValueWidth is the narrowest value column wrapValues wraps to.
const minValueWidth = 20

// statsColumn is one column of the per-group stats table.
type statsColumn struct {
	header string
	right  bool
	narrow bool // in the narrowest set, kept at any width
	wide   bool // in the set for about 120 columns
	cell   func(m *stats.Summary) string
}

// statsColumns are the per-group table's columns after the group's name, in table order.
var statsColumns = []statsColumn{
	{"calls", true, true, true, func(m *stats.Summary) string { return strconv.Itoa(m.Calls) }},
	{"errors", true, true, true, func(m *stats.Summary) string { return strconv.Itoa(m.Errors) }},
	{"tok in", true, true, true, func(m *stats.Summary) string { return i64p(m.Tokens.In) }},
	{"tok out", true, true, true, func(m *stats.Summary) string { return i64p(m.Tokens.Out) }},
	{"reasoning tok", true, false, false, func(m *stats.Summary) string { return i64p(m.Tokens.Reasoning) }},
	{"total tok", true, false, false, func(m *stats.Summary) string { return i64p(m.Tokens.Total) }},
	{"cache hit", true, false, true, func(m *stats.Summary) string { return rateCell(m.Cache.HitRate) }},
	{"p50 ms", true, true, true, func(m *stats.Summary) string { return msp(m.LatencyMS.P50) }},
	{"p90 ms", true, false, false, func(m *stats.Summary) string { return msp(m.LatencyMS.P90) }},
	{"p99 ms", true, false, false, func(m *stats.Summary) string { return msp(m.LatencyMS.P99) }},
	{"ttft p50 ms", true, false, true, func(m *stats.Summary) string { return msp(m.TTFTMS.P50) }},
	{"elapsed s", true, false, true, func(m *stats.Summary) string { return secondsCell1(m.ElapsedMS) }},
	{"latency sum s", true, false, false, func(m *stats.Summary) string { return secondsCell1(m.LatencySumMS) }},
	{"out tok/s", true, true, true, func(m *stats.Summary) string { return rateOf(m.TokensOutPerSecond) }},
}

// statsColumnsFor is the group's name column and the widest set of statsColumns (every one, the
// wide set, the narrow set) that fits in width columns (0: no limit) with every header and figure
// whole and each group's name cut to no fewer than minGroupWidth characters; the narrow set, its
// names cut to fit, when none does.
func statsColumnsFor(groups []statsGroup, by string, width int) []statsColumn {
	name := statsColumn{header: by}
	sets := [][]statsColumn{statsColumns, nil, nil}
	for _, c := range statsColumns {
		if c.wide {
			sets[1] = append(sets[1], c)
		}
		if c.narrow {
			sets[2] = append(sets[2], c)
		}
	}
	for i, set := range sets {
		cols := append([]statsColumn{name}, set...)
		if width <= 0 || i == len(sets)-1 {
			return cols
		}
		header := make([]string, len(cols))
		for j, c := range cols {
			header[j] = c.header
		}
		rows := statsRows(cols, groups)
		for _, r := range rows {
			if runewidth.StringWidth(r[0]) > minGroupWidth {
				r[0] = runewidth.Truncate(r[0], minGroupWidth, "…")
			}
		}
		if tableWidth(header, rows) <= width {
			return cols
		}
	}
	return nil
}

// minGroupWidth is how far statsColumnsFor counts on cutting a group's name (a model name such as
// claude-sonnet-4-5-20250929 keeps claude-sonnet-4-5-20…) to show more figures.
const minGroupWidth = 20

// statsRows are the per-group table's cells: the group's name, then one per column.
func statsRows(cols []statsColumn, groups []statsGroup) [][]string {
	rows := make([][]string, len(groups))
	for i, g := range groups {
		row := []string{g.name}
		for _, c := range cols[1:] {
			row = append(row, c.cell(g.s))
		}
		rows[i] = row
	}
	return rows
}

// secondsCell1 shows milliseconds as seconds with two decimals; "-" when unknown.
func secondsCell1(ms *float64) string {
	if ms == nil {
		return unknownCell
	}
	return strconv.FormatFloat(*ms/1000, 'f', 2, 64)
}

// secondsPair shows an elapsed time and a summed latency in seconds: "12.30 s / 8.10 s".
func secondsPair(elapsed, sum *float64) string {
	return secondsCell1(elapsed) + " s / " + secondsCell1(sum) + " s"
}

// rateOf shows a rate per second with two decimals; "-" when unknown.
func rateOf(p *float64) string {
	if p == nil {
		return unknownCell
	}
	return strconv.FormatFloat(*p, 'f', 2, 64)
}

// tsvRate is rateOf for TSV: empty when unknown.
func tsvRate(p *float64) string {
	if p == nil {
		return ""
	}
	return rateOf(p)
}

// errorsCell: "5 (client_error 3, rate_limit 2)".
func errorsCell(s *stats.Summary) string {
	if s.Errors == 0 {
		return "0"
	}
	parts := make([]string, 0, len(s.ErrorsByCategory))
	for _, c := range s.Categories() {
		parts = append(parts, fmt.Sprintf("%s %d", c, s.ErrorsByCategory[c]))
	}
	return fmt.Sprintf("%d (%s)", s.Errors, strings.Join(parts, ", "))
}

func rateCell(p *float64) string {
	if p == nil {
		return unknownCell
	}
	return strconv.FormatFloat(*p*100, 'f', 1, 64) + "%"
}

func cacheCell(c *stats.Cache) string {
	return fmt.Sprintf("%s (%d of %d calls with a cache signal)", rateCell(c.HitRate), c.Hits, c.Known)
}

func distCell(d *stats.Distribution) string {
	if d.Count == 0 {
		return unknownCell + " (no samples)"
	}
	return fmt.Sprintf("%s / %s / %s / %s (%d calls)", msp(d.P50), msp(d.P90), msp(d.P99), msp(d.Max), d.Count)
}
