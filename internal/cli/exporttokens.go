package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/modelcalls/modelcalls/tokens"
	"github.com/modelcalls/modelcalls/tokens/tokenexport"
)

// exportTokensOptions are the flags of `modelcalls export tokens`.
type exportTokensOptions struct {
	captureDir string
	in         string
	out        string
	format     string
}

func newExportTokensCmd(s *Streams) *cobra.Command {
	var o exportTokensOptions
	cmd := &cobra.Command{
		Use:   "tokens --capture-dir DIR [--in ROLLOUTS.jsonl] --out PATH [--format jsonl|parquet|gym]",
		Short: "Write each captured call's prompt ids, generated ids and logprobs as training rows",
		Long: `Write one row per captured call of DIR (or of the rollouts listed in --in): rollout_id,
model_call_id, call_index, model, dialect, prompt_token_ids, generation_token_ids,
generation_log_probs, token_source, prompt_token_source, findings, and the rollout record's reward
when --in is given. The ids and logprobs are read from the captured bodies in the shapes vLLM,
SGLang and llama-server return them (docs/tokens.md); a call whose bodies carry none has null
lists and token_source "absent".

--format jsonl (the default) writes one JSON object per line to PATH (- is stdout); --format
parquet (the default when PATH ends in .parquet) writes one Parquet file whose id and logprob
columns are Parquet lists. --format gym writes NeMo Gym's token record, schema_version 1, to
PATH/<rollout_id>.tokens.jsonl, one file per rollout and one line per call that has prompt ids,
generated ids and one logprob per generated id. Files go into place only once every rollout is
read; an exported rollout without such calls loses the file an earlier export wrote for it; files
no export wrote (not listed in PATH/.modelcalls-tokens-export.json) are never overwritten or
removed.

Exits 1 when a listed rollout has no capture file, when any exported call has no prompt or no
generated ids, or when --in lines were skipped; 3 when DIR does not exist.`,
		Example: `  modelcalls export tokens --capture-dir ./captures --out tokens.jsonl
  modelcalls export tokens --capture-dir ./captures --in rollouts.jsonl --out tokens.parquet
  modelcalls export tokens --capture-dir ./captures --format gym --out ./gym-tokens`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runExportTokens(cmd.Context(), s, &o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.captureDir, "capture-dir", "", "capture directory (required)")
	f.StringVar(&o.in, "in", "", "JSONL rollout records: export only their rollouts, with their reward (- is stdin)")
	f.StringVar(&o.out, "out", "", "output file (jsonl, parquet) or directory (gym); required")
	f.StringVar(&o.format, "format", "", "jsonl, parquet or gym (default: parquet when --out ends in .parquet, else jsonl)")
	return cmd
}

// exportTokensSummary counts what an export wrote.
type exportTokensSummary struct {
	rollouts, missing, calls, complete, noTokens, damaged, gymSkipped, gymRemoved int
	findings                                                                      map[string]int
}

func runExportTokens(ctx context.Context, s *Streams, o *exportTokensOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.captureDir == "" {
		return usageErrorf("--capture-dir is required")
	}
	if o.out == "" {
		return usageErrorf("--out is required")
	}
	format := o.format
	if format == "" {
		format = "jsonl"
		if strings.HasSuffix(strings.ToLower(o.out), ".parquet") {
			format = "parquet"
		}
	}
	switch format {
	case "jsonl", "parquet", "gym":
	default:
		return usageErrorf("--format: want jsonl, parquet or gym, got %q", format)
	}
	if format != "jsonl" && o.out == "-" {
		return usageErrorf("--out -: only --format jsonl can go to stdout")
	}
	store, rollouts, skippedLines, err := openExportRollouts(s, o.captureDir, o.in)
	if err != nil {
		return err
	}

	var sink rowSink
	switch format {
	case "gym":
		sink, err = newGymSink(o.out, o.captureDir, o.in == "")
	default:
		sink, err = newFileSink(s, o.out, format)
	}
	if err != nil {
		return err
	}
	defer sink.abort()

	var bar *progressbar.ProgressBar
	if isTerminal(s.ErrOut) {
		bar = progressbar.NewOptions(len(rollouts), progressbar.OptionSetWriter(s.ErrOut),
			progressbar.OptionSetDescription("exporting tokens"), progressbar.OptionShowCount(),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))
	}
	sum := exportTokensSummary{findings: map[string]int{}}
	for _, r := range rollouts {
		if err := ctx.Err(); err != nil {
			return withExit(ExitFailure, err)
		}
		entries, damaged, err := store.ReadAvailable(r.id)
		if err != nil {
			return withExit(ExitFailure, fmt.Errorf("read rollout %s: %w", r.id, err))
		}
		sum.rollouts++
		sum.damaged += len(damaged)
		if entries == nil && len(damaged) == 0 {
			sum.missing++
			fmt.Fprintf(s.ErrOut, "modelcalls export: rollout %s has no captured calls\n", r.id)
		}
		for _, e := range entries {
			row, err := tokenexport.FromLine(r.id, e.Index, e.Data)
			if err != nil {
				return withExit(ExitFailure, fmt.Errorf("rollout %s line %d: %w", r.id, e.Line, err))
			}
			row.Reward = r.reward
			sum.calls++
			if row.Complete() {
				sum.complete++
			}
			if !row.HasTokenData() {
				sum.noTokens++
			}
			for _, f := range row.Findings {
				sum.findings[f.Code]++
			}
			wrote, err := sink.write(&row)
			if err != nil {
				return withExit(ExitFailure, err)
			}
			if !wrote {
				sum.gymSkipped++
			}
		}
		if err := sink.endRollout(r.id); err != nil {
			return withExit(ExitFailure, err)
		}
		if bar != nil {
			bar.Add(1)
		}
	}
	if bar != nil {
		bar.Finish()
	}
	if err := sink.commit(); err != nil {
		return withExit(ExitFailure, err)
	}
	if g, ok := sink.(*gymSink); ok {
		sum.gymRemoved = g.dir.Removed()
	}
	summaryTo := s.Out
	if o.out == "-" {
		summaryTo = s.ErrOut // the rows are on stdout
	}
	printExportTokensSummary(summaryTo, &sum, format, skippedLines)
	if sum.missing > 0 || sum.noTokens > 0 || skippedLines > 0 {
		return silentExit{code: ExitFailure}
	}
	return nil
}

func printExportTokensSummary(w io.Writer, sum *exportTokensSummary, format string, skippedLines int) {
	fmt.Fprintf(w, "exported %d calls of %d rollouts (%s): %d with prompt ids, generated ids and logprobs, %d without token ids",
		sum.calls, sum.rollouts, format, sum.complete, sum.noTokens)
	if format == "gym" {
		fmt.Fprintf(w, ", %d not written as Gym records", sum.gymSkipped)
		if sum.gymRemoved > 0 {
			fmt.Fprintf(w, ", %d stale Gym files of earlier exports removed", sum.gymRemoved)
		}
	}
	if sum.missing > 0 {
		fmt.Fprintf(w, "; %d rollouts without captures", sum.missing)
	}
	if sum.damaged > 0 {
		fmt.Fprintf(w, "; %d damaged lines skipped", sum.damaged)
	}
	if skippedLines > 0 {
		fmt.Fprintf(w, "; %d --in lines skipped", skippedLines)
	}
	fmt.Fprintln(w)
	if sum.complete == 0 && sum.noTokens > 0 {
		fmt.Fprintln(w, "no call carries token ids: capture with modelcalls proxy (or run) --tokens vllm|sglang|llama-server, which asks the engine for them on Chat and Completions calls")
	}
	if len(sum.findings) > 0 {
		codes := make([]string, 0, len(sum.findings))
		for c := range sum.findings {
			codes = append(codes, c)
		}
		sort.Strings(codes)
		parts := make([]string, len(codes))
		for i, c := range codes {
			parts[i] = fmt.Sprintf("%s %d", c, sum.findings[c])
		}
		fmt.Fprintf(w, "findings: %s\n", strings.Join(parts, ", "))
	}
}

// rowSink is where an export's rows go.
type rowSink interface {
	// write writes one row; false when the format leaves the row out.
	write(r *tokenexport.Row) (bool, error)
	endRollout(id string) error
	commit() error
	abort()
}

// fileSink writes every row to one file (or stdout), replaced on commit.
type fileSink struct {
	out *output
	w   tokenexport.Writer
}

func newFileSink(s *Streams, name, format string) (*fileSink, error) {
	out, err := openOutput(s, name)
	if err != nil {
		return nil, err
	}
	fs := &fileSink{out: out}
	if format == "parquet" {
		fs.w = tokenexport.NewParquetWriter(out.w)
	} else {
		fs.w = tokenexport.NewJSONLWriter(out.w)
	}
	return fs, nil
}

func (f *fileSink) write(r *tokenexport.Row) (bool, error) {
	if err := f.w.Write(r); err != nil {
		return false, fmt.Errorf("write --out: %w", err)
	}
	return true, nil
}
func (f *fileSink) endRollout(string) error { return nil }
func (f *fileSink) commit() error {
	if err := f.w.Close(); err != nil {
		return fmt.Errorf("write --out: %w", err)
	}
	return f.out.commit()
}
func (f *fileSink) abort() { f.out.abort() }

// addTokensFlag adds --tokens ENGINE, which makes the gateway ask that engine for token ids and
// logprobs (gateway.Handler.Tokens); prefix starts its help text.
func addTokensFlag(f *pflag.FlagSet, v *string, prefix string) {
	names := make([]string, len(tokens.Engines))
	for i, e := range tokens.Engines {
		names[i] = string(e)
	}
	f.StringVar(v, "tokens", "", prefix+"ask the engine ("+strings.Join(names, ", ")+") for token ids and logprobs on captured Chat and Completions calls; the line records what was added (default: nothing added)")
}
