package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/stats"
)

func init() { register(newStatsCmd) }

func newStatsCmd(s *Streams) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats DIR [--json]",
		Short: "Run-wide statistics over every rollout capture in a capture dir",
		Long: `Read every <rollout_id>.capture.jsonl in DIR and summarise the run: rollouts, calls, errors by
category, token sums (in, out, reasoning, total; unknown counts are left out, and a sum no call knows
is shown as "-" / null), prompt-cache hit rate (calls with cache_hit true / calls whose cache_hit is
known) and cached tokens, latency and time-to-first-token percentiles, overall and per model, and the
number of damaged capture lines.

Percentiles are nearest-rank: the p-th percentile of n sorted samples is the sample at rank
ceil(p/100 * n), always a value that was observed. Latency is latency_total_ms, TTFT is
latency_ttft_ms, both in milliseconds.

A table by default; with --json, one JSON object. Exit code 3 when DIR does not exist; 1 when a
capture file could not be read at all (reported on stderr, the rest still counted).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStats(cmd.Context(), s, args[0], asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of tables")
	return cmd
}

// rolloutStats is what one capture file contributes to the run-wide statistics.
type rolloutStats struct {
	id         string
	calls      []stats.Call
	damaged    int
	incomplete bool
	err        error
}

// statsCall keeps the fields statistics need from a record (not its payloads).
func statsCall(r *modelcalls.ModelCallRecord) stats.Call {
	return stats.Call{
		Model:               r.Model,
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
	}
}

func readRolloutStats(store *capture.Store, id string) rolloutStats {
	rs := rolloutStats{id: id}
	_, marker, err := store.Stat(id)
	if err != nil {
		rs.err = err
		return rs
	}
	rs.incomplete = marker
	records, damaged, err := modelcalls.ReadAvailableRecords(store, id)
	if err != nil {
		rs.err = err
		return rs
	}
	rs.damaged = damaged
	rs.calls = make([]stats.Call, len(records))
	for i := range records {
		rs.calls[i] = statsCall(&records[i])
	}
	return rs
}

// computeStats reads every rollout of the capture dir (several at once) and accumulates them in id
// order. Rollouts that could not be read are reported to errOut and counted in failed.
func computeStats(ctx context.Context, dir string, errOut io.Writer) (report stats.Report, failed int, err error) {
	store, err := capture.OpenExisting(dir)
	if err != nil {
		return report, 0, withExit(ExitNotFound, err)
	}
	ids, err := store.Rollouts()
	if err != nil {
		return report, 0, withExit(ExitFailure, err)
	}
	var acc stats.Accumulator
	i := 0
	next := func() (string, int64, bool, error) {
		if i == len(ids) {
			return "", 0, false, nil
		}
		i++
		return ids[i-1], 1, true, nil
	}
	workers := max(2, runtime.GOMAXPROCS(0))
	lim := pipelineLimits{workers: workers, maxItems: 4 * workers, maxBytes: int64(4 * workers)}
	err = runOrdered(ctx, lim, next,
		func(_ context.Context, id string) rolloutStats { return readRolloutStats(store, id) },
		func(rs rolloutStats) error {
			if rs.err != nil {
				failed++
				fmt.Fprintf(errOut, "modelcalls stats: rollout %s not counted: %v\n", rs.id, rs.err)
				return nil
			}
			acc.AddRollout(rs.incomplete, rs.damaged)
			for _, c := range rs.calls {
				acc.Add(c)
			}
			return nil
		})
	if err != nil {
		return report, failed, withExit(ExitFailure, err)
	}
	return acc.Report(), failed, nil
}

func runStats(ctx context.Context, s *Streams, dir string, asJSON bool) error {
	if err := checkDir(dir); err != nil {
		return err
	}
	report, failed, err := computeStats(ctx, dir, s.ErrOut)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(s.Out)
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return withExit(ExitFailure, fmt.Errorf("encode stats: %w", err))
		}
	} else if err := printStatsTables(w, &report); err != nil {
		return withExit(ExitFailure, err)
	}
	if err := w.Flush(); err != nil {
		return withExit(ExitFailure, fmt.Errorf("write output: %w", err))
	}
	if failed > 0 {
		return silentExit{code: ExitFailure}
	}
	return nil
}

func printStatsTables(w io.Writer, r *stats.Report) error {
	overview := newTable(w, []string{"run", "value"}, []bool{false, false})
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
	}
	for _, row := range rows {
		if err := overview.Append(row); err != nil {
			return fmt.Errorf("table: %w", err)
		}
	}
	if err := overview.Render(); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	if len(r.Models) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	models := newTable(w,
		[]string{"model", "calls", "errors", "in", "out", "reasoning", "total", "cache hit", "p50 ms", "p90 ms", "p99 ms", "ttft p50 ms"},
		[]bool{false, true, true, true, true, true, true, true, true, true, true, true})
	for _, m := range r.Models {
		name := "(unknown)"
		if m.Model != nil {
			name = *m.Model
		}
		row := []string{name, strconv.Itoa(m.Calls), strconv.Itoa(m.Errors),
			i64p(m.Tokens.In), i64p(m.Tokens.Out), i64p(m.Tokens.Reasoning), i64p(m.Tokens.Total),
			rateCell(m.Cache.HitRate), msp(m.LatencyMS.P50), msp(m.LatencyMS.P90), msp(m.LatencyMS.P99), msp(m.TTFTMS.P50)}
		if err := models.Append(row); err != nil {
			return fmt.Errorf("table: %w", err)
		}
	}
	if err := models.Render(); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	return nil
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
