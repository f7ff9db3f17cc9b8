package cli

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/jsonl"
)

// clearOptions are the flags of `modelcalls clear`.
type clearOptions struct {
	recordsOptions
	force bool
}

func newClearCmd(s *Streams) *cobra.Command {
	var o clearOptions
	cmd := &cobra.Command{
		Use:   "clear --capture-dir DIR [--in FILE] [--wait DUR] [--force]",
		Short: "Remove the captures of the rollouts listed in a JSONL file, before they are (re)run",
		Long: `Read JSONL rollout records from --in (default stdin) and, for every record with a rollout id,
remove <id>.capture.jsonl, <id>.capture.incomplete and the rollout's claims from each capture dir, so
a fresh run or a retry never appends to an earlier attempt's capture (NeMo Gym's clear before
dispatch). Records without rollout fields and blank lines are skipped.

Calls still in flight (live claims) are waited for first, up to --wait in total, like merge does. A
rollout whose calls are still in flight after the wait is not cleared, and clear exits 1, unless
--force is given: then it is cleared anyway, and the lines of those calls go to
<id>.capture.orphaned.jsonl (never to the next attempt's capture); clear names that file on stderr.
Their model call ids are listed in <id>.capture.cleared. clear never removes the orphan file;
calls and show say on stderr how many lines it holds.

Prints how many rollouts were cleared. Lines that are not JSON objects, or whose rollout id is
unusable or invalid, are reported on stderr with their line number; clear then exits 1 after
clearing every valid rollout.

Without --in, records are read from stdin; on a terminal clear says so (end the input with
Ctrl-D). SIGINT or SIGTERM stop it at once; the rollouts cleared until then stay cleared.`,
		Example: `  modelcalls clear --capture-dir ./captures --in rollouts.jsonl        # before a retry of these rollouts
  jq -c 'select(.reward == 0)' rollouts.jsonl | modelcalls clear --capture-dir ./captures`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runClear(cmd.Context(), s, &o)
		},
	}
	f := cmd.Flags()
	o.addFlags(f, "capture directory (required; repeat to clear in several)",
		"longest wait, over all rollouts, for calls still in flight (0: look once, do not wait)")
	f.BoolVar(&o.force, "force", false, "clear rollouts whose calls are still in flight after the wait (their lines go to <id>.capture.orphaned.jsonl)")
	return cmd
}

// clearTarget is one distinct rollout id of the input, with the line it was first listed on.
type clearTarget struct {
	id   string
	line int
}

func runClear(ctx context.Context, s *Streams, o *clearOptions) error {
	if err := o.check(); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	stores := make([]*capture.Store, len(o.captureDirs))
	for i, d := range o.captureDirs {
		var err error
		if stores[i], err = openCaptureDir(d); err != nil {
			return err
		}
	}
	// SIGINT/SIGTERM stop at once, even while waiting for stdin; what was cleared stays cleared.
	ctx, stop := interruptContext(ctx)
	defer stop()
	in, _, closeIn, err := openInput(s, "clear", o.in)
	if err != nil {
		return err
	}
	defer closeIn()
	in = newCtxReader(ctx, in)

	var targets []clearTarget
	reported := 0
	seen := map[string]bool{}
	lr := jsonl.NewReader(in)
	for {
		l, ok, err := lr.Next()
		if err == nil {
			err = context.Cause(ctx) // a signal between lines
		}
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("%v: stopped after line %d, before clearing anything (rollouts are cleared once the input is read)",
					context.Cause(ctx), lr.Lines())
			}
			return withExit(ExitFailure, err)
		}
		if !ok {
			break
		}
		if len(bytes.TrimSpace(l.Body)) == 0 {
			continue
		}
		id, ok, err := modelcalls.RolloutID(l.Body)
		if err != nil {
			reported++
			fmt.Fprintf(s.ErrOut, "modelcalls clear: line %d: not cleared: %v\n", l.Num, err)
			continue
		}
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		targets = append(targets, clearTarget{id: id, line: l.Num})
	}

	// Wait for calls in flight, one deadline for the whole run.
	deadline := time.Now().Add(o.wait)
	var cleared, left int
	for _, tg := range targets {
		res, err := modelcalls.ClearRollout(ctx, stores, tg.id, time.Until(deadline), o.force)
		if err != nil {
			return withExit(ExitFailure, fmt.Errorf("line %d: rollout %s: %w", tg.line, tg.id, err))
		}
		if !res.Cleared {
			left++
			fmt.Fprintf(s.ErrOut, "modelcalls clear: rollout %s: not cleared: %d capture writes still in flight after waiting %s (--force clears it anyway; their lines then go to %s)\n",
				tg.id, res.Live, o.wait, tg.id+capture.OrphanSuffix)
			continue
		}
		for i, rep := range res.Reports {
			if rep.InFlight > 0 {
				op, _ := stores[i].OrphanPath(tg.id)
				fmt.Fprintf(s.ErrOut, "modelcalls clear: rollout %s: cleared with %d capture writes still in flight in %s; their lines will go to %s, not to the next attempt's capture\n",
					tg.id, rep.InFlight, stores[i].Dir(), op)
			}
		}
		if res.Removed() {
			cleared++
		}
	}
	listed := len(targets)
	if left > 0 {
		fmt.Fprintf(s.Out, "cleared %s (%d listed, %d had nothing to clear, %d not cleared: calls still in flight)\n", plural(cleared, "rollout", "rollouts"), listed, listed-cleared-left, left)
	} else {
		fmt.Fprintf(s.Out, "cleared %s (%d listed, %d had nothing to clear)\n", plural(cleared, "rollout", "rollouts"), listed, listed-cleared)
	}
	if reported > 0 || left > 0 {
		return silentExit{code: ExitFailure}
	}
	return nil
}
