package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/modelcalls/modelcalls/rundiff"
)

func newDiffCmd(s *Streams) *cobra.Command {
	var dirs []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "diff --capture-dir A [--capture-dir B] ROLLOUT [ROLLOUT2]",
		Short: "Compare two runs of the same rollout: the first call and message that differ, then every call side by side",
		Long: `Compare two runs of a rollout: a replay and the recording it replays, two attempts at one task,
or the runs before and after a prompt change. The runs are

  --capture-dir A ROLLOUT ROLLOUT2                  two rollouts in one dir
  --capture-dir A --capture-dir B ROLLOUT           the same rollout id in two dirs
  --capture-dir A --capture-dir B ROLLOUT ROLLOUT2  ROLLOUT in A, ROLLOUT2 in B

Calls are paired by position in started_at order. A pair differs by model, the messages its
request sent, HTTP status, finish reason, tool calls (names and arguments), the answer, or error
category; ids that name one run's objects (response, message and tool call ids, signatures) are
left out of the comparison, and tokens and latency are summarised, never compared. The output
names the first pair that differs (and, for messages, the first message, with an excerpt of
both), then one line per pair: what differs, status, tokens in and out, latency and tool calls of
A / B. --json prints the comparison as one JSON object (the rundiff.Result fields).

Exit code: 0 when the runs match, 1 when they differ (as diff(1)), 2 for a usage error, 3 when a
capture dir or a rollout does not exist.`,
		Example: `  modelcalls diff --capture-dir ./recorded --capture-dir ./replayed r1
  modelcalls diff --capture-dir ./captures r1-attempt1 r1-attempt2
  modelcalls diff --capture-dir ./before --capture-dir ./after task7 --json | jq .first`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a, b, err := diffRuns(dirs, args)
			if err != nil {
				return err
			}
			ra, err := loadRun(a)
			if err != nil {
				return err
			}
			rb, err := loadRun(b)
			if err != nil {
				return err
			}
			res := rundiff.Compare(ra, rb)
			if asJSON {
				enc := json.NewEncoder(s.Out)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(res); err != nil {
					return err
				}
			} else {
				writeDiff(s.Out, res)
			}
			if !res.Same {
				return silentExit{code: ExitFailure} // as diff(1): the output says how

			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&dirs, "capture-dir", nil, "capture directory of run A; give it again for run B's")
	f.BoolVar(&asJSON, "json", false, "print the comparison as JSON")
	return cmd
}

// runRef names one side: a rollout in a capture dir.
type runRef struct{ dir, id string }

// diffRuns reads the two runs from the flags and arguments.
func diffRuns(dirs, args []string) (a, b runRef, err error) {
	if err := checkCaptureDirs(dirs); err != nil {
		return a, b, err
	}
	if len(dirs) > 2 {
		return a, b, usageErrorf("diff: --capture-dir given %d times: give run A's dir, and run B's when it is another", len(dirs))
	}
	if len(args) == 0 || len(args) > 2 {
		return a, b, usageErrorf("diff: want ROLLOUT [ROLLOUT2], got %d arguments", len(args))
	}
	for i, id := range args {
		if err := checkRolloutID([]string{"ROLLOUT", "ROLLOUT2"}[i], id); err != nil {
			return a, b, err
		}
	}
	a = runRef{dirs[0], args[0]}
	b = runRef{dirs[len(dirs)-1], args[len(args)-1]}
	if a == b {
		return a, b, usageErrorf("diff: both runs are %s in %s: give a second rollout or a second --capture-dir", a.id, a.dir)
	}
	return a, b, nil
}

func loadRun(r runRef) (*rundiff.Run, error) {
	store, err := openCaptureDir(r.dir)
	if err != nil {
		return nil, err
	}
	hasCapture, marker, err := store.Stat(r.id)
	if err != nil {
		return nil, withExit(ExitFailure, err)
	}
	if !hasCapture && !marker {
		return nil, withExit(ExitNotFound, fmt.Errorf("diff: no rollout %s in %s%s", r.id, r.dir, unknownRolloutHint("calls", []string{r.dir}, r.id)))
	}
	run, err := rundiff.Load(store, r.dir, r.id)
	if err != nil {
		return nil, withExit(ExitFailure, err)
	}
	return run, nil
}

// writeDiff prints a comparison for a person.
func writeDiff(w io.Writer, res *rundiff.Result) {
	for _, t := range []struct {
		name string
		t    rundiff.Totals
	}{{"A", res.A}, {"B", res.B}} {
		fmt.Fprintf(w, "%s: %s in %s: %d calls, %d with an error, tokens in %d, out %d, latency %s ms (sum), %d tool calls",
			t.name, t.t.Rollout, t.t.Dir, t.t.Calls, t.t.Errors, t.t.TokensIn, t.t.TokensOut, strconv.FormatFloat(t.t.LatencyMS, 'f', 1, 64), t.t.ToolCalls)
		if t.t.Damaged > 0 {
			fmt.Fprintf(w, ", %d unreadable lines", t.t.Damaged)
		}
		fmt.Fprintln(w)
	}
	if res.Same {
		fmt.Fprintf(w, "\nThe runs match: %d calls, same models, messages, statuses, tool calls and answers.\n", len(res.Pairs))
	} else {
		f := res.First
		fmt.Fprintf(w, "\nFirst difference: call #%d (A call_index %s, B call_index %s): %s", f.Position, optInt(f.CallA), optInt(f.CallB), f.What)
		if f.Message != nil {
			fmt.Fprintf(w, ", message %d", *f.Message)
		}
		fmt.Fprintf(w, "\n  A: %s\n  B: %s\n", f.A, f.B)
		if f.Note != nil {
			fmt.Fprintf(w, "  (%s)\n", *f.Note)
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tA call\tB call\tdiffers\tstatus A/B\ttokens in A/B\ttokens out A/B\tlatency ms A/B\ttool calls A / B")
	for _, p := range res.Pairs {
		differs := "-"
		if len(p.Differs) > 0 {
			differs = strings.Join(p.Differs, ",")
		}
		side := func(f func(c *rundiff.Call) string) string {
			return sideVal(p.A, f) + "/" + sideVal(p.B, f)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Position,
			sideVal(p.A, func(c *rundiff.Call) string { return strconv.Itoa(c.Index) }),
			sideVal(p.B, func(c *rundiff.Call) string { return strconv.Itoa(c.Index) }), differs,
			side(func(c *rundiff.Call) string { return optInt(c.Status) }),
			side(func(c *rundiff.Call) string { return optInt64(c.TokensIn) }),
			side(func(c *rundiff.Call) string { return optInt64(c.TokensOut) }),
			side(func(c *rundiff.Call) string { return optMS(c.LatencyMS) }),
			sideVal(p.A, toolNames)+" / "+sideVal(p.B, toolNames))
	}
	tw.Flush()
}

func sideVal(c *rundiff.Call, f func(c *rundiff.Call) string) string {
	if c == nil {
		return "-"
	}
	return f(c)
}

// toolNames lists a call's tool calls by name.
func toolNames(c *rundiff.Call) string {
	if len(c.ToolCalls) == 0 {
		return "none"
	}
	names := make([]string, len(c.ToolCalls))
	for i, t := range c.ToolCalls {
		names[i], _, _ = strings.Cut(t, "(")
	}
	return strings.Join(names, ",")
}

func optInt(p *int) string {
	if p == nil {
		return "?"
	}
	return strconv.Itoa(*p)
}

func optInt64(p *int64) string {
	if p == nil {
		return "?"
	}
	return strconv.FormatInt(*p, 10)
}

func optMS(p *float64) string {
	if p == nil {
		return "?"
	}
	return strconv.FormatFloat(*p, 'f', 1, 64)
}
