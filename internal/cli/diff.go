package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/mattn/go-runewidth"
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
both), then one row per pair: what differs, status, tokens in and out, latency and tool calls of
A / B. --json prints the comparison as one JSON object (the rundiff.Result fields).

On a terminal the report fits its width: lines wrap between words, and the table drops columns
(latency, then the tool names, counted instead, then tokens) until it fits, what differs breaking
after a comma; names are never cut, and a line says which columns are not shown.

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
				writeDiff(s.Out, res, outputWidth(s.Out))
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

// writeDiff prints a comparison for a person, fitted to width columns (0: no limit): the run
// totals and the first difference wrap between words, and the per-call table is the widest of
// diffLayouts that fits (see diffTable), with a line naming what it leaves out.
func writeDiff(w io.Writer, res *rundiff.Result, width int) {
	for _, t := range []struct {
		name string
		t    rundiff.Totals
	}{{"A", res.A}, {"B", res.B}} {
		parts := []string{t.name + ": " + t.t.Rollout, "in", t.t.Dir + ":", plural(t.t.Calls, "call,", "calls,"),
			strconv.Itoa(t.t.Errors) + " with an error,", "tokens in " + strconv.FormatInt(t.t.TokensIn, 10) + ",",
			"out " + strconv.FormatInt(t.t.TokensOut, 10) + ",", "latency " + strconv.FormatFloat(t.t.LatencyMS, 'f', 1, 64) + " ms (sum),",
			plural(t.t.ToolCalls, "tool call", "tool calls")}
		if t.t.Damaged > 0 {
			parts[len(parts)-1] += ","
			parts = append(parts, plural(t.t.Damaged, "unreadable line", "unreadable lines"))
		}
		writeWrapped(w, "", "   ", parts, width, false)
	}
	fmt.Fprintln(w)
	if res.Same {
		writeWrapped(w, "", "", strings.Fields(fmt.Sprintf("The runs match: %d calls, same models, messages, statuses, tool calls and answers.", len(res.Pairs))), width, false)
	} else {
		f := res.First
		head := []string{"First difference:", fmt.Sprintf("call #%d", f.Position), "(A call_index " + optInt(f.CallA) + ",",
			"B call_index " + optInt(f.CallB) + "):", f.What}
		if f.Message != nil {
			head[len(head)-1] += ","
			head = append(head, fmt.Sprintf("message %d", *f.Message))
		}
		writeWrapped(w, "", "", head, width, false)
		writeWrapped(w, "  A: ", "     ", strings.Fields(f.A), width, true)
		writeWrapped(w, "  B: ", "     ", strings.Fields(f.B), width, true)
		if f.Note != nil {
			writeWrapped(w, "  (", "   ", strings.Fields(*f.Note+")"), width, false)
		}
	}
	fmt.Fprintln(w)
	layout, lines := diffTable(res.Pairs, width)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	if hidden := diffHidden(layout); len(hidden) > 0 {
		words := append([]string{fmt.Sprintf("%d columns; not shown:", width)}, hidden...)
		words[len(words)-1] = strings.TrimSuffix(words[len(words)-1], ",")
		for _, l := range wrapParts(append(words, "(--json has every field)"), " ", width) {
			fmt.Fprintln(w, l)
		}
	}
}

// writeWrapped writes parts (words, or groups of words that belong together: "2 calls,") after
// first, joined by spaces and broken between parts into lines at most width columns wide (0: one
// line), each further line after indent. A part too long for a line of its own is broken inside
// when breakLong is set (an excerpt's long token), else left whole (a rollout id, a path).
func writeWrapped(w io.Writer, first, indent string, parts []string, width int, breakLong bool) {
	room := width - runewidth.StringWidth(indent)
	if width <= 0 || room < minWrapWidth {
		fmt.Fprintln(w, strings.TrimRight(first+strings.Join(parts, " "), " "))
		return
	}
	var words []string
	for _, word := range parts {
		for breakLong && runewidth.StringWidth(word) > room {
			head := runewidth.Truncate(word, room, "")
			words = append(words, head)
			word = word[len(head):]
		}
		words = append(words, word)
	}
	prefix, line := first, ""
	for _, word := range words {
		if line != "" && runewidth.StringWidth(prefix+line+" "+word) > width {
			fmt.Fprintln(w, prefix+line)
			prefix, line = indent, ""
		}
		if line == "" {
			line = word
		} else {
			line += " " + word
		}
	}
	fmt.Fprintln(w, prefix+line)
}

// minWrapWidth is the narrowest text writeWrapped breaks into lines; narrower, a line is left whole.
const minWrapWidth = 16

// diffColumn is one column of diff's per-call table, one row per pair of calls.
type diffColumn struct {
	header string
	// list: the cell is a list ("status,answer") that may break into lines after an item's comma,
	// so that no item is ever cut.
	list bool
	cell func(p *rundiff.Pair) string
	// stands names the full layout's columns this one shows the figures of.
	stands []string
}

var (
	diffPos    = diffColumn{header: "#", cell: func(p *rundiff.Pair) string { return strconv.Itoa(p.Position) }}
	diffCallA  = diffColumn{header: "A call", cell: func(p *rundiff.Pair) string { return sideVal(p.A, callIndex) }}
	diffCallB  = diffColumn{header: "B call", cell: func(p *rundiff.Pair) string { return sideVal(p.B, callIndex) }}
	diffCalls  = diffColumn{header: "call A/B", cell: func(p *rundiff.Pair) string { return pairVal(p, callIndex) }, stands: []string{"A call", "B call"}}
	diffWhat   = diffColumn{header: "differs", list: true, cell: differsCell}
	diffStatus = diffColumn{header: "status A/B", cell: func(p *rundiff.Pair) string {
		return pairVal(p, func(c *rundiff.Call) string { return optInt(c.Status) })
	}}
	diffTokIn = diffColumn{header: "tokens in A/B", cell: func(p *rundiff.Pair) string {
		return pairVal(p, func(c *rundiff.Call) string { return optInt64(c.TokensIn) })
	}}
	diffTokOut = diffColumn{header: "tokens out A/B", cell: func(p *rundiff.Pair) string {
		return pairVal(p, func(c *rundiff.Call) string { return optInt64(c.TokensOut) })
	}}
	diffLatency = diffColumn{header: "latency ms A/B", cell: func(p *rundiff.Pair) string {
		return pairVal(p, func(c *rundiff.Call) string { return optMS(c.LatencyMS) })
	}}
	diffTokInShort  = diffColumn{header: "tok in A/B", cell: diffTokIn.cell, stands: []string{diffTokIn.header}}
	diffTokOutShort = diffColumn{header: "tok out A/B", cell: diffTokOut.cell, stands: []string{diffTokOut.header}}
	diffTools       = diffColumn{header: "tool calls A / B", cell: func(p *rundiff.Pair) string {
		return sideVal(p.A, toolNames) + " / " + sideVal(p.B, toolNames)
	}}
	diffToolCount = diffColumn{header: "tools A/B", cell: func(p *rundiff.Pair) string {
		return pairVal(p, func(c *rundiff.Call) string { return strconv.Itoa(len(c.ToolCalls)) })
	}}
)

// diffLayouts are the per-call table's column sets, widest first: every column; the call indexes
// as one column; without latency, the tool calls counted instead of named, shorter token headers;
// the pair, what differs, status and tool-call counts.
var diffLayouts = []struct {
	name string
	cols []diffColumn
}{
	{"full", []diffColumn{diffPos, diffCallA, diffCallB, diffWhat, diffStatus, diffTokIn, diffTokOut, diffLatency, diffTools}},
	{"wide", []diffColumn{diffPos, diffCalls, diffWhat, diffStatus, diffTokIn, diffTokOut, diffLatency, diffTools}},
	{"compact", []diffColumn{diffPos, diffCalls, diffWhat, diffStatus, diffTokInShort, diffTokOutShort, diffToolCount}},
	{"narrow", []diffColumn{diffPos, diffWhat, diffStatus, diffToolCount}},
}

// diffGap is the space between two columns of the table.
const diffGap = "  "

// diffTable lays out the per-call table in the widest of diffLayouts that fits width columns (0:
// no limit, the full layout on one line per pair): what differs breaks into lines between its
// items as far as needed (never below its widest item or header), and nothing is cut: a model's or
// tool's name stays whole, so a layout that cannot show the tool names whole counts them instead. When even the narrowest layout does not
// fit, it is used as it is and the terminal wraps its lines. It returns the layout's index and the
// lines.
func diffTable(pairs []rundiff.Pair, width int) (int, []string) {
	for li, l := range diffLayouts {
		widths, ok := diffWidths(l.cols, pairs, width)
		if !ok && li < len(diffLayouts)-1 {
			continue
		}
		var lines []string
		emit := func(cells [][]string) {
			for k := 0; ; k++ {
				var b strings.Builder
				more := false
				for i, c := range cells {
					v := ""
					if k < len(c) {
						v, more = c[k], true
					}
					if i > 0 {
						b.WriteString(diffGap)
					}
					b.WriteString(v)
					if i < len(cells)-1 {
						b.WriteString(strings.Repeat(" ", max(0, widths[i]-runewidth.StringWidth(v))))
					}
				}
				if !more {
					return
				}
				lines = append(lines, strings.TrimRight(b.String(), " "))
			}
		}
		header := make([][]string, len(l.cols))
		for i, c := range l.cols {
			header[i] = []string{c.header}
		}
		emit(header)
		for pi := range pairs {
			cells := make([][]string, len(l.cols))
			for i, c := range l.cols {
				cells[i] = []string{c.cell(&pairs[pi])}
				if c.list {
					cells[i] = wrapList(cells[i][0], widths[i])
				}
			}
			emit(cells)
		}
		return li, lines
	}
	return 0, nil
}

// diffWidths is the width of each column of cols for pairs, the list columns narrowed (the widest
// first, never below their widest item) until the table fits width; ok is false when it cannot.
func diffWidths(cols []diffColumn, pairs []rundiff.Pair, width int) (widths []int, ok bool) {
	widths = make([]int, len(cols))
	floor := make([]int, len(cols))
	total := len(diffGap) * (len(cols) - 1)
	for i, c := range cols {
		widths[i] = runewidth.StringWidth(c.header)
		floor[i] = widths[i]
		for pi := range pairs {
			v := c.cell(&pairs[pi])
			widths[i] = max(widths[i], runewidth.StringWidth(v))
			if c.list {
				for _, item := range listItems(v) {
					floor[i] = max(floor[i], runewidth.StringWidth(item))
				}
			}
		}
		if !c.list {
			floor[i] = widths[i]
		}
		total += widths[i]
	}
	for width > 0 && total > width {
		widest := -1
		for i := range cols {
			if widths[i] > floor[i] && (widest < 0 || widths[i] > widths[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			return widths, false
		}
		widths[widest]--
		total--
	}
	return widths, true
}

// listItems splits a list cell after each comma, the comma kept.
func listItems(s string) []string {
	return strings.SplitAfter(s, ",")
}

// wrapList breaks a list cell into lines at most width wide, between items.
func wrapList(s string, width int) []string {
	var lines []string
	line := ""
	for _, item := range listItems(s) {
		if line != "" && runewidth.StringWidth(line+item) > width {
			lines = append(lines, line)
			line = ""
		}
		line += item
	}
	return append(lines, line)
}

// diffHidden names the full layout's columns that layout li leaves out (each with a trailing
// comma, for a line of words), none for the full layout.
func diffHidden(li int) []string {
	var hidden []string
	shown := diffLayouts[li].cols
	for _, c := range diffLayouts[0].cols {
		if !slices.ContainsFunc(shown, func(s diffColumn) bool { return s.header == c.header || slices.Contains(s.stands, c.header) }) {
			hidden = append(hidden, c.header+",")
		}
	}
	return hidden
}

// differsCell is what differs in a pair, "-" for nothing.
func differsCell(p *rundiff.Pair) string {
	if len(p.Differs) == 0 {
		return "-"
	}
	return strings.Join(p.Differs, ",")
}

func callIndex(c *rundiff.Call) string { return strconv.Itoa(c.Index) }

// pairVal is f of both calls of p as "A/B", "-" for a side with no call.
func pairVal(p *rundiff.Pair, f func(c *rundiff.Call) string) string {
	return sideVal(p.A, f) + "/" + sideVal(p.B, f)
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
