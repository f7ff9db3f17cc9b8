package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/mattn/go-runewidth"
	"github.com/spf13/cobra"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/lineage"
	"github.com/modelcalls/modelcalls/samples"
)

// lineageOptions are the flags of `modelcalls lineage`.
type lineageOptions struct {
	captureDirs []string
	format      string
}

func newLineageCmd(s *Streams) *cobra.Command {
	var o lineageOptions
	cmd := &cobra.Command{
		Use:   "lineage --capture-dir DIR ROLLOUT_ID [--format text|json]",
		Short: "Show which call of a rollout continues which, as a tree",
		Long: `Derive the lineage of one rollout from its capture alone: for each call its parent and the
relation to it (extends, retry, resample, fork, compaction, root), how the parent was found
(declared, previous_response_id, messages, token_prefix), who wrote each message of its context
(model or client), the main chain, and a token-prefix audit of each chained edge whose calls carry
token ids. docs/lineage.md explains each rule.

--format text (the default) prints the tree: one line per call, a child indented under its parent,
the main chain marked with *: call index, relation (and evidence when it is not message matching),
model, the messages the call added, tokens in/out, finish reason, and the audit when it failed.
Side calls (other roots) follow the main tree. A summary line ends it.

--format json prints one JSON object: {"rollout_id", "calls": [...], "main_chain": [...],
"summary": {...}} (docs/lineage.md has the schema).

The capture dir may also be given as the first argument. Damaged capture lines are reported on
stderr and skipped. Exit 3 when DIR or the rollout does not exist, 2 for a usage error.`,
		Example: `  modelcalls lineage --capture-dir ./captures r1
  modelcalls lineage --capture-dir ./captures r1 --format json | jq '.summary'`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dirs, rest, err := captureDirArgs("lineage", o.captureDirs, args, "ROLLOUT_ID")
			if err != nil {
				return err
			}
			return runLineage(s, &o, dirs, rest[0])
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.captureDirs, "capture-dir", nil, "capture directory (or give it as the first argument); repeat to look in several in order, the first holding the rollout wins")
	f.StringVar(&o.format, "format", "text", "text (a tree) or json")
	return cmd
}

func runLineage(s *Streams, o *lineageOptions, dirs []string, id string) error {
	if o.format != "text" && o.format != "json" {
		return usageErrorf("--format %q: want text or json", o.format)
	}
	if err := checkRolloutID("ROLLOUT_ID", id); err != nil {
		return err
	}
	rc, err := loadRollout(dirs, id)
	if err != nil {
		return err
	}
	for _, d := range rc.damages {
		fmt.Fprintf(s.ErrOut, "modelcalls lineage: %s:%d: damaged line skipped: %v\n", rc.path, d.Line, d.Err)
	}
	if rc.incomplete {
		fmt.Fprintf(s.ErrOut, "modelcalls lineage: rollout %s is marked incomplete: a capture write failed, calls may be missing\n", id)
	}
	calls := lineage.FromRecords(rc.records)
	for i := range calls {
		calls[i].SetDeclared(rc.lines[i])
		calls[i].Tokens = samples.TokenIDs(&rc.records[i], rc.lines[i])
	}
	l := lineage.Derive(calls)
	w := bufio.NewWriter(s.Out)
	if o.format == "json" {
		b, err := json.Marshal(struct {
			RolloutID string `json:"rollout_id"`
			*lineage.Lineage
		}{id, l})
		if err != nil {
			return err
		}
		w.Write(b)
		w.WriteByte('\n')
	} else {
		writeLineageTree(w, id, rc.records, l, outputWidth(s.Out))
	}
	return w.Flush()
}

// writeLineageTree writes l as a tree (runLineage's text format): one line per call, its relation
// indented by depth, the columns as wide as their widest value; then the summary, wrapped between
// its parts to width (0: one line).
func writeLineageTree(w io.Writer, id string, recs []modelcalls.ModelCallRecord, l *lineage.Lineage, width int) {
	pos := make(map[string]int, len(l.Calls))
	for i := range l.Calls {
		pos[l.Calls[i].CallID] = i
	}
	children := make([][]int, len(l.Calls))
	var roots []int
	for i := range l.Calls {
		if p := l.Calls[i].ParentCallID; p != nil {
			if pi, ok := pos[*p]; ok {
				children[pi] = append(children[pi], i)
				continue
			}
		}
		roots = append(roots, i)
	}
	// The tree holding the main chain first, then the other roots in capture order.
	for k, r := range roots {
		if l.Calls[r].MainChain {
			copy(roots[1:k+1], roots[:k])
			roots[0] = r
			break
		}
	}
	fmt.Fprintf(w, "rollout %s: %d calls\n", id, len(l.Calls))
	type line struct {
		i, depth                int
		index, rel, model, toks string
	}
	var lines []line
	var wIndex, wRel, wModel, wToks int
	var walk func(i, depth int)
	walk = func(i, depth int) {
		n := &l.Calls[i]
		rel := string(n.Relation)
		if n.Evidence != lineage.EvidenceMessages && n.Evidence != lineage.EvidenceNone {
			rel += " (" + string(n.Evidence) + ")"
		}
		ln := line{i: i, depth: depth, index: "#" + strconv.Itoa(n.CallIndex), rel: strings.Repeat("  ", depth) + rel,
			model: orDash(recs[i].Model), toks: tokensInOut(&recs[i])}
		wIndex, wRel = max(wIndex, len(ln.index)), max(wRel, runewidth.StringWidth(ln.rel))
		wModel, wToks = max(wModel, runewidth.StringWidth(ln.model)), max(wToks, len(ln.toks))
		lines = append(lines, ln)
		for _, c := range children[i] {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	pad := func(s string, n int) string { return s + strings.Repeat(" ", max(0, n-runewidth.StringWidth(s))) }
	for _, ln := range lines {
		n := &l.Calls[ln.i]
		mark := " "
		if n.MainChain {
			mark = "*"
		}
		fmt.Fprintf(w, "%s %s  %s  %s  +%-3d %s  %s\n", mark, pad(ln.index, wIndex), pad(ln.rel, wRel), pad(ln.model, wModel),
			n.NewMessages, pad(ln.toks, wToks), finishOf(&recs[ln.i]))
		if a := n.Audit; a != nil && !a.OK {
			fmt.Fprintf(w, "        %s  token audit: differs at %d (%s): expected %s, got %s\n", strings.Repeat("  ", ln.depth),
				*a.Position, a.In, idText(a.Expected), idText(a.Got))
		}
	}
	s := l.Summary
	parts := []string{fmt.Sprintf("main chain %d calls;", s.MainChainLength), fmt.Sprintf("%d roots,", s.Roots),
		fmt.Sprintf("%d extends,", s.Extends), fmt.Sprintf("%d forks,", s.Forks), fmt.Sprintf("%d retries,", s.Retries),
		fmt.Sprintf("%d resamples,", s.Resamples), fmt.Sprintf("%d compactions;", s.Compactions),
		fmt.Sprintf("%d calls off the main chain", s.OffMainChain)}
	if s.AuditedEdges > 0 {
		parts[len(parts)-1] += ";"
		parts = append(parts, fmt.Sprintf("token audit %d/%d edges exact", s.AuditedEdges-s.AuditFailures, s.AuditedEdges))
	}
	for _, l := range wrapParts(parts, " ", width) {
		fmt.Fprintln(w, l)
	}
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

func tokensInOut(r *modelcalls.ModelCallRecord) string {
	n := func(v *int64) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatInt(*v, 10)
	}
	return "tokens " + n(r.TokensIn) + "/" + n(r.TokensOut)
}

func finishOf(r *modelcalls.ModelCallRecord) string {
	switch {
	case r.ErrorCategory != nil:
		return "error " + *r.ErrorCategory
	case r.FinishReason != nil:
		return *r.FinishReason
	case r.ResponseStatus != nil:
		return *r.ResponseStatus
	}
	return "-"
}

func idText(v *int64) string {
	if v == nil {
		return "(end of prompt)"
	}
	return strconv.FormatInt(*v, 10)
}
