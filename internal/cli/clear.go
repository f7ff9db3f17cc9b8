package cli

import (
	"bytes"
	"context"
	"fmt"

	"github.com/spf13/cobra"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
)

func init() { register(newClearCmd) }

// clearOptions are the flags of `modelcalls clear`.
type clearOptions struct {
	captureDirs []string
	in          string
}

func newClearCmd(s *Streams) *cobra.Command {
	var o clearOptions
	cmd := &cobra.Command{
		Use:   "clear --capture-dir DIR [--in FILE]",
		Short: "Remove the captures of the rollouts listed in a JSONL file, before they are (re)run",
		Long: `Read JSONL rollout records from --in (default stdin) and, for every record with a rollout id,
remove <id>.capture.jsonl, <id>.capture.incomplete and <id>.capture.claims/ from each capture dir, so
a fresh run or a retry never appends to an earlier attempt's capture (NeMo Gym's clear before
dispatch). Records without rollout fields and blank lines are skipped.

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
	f.StringArrayVar(&o.captureDirs, "capture-dir", nil, "capture directory (required; repeat to clear in several)")
	f.StringVar(&o.in, "in", "", "JSONL rollout records (default: stdin; - is stdin)")
	return cmd
}

func runClear(ctx context.Context, s *Streams, o *clearOptions) error {
	if err := checkCaptureDirs(o.captureDirs); err != nil {
		return err
	}
	stores := make([]*capture.Store, len(o.captureDirs))
	for i, d := range o.captureDirs {
		st, err := capture.OpenExisting(d)
		if err != nil {
			return withExit(ExitNotFound, err)
		}
		stores[i] = st
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

	var listed, cleared, reported int
	seen := map[string]bool{}
	lr := newLineReader(in)
	for {
		l, ok, err := lr.next()
		if err == nil {
			err = context.Cause(ctx) // a signal between lines
		}
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("%v: stopped after line %d; %s before it, the rest were not cleared",
					context.Cause(ctx), lr.num, plural(cleared, "rollout", "rollouts")+" cleared")
			}
			return withExit(ExitFailure, err)
		}
		if !ok {
			break
		}
		if len(bytes.TrimSpace(l.body)) == 0 {
			continue
		}
		id, ok, err := modelcalls.RolloutID(l.body)
		if err != nil {
			reported++
			fmt.Fprintf(s.ErrOut, "modelcalls clear: line %d: not cleared: %v\n", l.num, err)
			continue
		}
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		listed++
		had := false
		for _, st := range stores {
			hasCapture, hasMarker, err := st.Stat(id)
			if err != nil {
				return withExit(ExitFailure, fmt.Errorf("line %d: rollout %s: %w", l.num, id, err))
			}
			claims, err := st.Claims(id)
			if err != nil {
				return withExit(ExitFailure, fmt.Errorf("line %d: rollout %s: %w", l.num, id, err))
			}
			if claims.Live > 0 {
				fmt.Fprintf(s.ErrOut, "modelcalls clear: rollout %s: %d capture writes were still in progress in %s\n", id, claims.Live, st.Dir())
			}
			had = had || hasCapture || hasMarker || claims.Live+claims.Stale > 0
			if err := st.Clear(id); err != nil {
				return withExit(ExitFailure, fmt.Errorf("line %d: rollout %s: %w", l.num, id, err))
			}
		}
		if had {
			cleared++
		}
	}
	fmt.Fprintf(s.Out, "cleared %s (%d listed, %d had nothing to clear)\n", plural(cleared, "rollout", "rollouts"), listed, listed-cleared)
	if reported > 0 {
		return silentExit{code: ExitFailure}
	}
	return nil
}
