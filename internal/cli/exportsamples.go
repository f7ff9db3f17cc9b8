package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/modelcalls/modelcalls/lineage"
	"github.com/modelcalls/modelcalls/samples"
)

// samplesOptions are the flags of `modelcalls export samples`.
type samplesOptions struct {
	captureDir string
	in         string
	format     string
	out        string
	minReward  float64
	status     string
	paths      string
	summaries  string
}

func newExportSamplesCmd(s *Streams) *cobra.Command {
	var o samplesOptions
	cmd := &cobra.Command{
		Use:   "samples --capture-dir DIR [--in ROLLOUTS.jsonl] --format sft|tokens|transitions --out PATH [--min-reward R] [--status clean|any] [--paths main|all] [--summaries train|context]",
		Short: "Write training samples of captured rollouts: chat fine-tuning lines, token rows or one row per call",
		Long: `Derive each rollout's lineage (modelcalls lineage) and write training samples:

  sft          per rollout, its main chain in the OpenAI chat fine-tuning shape
               ({"messages", "tools"}); assistant turns the model wrote have weight 1, those the
               client wrote or edited weight 0; each generation is trained once. A chain that
               crosses a compaction is one line per segment (before, after). JSONL only.
               --paths all adds a line per other path (abandoned branch, resampled answer,
               side call), a generation already trained in an earlier line weighted 0 there.
  tokens       the main chain as token rows: input_ids, loss_mask (1 on generated ids),
               rollout_logprobs, the calls glued and their spans, the reward; a chain is split at a
               compaction, where the token-prefix audit fails or a call has no ids, with the
               reason on the row.
  transitions  one row per call: prompt and generated ids, logprobs, reward, relation, parent.

Rollouts come from --in (JSONL rollout records: their ids and "reward"), else every rollout of
DIR (no reward). --min-reward keeps only rollouts whose reward is at least R (a rollout without a
reward is then skipped). --summaries context makes a compaction summary (the answer of the request
that asked for it) context only: weight 0 in sft, loss mask 0 in tokens; by default it is trained
like any generation. --status clean (the default) skips rollouts whose capture has damaged lines
or the incomplete marker, or whose last call did not complete; --status any keeps them.

--out PATH is written as JSON Lines, or as Parquet when PATH ends in .parquet (tokens and
transitions; lists as Parquet LIST columns); "-" is stdout (JSONL). The file is replaced only when
complete. A summary goes to stderr; sft lines that break the fine-tuning rules are skipped and
named there. docs/lineage.md has the schemas. Token ids are read from each call as export tokens
reads them (docs/tokens.md: the engines' id fields, the line's token_capture); a call without them
has empty id lists, and the tokens rows of a chain skip it.`,
		Example: `  modelcalls export samples --capture-dir ./captures --in rollouts.jsonl --format sft --out sft.jsonl --min-reward 1
  modelcalls export samples --capture-dir ./captures --in rollouts.jsonl --format transitions --out calls.parquet`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runExportSamples(s, &o, cmd.Flags().Changed("min-reward"))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.captureDir, "capture-dir", "", "capture directory")
	f.StringVar(&o.in, "in", "", "JSONL rollout records (ids and reward); default: every rollout of DIR")
	f.StringVar(&o.format, "format", "", "sft, tokens or transitions")
	f.StringVar(&o.out, "out", "", "output file (.parquet for Parquet), or - for stdout")
	f.Float64Var(&o.minReward, "min-reward", 0, "keep only rollouts with a reward of at least this")
	f.StringVar(&o.paths, "paths", "main", "sft: main (the main chain) or all (also every other path: abandoned branches, resampled answers, side calls; each generation trained once)")
	f.StringVar(&o.summaries, "summaries", "train", "sft, tokens: train (a compaction summary is trained like any generation) or context (weight 0, loss mask 0)")
	f.StringVar(&o.status, "status", "clean", "clean: skip rollouts with damaged or incomplete captures or a failed last call; any: keep them")
	return cmd
}

func runExportSamples(s *Streams, o *samplesOptions, minReward bool) error {
	switch {
	case o.captureDir == "":
		return usageErrorf("--capture-dir is required")
	case o.format != "sft" && o.format != "tokens" && o.format != "transitions":
		return usageErrorf("--format %q: want sft, tokens or transitions", o.format)
	case o.out == "":
		return usageErrorf("--out is required (a file, or - for stdout)")
	case o.status != "clean" && o.status != "any":
		return usageErrorf("--status %q: want clean or any", o.status)
	case o.paths != "main" && o.paths != "all":
		return usageErrorf("--paths %q: want main or all", o.paths)
	case o.summaries != "train" && o.summaries != "context":
		return usageErrorf("--summaries %q: want train or context", o.summaries)
	case o.paths == "all" && o.format != "sft":
		return usageErrorf("--paths all is for --format sft")
	case minReward && math.IsNaN(o.minReward):
		return usageErrorf("--min-reward: want a number")
	}
	parquetOut := strings.HasSuffix(o.out, ".parquet")
	if parquetOut && o.format == "sft" {
		return usageErrorf("--format sft is JSON Lines only (the fine-tuning format); give --out a name not ending in .parquet")
	}
	store, rollouts, _, err := openExportRollouts(s, o.captureDir, o.in)
	if err != nil {
		return err
	}
	out, err := openOutput(s, o.out)
	if err != nil {
		return err
	}
	defer out.abort()
	var tokenPQ *samples.ParquetWriter[samples.TokenRow]
	var transPQ *samples.ParquetWriter[samples.Transition]
	if parquetOut {
		if o.format == "tokens" {
			tokenPQ = samples.NewParquetWriter[samples.TokenRow](out.w)
		} else {
			transPQ = samples.NewParquetWriter[samples.Transition](out.w)
		}
	}
	writeJSON := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		out.w.Write(b)
		return out.w.WriteByte('\n')
	}
	var bar *progressbar.ProgressBar
	if isTerminal(s.ErrOut) {
		bar = progressbar.NewOptions(len(rollouts), progressbar.OptionSetWriter(s.ErrOut),
			progressbar.OptionSetDescription("exporting"), progressbar.OptionShowCount(),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))
	}
	opt := samples.Options{ContextOnlySummaries: o.summaries == "context"}
	var written, exported, lowReward, noCalls, notClean, noChain, noIDs, invalid, unreadable int
	for _, r := range rollouts {
		if bar != nil {
			bar.Add(1)
		}
		if minReward && (r.reward == nil || *r.reward < o.minReward) {
			lowReward++
			continue
		}
		_, marker, err := store.Stat(r.id)
		if err != nil {
			unreadable++
			fmt.Fprintf(s.ErrOut, "modelcalls export: rollout %s not exported: %v\n", r.id, err)
			continue
		}
		calls, damaged, err := lineage.ReadCalls(store, r.id, samples.TokenIDs)
		if err != nil {
			unreadable++
			fmt.Fprintf(s.ErrOut, "modelcalls export: rollout %s not exported: %v\n", r.id, err)
			continue
		}
		if len(calls) == 0 {
			noCalls++
			continue
		}
		if o.status == "clean" && (damaged > 0 || marker || !calls[len(calls)-1].Completed) {
			notClean++
			continue
		}
		l := lineage.Derive(calls)
		if len(l.MainChain) == 0 {
			noChain++
			continue
		}
		switch o.format {
		case "sft":
			var lines []*samples.SFTLine
			if o.paths == "all" {
				lines, err = samples.SFTPaths(calls, l, opt)
			} else {
				lines, err = samples.SFT(calls, l, opt)
			}
			for i := 0; i < len(lines) && err == nil; i++ {
				err = samples.ValidateSFT(lines[i])
			}
			if err != nil {
				invalid++
				fmt.Fprintf(s.ErrOut, "modelcalls export: rollout %s: no sft line: %v\n", r.id, err)
				continue
			}
			for i := 0; i < len(lines) && err == nil; i++ {
				err = writeJSON(lines[i])
				written++
			}
		case "tokens":
			rows := samples.TokenRows(r.id, r.reward, calls, l, opt)
			if len(rows) == 0 {
				noIDs++
				continue
			}
			if tokenPQ != nil {
				err = tokenPQ.Write(rows)
			} else {
				for i := 0; i < len(rows) && err == nil; i++ {
					err = writeJSON(&rows[i])
				}
			}
			written += len(rows)
		case "transitions":
			rows := samples.Transitions(r.id, r.reward, calls, l)
			if transPQ != nil {
				err = transPQ.Write(rows)
			} else {
				for i := 0; i < len(rows) && err == nil; i++ {
					err = writeJSON(&rows[i])
				}
			}
			written += len(rows)
		}
		if err != nil {
			return withExit(ExitFailure, fmt.Errorf("write --out: %w", err))
		}
		exported++
	}
	if bar != nil {
		bar.Finish()
	}
	if tokenPQ != nil {
		if err := tokenPQ.Close(); err != nil {
			return withExit(ExitFailure, err)
		}
	}
	if transPQ != nil {
		if err := transPQ.Close(); err != nil {
			return withExit(ExitFailure, err)
		}
	}
	if err := out.commit(); err != nil {
		return withExit(ExitFailure, err)
	}
	fmt.Fprintf(s.ErrOut, "modelcalls export: %d %s rows from %d of %d rollouts; skipped: %d below --min-reward, %d without captured calls, %d not clean (--status), %d without a main chain, %d without token ids, %d invalid sft lines, %d unreadable\n",
		written, o.format, exported, len(rollouts), lowReward, noCalls, notClean, noChain, noIDs, invalid, unreadable)
	if noIDs > 0 {
		fmt.Fprintf(s.ErrOut, "modelcalls export: %s no main-chain call with prompt and generated token ids: capture with modelcalls proxy (or run) --tokens vllm|sglang|llama-server to have the engine return them\n",
			plural(noIDs, "rollout has", "rollouts have"))
	}
	if unreadable > 0 {
		return withExit(ExitFailure, errors.New("some rollouts could not be read"))
	}
	return nil
}
