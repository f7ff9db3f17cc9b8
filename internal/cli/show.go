package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/modelcalls/modelcalls/dialect"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/internal/stats"
)

// showOptions are the flags of `modelcalls show`.
type showOptions struct {
	captureDirs []string
	raw         string // "", "both", "request" or "response"
	full        bool
}

// Limits of the person-sized view (--full lifts them).
const (
	showTextLimit    = 600 // characters of one text block (system prompt, message, response text)
	showMessageLimit = 12  // messages shown: the first 2 and the last 10
	showSummaryCalls = 20  // calls listed in a rollout summary: the first 5 and the last 15
)

func newShowCmd(s *Streams) *cobra.Command {
	var o showOptions
	cmd := &cobra.Command{
		Use:   "show --capture-dir DIR ROLLOUT_ID [CALL_INDEX | MODEL_CALL_ID] [--raw[=request|response]] [--full]",
		Short: "Show one captured model call as a person reads it, or a one-screen summary of a rollout",
		Long: `With a call (its call_index, as calls lists it, or its 32-hex model_call_id, or the first 6 or more
characters of that id when no other call's id starts with them): the request's system
prompt, messages and tool names; the response's text, reasoning and tool calls with their arguments;
usage, with the usage field each number came from (and the Anthropic cache fold spelled out);
the token ids and logprobs the engine returned (counts, where they came from, the least likely
generated tokens, findings: docs/tokens.md); timing, HTTP status, where the answer came from, and the error. Long texts are cut to 600
characters and long conversations to their first 2 and last 10 messages; --full shows everything.

--raw prints the stored bytes instead: the request as captured and the response body as received
(response_raw: the SSE stream, or a body that was not JSON) or else the parsed response object.
--raw=request and --raw=response print only that one, without headings, for piping to jq.

Without a call: one screen about the rollout: its metrics (calls, errors, tokens, cache, latency
summed over the calls, elapsed time from the first call's start to the last one's end, and output
tokens per second of that elapsed time),
and one line per call (the first 5 and the last 15 when there are more than 20).

The capture dir may also be given as the first argument (modelcalls show DIR ROLLOUT_ID [CALL]).
--capture-dir may be repeated: the rollout is read from the first dir that holds it, as merge
reads it (stderr says when a later dir holds it too).
Without ROLLOUT_ID (modelcalls show DIR): list the rollouts of DIR, as modelcalls calls DIR does.
A call index is >= 0; a negative one is a usage error (exit 2). Exit 3 when DIR, the rollout or the
call does not exist (an unknown rollout id gets the ids like it); 1 when the call's capture line is
damaged.`,
		Example: `  modelcalls show --capture-dir ./captures r1          # the rollout on one screen
  modelcalls show --capture-dir ./captures r1 3        # call_index 3
  modelcalls show --capture-dir ./captures r1 5f0c3b2a9d8e4f1a0b2c3d4e5f6a7b8c
  modelcalls show --capture-dir ./captures r1 3 --raw=request | jq .messages
  modelcalls show ./captures r1 3                      # the positional form`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// ROLLOUT_ID and at most one call; the capture dir as --capture-dir or as the first
			// argument, as for calls (without the flag, the first argument is always the dir).
			if dirs, ok := noRolloutArg(o.captureDirs, args); ok {
				format, _ := resolveFormat("", false, s.Out)
				return listRollouts(cmd.Context(), s, "show", dirs, format)
			}
			want := []string{"ROLLOUT_ID"}
			if (len(o.captureDirs) > 0 && len(args) >= 2) || (len(o.captureDirs) == 0 && len(args) >= 3) {
				want = append(want, "CALL")
			}
			dirs, rest, err := captureDirArgs("show", o.captureDirs, args, want...)
			if err != nil {
				return err
			}
			call := ""
			if len(rest) == 2 {
				call = rest[1]
			}
			return runShow(s, &o, dirs, rest[0], call)
		},
	}
	// "-1" reaches pflag as shorthand flags; say what a call index is instead of "unknown shorthand
	// flag: '1' in -1".
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		if m := negativeIndexArg.FindStringSubmatch(err.Error()); m != nil {
			return negativeIndexError(m[1])
		}
		return err
	})
	f := cmd.Flags()
	f.StringArrayVar(&o.captureDirs, "capture-dir", nil, "capture directory (or give it as the first argument); repeat to look in several in order, the first holding the rollout wins, as in merge")
	f.StringVar(&o.raw, "raw", "", "print the stored bytes: request and response, or only request or response")
	f.Lookup("raw").NoOptDefVal = "both"
	f.BoolVar(&o.full, "full", false, "do not cut long texts and conversations")
	return cmd
}

// negativeIndexArg matches pflag's error for an argument like -1 (taken for shorthand flags).
var negativeIndexArg = regexp.MustCompile(`^unknown shorthand flag: '.' in (-[0-9]+)$`)

func negativeIndexError(arg string) error {
	return usageErrorf("show: call %s: a call index is >= 0 (the # column of modelcalls calls)", arg)
}

func runShow(s *Streams, o *showOptions, dirs []string, id, call string) error {
	switch o.raw {
	case "", "both", "request", "response":
	default:
		return usageErrorf("--raw=%s: want --raw, --raw=request or --raw=response", o.raw)
	}
	if err := checkRolloutID("ROLLOUT_ID", id); err != nil {
		return err
	}
	if o.raw != "" && call == "" {
		return usageErrorf("--raw needs a call: show --capture-dir DIR %s CALL_INDEX --raw", id)
	}
	if n, err := strconv.Atoi(call); err == nil && n < 0 {
		return negativeIndexError(call) // given after --
	}
	rc, err := loadRollout(dirs, id)
	if err != nil {
		return err
	}
	for _, d := range rc.shadowed {
		fmt.Fprintf(s.ErrOut, "modelcalls show: rollout %s is also in %s, not shown: it is read from %s, the first --capture-dir that holds it (as merge reads it)\n", id, d, rc.dir)
	}
	w := bufio.NewWriter(s.Out)
	if call == "" {
		for _, orphan := range rc.orphans {
			fmt.Fprintf(s.ErrOut, "modelcalls show: %s\n", orphanNote(id, orphan))
		}
		printRolloutSummary(w, o, id, rc)
	} else {
		r, err := findCall(rc, call)
		if err != nil {
			return err
		}
		if o.raw != "" {
			printRaw(w, r, o.raw)
		} else {
			printCall(w, o, id, r, rc.tokenCaptures[r.CallIndex])
		}
	}
	if err := w.Flush(); err != nil {
		return withExit(ExitFailure, fmt.Errorf("write output: %w", err))
	}
	return nil
}

// minIDPrefix is the shortest leading part of a model_call_id findCall takes for the id.
const minIDPrefix = 6

// findCall picks the call named by a model_call_id, a call_index (all digits), or a leading part
// of a model_call_id (minIDPrefix characters or more, not all digits) that one call's id starts
// with. The id is looked up first: a 32-hex id can be all digits, and no call_index is that long.
func findCall(rc *rolloutCalls, call string) (*modelcalls.ModelCallRecord, error) {
	for i := range rc.records {
		if id := rc.records[i].ModelCallID; id != nil && *id == call {
			return &rc.records[i], nil
		}
	}
	if n, err := strconv.Atoi(call); err == nil && n >= 0 && isDigits(call) {
		for i := range rc.records {
			if rc.records[i].CallIndex == n {
				return &rc.records[i], nil
			}
		}
		for _, d := range rc.damages {
			if d.Index == n {
				return nil, withExit(ExitFailure, fmt.Errorf("call %d: its capture line (line %d) is damaged: %v", n, d.Line, d.Err))
			}
		}
		return nil, withExit(ExitNotFound, fmt.Errorf("call %d: no call with that call_index (the rollout has %s; modelcalls calls lists them)",
			n, plural(len(rc.records), "call", "calls")))
	}
	// A leading part of a model_call_id, as git takes a commit's: the one call whose id starts
	// with it, at least minIDPrefix characters.
	var like []string
	var found *modelcalls.ModelCallRecord
	for i := range rc.records {
		if id := rc.records[i].ModelCallID; id != nil && len(call) >= minIDPrefix && strings.HasPrefix(*id, call) {
			like, found = append(like, *id), &rc.records[i]
		}
	}
	switch {
	case len(like) == 1:
		return found, nil
	case len(like) > 1:
		return nil, withExit(ExitUsage, fmt.Errorf("call %q: the model_call_id of %d calls starts with it (%s); give more of it",
			call, len(like), strings.Join(like, ", ")))
	}
	return nil, withExit(ExitNotFound, fmt.Errorf("call %q: neither a call_index nor a model_call_id of this rollout", call))
}

// printRaw writes the stored request and/or response bytes.
func printRaw(w io.Writer, r *modelcalls.ModelCallRecord, which string) {
	req, reqWhat := []byte(nil), ""
	switch {
	case r.Request != nil:
		req, reqWhat = r.Request, "request (JSON object as captured)"
	case r.RequestRaw != nil:
		req, reqWhat = []byte(r.RequestRaw.Text()), "request_raw (body that was not a JSON object)"
	}
	res, resWhat := []byte(nil), ""
	switch {
	case r.ResponseRaw != nil:
		res, resWhat = []byte(r.ResponseRaw.Text()), "response_raw (body as received)"
	case r.Response != nil:
		res, resWhat = r.Response, "response (JSON object as captured)"
	}
	section := func(what string, b []byte) {
		if which == "both" {
			fmt.Fprintf(w, "── %s ──\n", what)
		}
		if b == nil {
			if which == "both" {
				fmt.Fprintln(w, "(none stored)")
			}
			return
		}
		w.Write(b)
		if !bytes.HasSuffix(b, []byte("\n")) {
			fmt.Fprintln(w)
		}
	}
	if which != "response" {
		section(orDefault(reqWhat, "request"), req)
	}
	if which != "request" {
		section(orDefault(resWhat, "response"), res)
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// rolloutSpan is the earliest started_at and the latest completed_at of the records that have both
// (seconds since the Unix epoch); ok is false when none has.
func rolloutSpan(records []modelcalls.ModelCallRecord) (first, last float64, ok bool) {
	for i := range records {
		r := &records[i]
		if r.StartedAt == nil || r.CompletedAt == nil {
			continue
		}
		if !ok || *r.StartedAt < first {
			first = *r.StartedAt
		}
		if !ok || *r.CompletedAt > last {
			last = *r.CompletedAt
		}
		ok = true
	}
	return first, last, ok
}

// printRolloutSummary writes one screen about the rollout: metrics, then one line per call.
func printRolloutSummary(w io.Writer, o *showOptions, id string, rc *rolloutCalls) {
	m := modelcalls.AggregateRecords(rc.records)
	fmt.Fprintf(w, "rollout %s: %s", id, plural(m.NumCalls, "call", "calls"))
	errs := map[string]int{}
	var errOrder []string
	for i := range rc.records {
		if c := rc.records[i].ErrorCategory; c != nil {
			if errs[*c] == 0 {
				errOrder = append(errOrder, *c)
			}
			errs[*c]++
		}
	}
	if len(errOrder) > 0 {
		parts := make([]string, len(errOrder))
		n := 0
		for i, c := range errOrder {
			parts[i] = fmt.Sprintf("%s %d", c, errs[c])
			n += errs[c]
		}
		fmt.Fprintf(w, ", %s (%s)", plural(n, "error", "errors"), strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "tokens   in %s  out %s  reasoning %s  total %s  cached %s\n",
		i64p(m.TokensIn), i64p(m.TokensOut), i64p(m.TokensReasoning), i64p(m.TokensTotal), i64p(m.CachedTokens))
	fmt.Fprintf(w, "latency  %s ms summed over the calls\n", msp(m.LatencyTotalMS))
	if first, last, ok := rolloutSpan(rc.records); ok {
		ms, perSecond := stats.Elapsed(first, last, m.TokensOut)
		fmt.Fprintf(w, "elapsed  %s ms from the first call's start to the last one's end", strconv.FormatFloat(ms, 'f', 2, 64))
		if perSecond != nil {
			fmt.Fprintf(w, "; output %s tokens/s", strconv.FormatFloat(*perSecond, 'f', 2, 64))
		}
		fmt.Fprintln(w)
	}
	if len(rc.damages) > 0 {
		fmt.Fprintf(w, "damaged  %s skipped (modelcalls calls reports them)\n", plural(len(rc.damages), "capture line", "capture lines"))
	}
	if rc.incomplete {
		fmt.Fprintln(w, "incomplete: a capture write failed, calls may be missing")
	}
	if rc.claims.Live > 0 {
		fmt.Fprintf(w, "pending  %s still in progress\n", plural(rc.claims.Live, "capture write", "capture writes"))
	}
	if len(rc.records) == 0 {
		return
	}
	fmt.Fprintln(w)
	line := func(r *modelcalls.ModelCallRecord) {
		finish := r.FinishReason
		if finish == nil {
			finish = r.ResponseStatus
		}
		extra := toolCallsCell(r.ToolCalls)
		if e := errorCell(r); e != "" {
			extra = strings.TrimSpace("error " + e + "  " + extra)
		}
		if r.ResponseSource != nil && *r.ResponseSource == "local" {
			// Who answered, apart from the error: a replayed run's calls are local and fine.
			extra = strings.TrimSpace(extra + "  [" + sourceCell(r) + "]")
		}
		l := fmt.Sprintf("%4d  %-9s %-24s %3s %-12s in %-6s out %-6s %9s ms  %s",
			r.CallIndex, str(r.Dialect), clip(str(r.Model), 24), intp(r.StatusCode), clip(str(finish), 12),
			i64p(r.TokensIn), i64p(r.TokensOut), msp(r.LatencyTotalMS), extra)
		fmt.Fprintln(w, strings.TrimRight(l, " "))
	}
	n := len(rc.records)
	if o.full || n <= showSummaryCalls {
		for i := range rc.records {
			line(&rc.records[i])
		}
	} else {
		for i := range 5 {
			line(&rc.records[i])
		}
		fmt.Fprintf(w, "      … %d more calls (--full lists all; modelcalls calls shows every column)\n", n-showSummaryCalls)
		for i := n - (showSummaryCalls - 5); i < n; i++ {
			line(&rc.records[i])
		}
	}
	fmt.Fprintf(w, "\none call: %s show --capture-dir %s %s %d\n", commandName(), shellQuote(rc.dir), id, rc.records[n-1].CallIndex)
}

// clip cuts s to n characters with "…".
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// printCall writes one call as a person reads it.
func printCall(w io.Writer, o *showOptions, id string, r *modelcalls.ModelCallRecord, tokenCapture []byte) {
	fmt.Fprintf(w, "rollout %s  call %d  model_call_id %s\n", id, r.CallIndex, str(r.ModelCallID))
	fmt.Fprintf(w, "dialect %s  model %s", str(r.Dialect), str(r.Model))
	if r.ModelRef != nil {
		fmt.Fprintf(w, "  model server %s", r.ModelRef.Name)
	}
	fmt.Fprintln(w)

	req := decodeObject(r.Request)
	res := decodeObject(r.Response)
	cut := func(s string) string {
		if o.full {
			return s
		}
		return cutText(s, showTextLimit)
	}

	heading(w, "request")
	switch {
	case req == nil && r.RequestRaw != nil:
		fmt.Fprintf(w, "not a JSON object (%d bytes; --raw=request prints it)\n", len(r.RequestRaw.Text()))
	case req == nil:
		fmt.Fprintln(w, "not captured")
	default:
		summary := requestView(r.Request)
		if summary.system != "" {
			fmt.Fprintln(w, "system:")
			writeIndented(w, cut(summary.system))
		}
		fmt.Fprintf(w, "messages (%d):\n", len(summary.messages))
		msgs := summary.messages
		skipFrom, skipTo := -1, -1
		if !o.full && len(msgs) > showMessageLimit {
			skipFrom, skipTo = 2, len(msgs)-(showMessageLimit-2)
		}
		for i, m := range msgs {
			if i == skipFrom {
				fmt.Fprintf(w, "  … %d earlier messages (--full shows them)\n", skipTo-skipFrom)
			}
			if i >= skipFrom && i < skipTo {
				continue
			}
			fmt.Fprintf(w, "  [%s]\n", m.role)
			writeIndentedBy(w, cut(m.text), "    ")
		}
		if len(summary.tools) > 0 {
			fmt.Fprintf(w, "tools (%d): %s\n", len(summary.tools), strings.Join(summary.tools, ", "))
		} else {
			fmt.Fprintln(w, "tools: none")
		}
	}

	heading(w, "response")
	switch {
	case res == nil && r.ResponseRaw != nil:
		fmt.Fprintf(w, "no response object; the body as received is %d bytes (--raw=response prints it)\n", len(r.ResponseRaw.Text()))
	case res == nil:
		fmt.Fprintln(w, "none (no body was received)")
	default:
		if text := responseText(r.Response); text != "" {
			fmt.Fprintln(w, "text:")
			writeIndented(w, cut(text))
		} else {
			fmt.Fprintln(w, "text: none")
		}
	}
	if r.ReasoningContent != nil {
		fmt.Fprintln(w, "reasoning:")
		writeIndented(w, cut(*r.ReasoningContent))
	}
	if len(r.ToolCalls) > 0 {
		fmt.Fprintf(w, "tool calls (%d):\n", len(r.ToolCalls))
		for _, c := range r.ToolCalls {
			fmt.Fprintf(w, "  %s", str(c.Name))
			if c.CallID != nil {
				fmt.Fprintf(w, "  (call_id %s)", *c.CallID)
			}
			fmt.Fprintln(w)
			writeIndentedBy(w, cut(string(c.Arguments)), "    ")
		}
	}

	heading(w, "usage")
	printUsage(w, r, res)

	heading(w, "tokens")
	printTokens(w, r, tokenCapture)

	heading(w, "timing")
	if r.StartedAt != nil {
		fmt.Fprintf(w, "started    %s\n", epochTime(*r.StartedAt))
	}
	if r.CompletedAt != nil {
		fmt.Fprintf(w, "completed  %s\n", epochTime(*r.CompletedAt))
	}
	fmt.Fprintf(w, "latency    %s ms (request received to terminal event, end of body or failure)\n", msp(r.LatencyTotalMS))
	fmt.Fprintf(w, "ttft       %s ms (request received to the first body byte from the upstream)\n", msp(r.LatencyTTFTMS))

	heading(w, "status")
	fmt.Fprintf(w, "http       %s", intp(r.StatusCode))
	if r.ResponseSource != nil {
		fmt.Fprintf(w, "  answered by the %s", *r.ResponseSource)
		if *r.ResponseSource == "local" {
			fmt.Fprint(w, " gateway")
			if r.LocalResponseReason != nil {
				fmt.Fprintf(w, " (%s)", *r.LocalResponseReason)
			}
		}
	}
	fmt.Fprintln(w)
	if r.UpstreamStatusCode != nil {
		fmt.Fprintf(w, "upstream   %d\n", *r.UpstreamStatusCode)
	}
	if r.UpstreamAttempted != nil && !*r.UpstreamAttempted {
		fmt.Fprintln(w, "upstream   not called")
	}
	if r.FinishReason != nil {
		fmt.Fprintf(w, "finish     %s\n", *r.FinishReason)
	}
	if r.ResponseStatus != nil {
		fmt.Fprintf(w, "status     %s (response.status)\n", *r.ResponseStatus)
	}
	if r.ClientSessionID != nil {
		fmt.Fprintf(w, "session    %s (client-declared)\n", *r.ClientSessionID)
	}

	heading(w, "error")
	if r.ErrorCategory == nil {
		fmt.Fprintln(w, "none")
	} else {
		fmt.Fprintf(w, "category   %s\n", *r.ErrorCategory)
		if msg := errorMessage(res); msg != "" {
			fmt.Fprintf(w, "message    %s\n", cut(msg))
		}
	}
}

func heading(w io.Writer, name string) {
	fmt.Fprintf(w, "\n── %s %s\n", name, strings.Repeat("─", max(4, 60-len(name))))
}

func writeIndented(w io.Writer, s string) { writeIndentedBy(w, s, "  ") }

func writeIndentedBy(w io.Writer, s, indent string) {
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		fmt.Fprintf(w, "%s%s\n", indent, line)
	}
}

// cutText cuts s to n characters, saying how many were left out.
func cutText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + fmt.Sprintf("… (%d more characters; --full shows all)", len(r)-n)
}

func epochTime(sec float64) string {
	whole, frac := math.Modf(sec)
	t := time.Unix(int64(whole), int64(frac*1e9)).UTC()
	return t.Format("2006-01-02T15:04:05.000Z")
}

// decodeObject decodes a JSON object with numbers kept as json.Number; nil when raw is not one.
func decodeObject(raw json.RawMessage) map[string]any {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil
	}
	return m
}

// JSON accessors on decoded values; each returns the zero value when the shape is not as asked.
func jStr(v any) string         { s, _ := v.(string); return s }
func jObj(v any) map[string]any { m, _ := v.(map[string]any); return m }

// jNum returns a JSON integer and whether v is one.
func jNum(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

type messageView struct{ role, text string }

type requestSummary struct {
	system   string
	messages []messageView
	tools    []string
}

// requestView is a request as the viewer parses it (dialect.ParseRequest, any dialect):
// the system and developer messages it starts with (Messages' system, Responses' instructions, Chat's
// and Responses' leading system/developer messages) joined into the system prompt, every other
// message a role and its text, in order, and the names of the tools it offers. A tool message that
// only answers one call is labelled "tool result <call id>".
func requestView(req []byte) requestSummary {
	msgs, tools := dialect.ParseRequest(req)
	var v requestSummary
	var system []string
	for _, m := range msgs {
		text := partsText(m.Parts)
		if (m.Role == "system" || m.Role == "developer") && len(v.messages) == 0 {
			system = append(system, text)
			continue
		}
		label := m.Role
		if p := m.Parts; m.Role == "tool" && len(p) == 1 && p[0].Kind == "tool_result" {
			label, text = "tool result "+p[0].CallID, p[0].Text
		}
		v.messages = append(v.messages, messageView{label, text})
	}
	v.system = strings.TrimSpace(strings.Join(system, "\n"))
	for _, name := range tools {
		if name != "" {
			v.tools = append(v.tools, name)
		}
	}
	return v
}

// partsText renders the parts of a message, one line or more each: text as is, reasoning as
// "(thinking) ...", tool calls as "→ tool call NAME ARGUMENTS", tool results as
// "← tool result CALL_ID: TEXT", images, files and unknown blocks as a [TYPE] placeholder.
func partsText(parts []dialect.Part) string {
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		switch p.Kind {
		case "text":
			out = append(out, p.Text)
		case "reasoning":
			out = append(out, "(thinking) "+p.Text)
		case "tool_call":
			out = append(out, "→ tool call "+p.Name+" "+p.Arguments)
		case "tool_result":
			out = append(out, "← tool result "+p.CallID+": "+p.Text)
		default: // image, other
			out = append(out, "["+orDefault(p.Name, p.Kind)+"]")
		}
	}
	return strings.Join(out, "\n")
}

// responseText is the answer text of a response object as the viewer parses it
// (dialect.ParseResponse): the text parts of Chat's choices[].message, of Responses' output message
// items, of Messages' content blocks and of Gemini's candidates.
func responseText(res []byte) string {
	msgs, _ := dialect.ParseResponse(res)
	var out []string
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Kind == "text" {
				out = append(out, p.Text)
			}
		}
	}
	return strings.Join(out, "\n")
}

// errorMessage is error.message of an error body (every dialect uses that shape), or the
// Responses API's incomplete_details.reason.
func errorMessage(res map[string]any) string {
	if res == nil {
		return ""
	}
	if e := jObj(res["error"]); e != nil {
		msg := jStr(e["message"])
		if t := jStr(e["type"]); t != "" {
			msg = t + ": " + msg
		}
		return msg
	}
	if d := jObj(res["incomplete_details"]); d != nil {
		return "incomplete: " + jStr(d["reason"])
	}
	return ""
}

// printUsage writes the record's token numbers with the usage field each came from, following the
// rules of modelcalls.ExtractTokenStats and of the record's cache_hit / cached_tokens.
func printUsage(w io.Writer, r *modelcalls.ModelCallRecord, res map[string]any) {
	usage := jObj(res["usage"])
	if meta := jObj(res["usageMetadata"]); usage == nil && meta != nil {
		printGeminiUsage(w, r, meta)
		return
	}
	if usage == nil {
		fmt.Fprintln(w, "no usage object in the response: every token count is unknown (null), not 0")
	}
	field := func(obj map[string]any, names ...string) (string, int64, bool) {
		for _, n := range names {
			if v, ok := jNum(obj[n]); ok {
				return n, v, true
			}
		}
		return "", 0, false
	}
	detail := func(groups []string, names ...string) (string, int64, bool) {
		for _, g := range groups {
			if n, v, ok := field(jObj(usage[g]), names...); ok {
				return "usage." + g + "." + n, v, true
			}
		}
		return "", 0, false
	}
	row := func(name, value, source string) {
		fmt.Fprintf(w, "%-22s %8s  %s\n", name, value, source)
	}
	if usage == nil {
		return
	}

	inName, inVal, inOK := field(usage, "input_tokens", "prompt_tokens")
	_, _, hasSubset := detail([]string{"prompt_tokens_details", "input_tokens_details"}, "cached_tokens", "cached_input_tokens")
	read, haveRead := jNum(usage["cache_read_input_tokens"])
	creation, haveCreation := jNum(usage["cache_creation_input_tokens"])
	inSource := "unknown: no input_tokens or prompt_tokens"
	if inOK {
		inSource = fmt.Sprintf("usage.%s", inName)
	}
	folded := (haveRead || haveCreation) && inName != "prompt_tokens" && !hasSubset && (inOK || read+creation > 0)
	if folded && read+creation == 0 {
		folded = false // nothing to add; no need to explain the fold
		inSource += " (cache_read_input_tokens and cache_creation_input_tokens are 0)"
	}
	if folded {
		inSource = fmt.Sprintf("usage.input_tokens %d + cache_read_input_tokens %d + cache_creation_input_tokens %d (the Anthropic cache fold, below)", inVal, read, creation)
	}
	row("tokens_in", i64p(r.TokensIn), inSource)

	outSource := "unknown: no output_tokens or completion_tokens"
	if n, _, ok := field(usage, "output_tokens", "completion_tokens"); ok {
		outSource = "usage." + n
	}
	row("tokens_out", i64p(r.TokensOut), outSource)

	reasonSource := "unknown: no reasoning count in the usage (not the same as 0)"
	if n, _, ok := detail([]string{"output_tokens_details", "completion_tokens_details"}, "reasoning_tokens"); ok {
		reasonSource = n + " (part of tokens_out)"
	} else if _, ok := jNum(usage["reasoning_output_tokens"]); ok {
		reasonSource = "usage.reasoning_output_tokens (part of tokens_out)"
	} else if n, _, ok := detail([]string{"output_tokens_details"}, "thinking_tokens"); ok {
		reasonSource = n + " (part of tokens_out)"
	}
	row("tokens_reasoning", i64p(r.TokensReasoning), reasonSource)

	totalSource := "unknown: needs tokens_in and tokens_out"
	if _, ok := jNum(usage["total_tokens"]); ok {
		totalSource = "usage.total_tokens as reported"
	} else if r.TokensTotal != nil {
		totalSource = "tokens_in + tokens_out (the usage has no total_tokens)"
	}
	row("tokens_total", i64p(r.TokensTotal), totalSource)

	cachedSource := "unknown: the usage has no cache field (cache_hit is null)"
	if n, _, ok := detail([]string{"prompt_tokens_details", "input_tokens_details"}, "cached_tokens", "cached_input_tokens"); ok {
		cachedSource = n + " (a subset of tokens_in)"
	} else if haveRead {
		cachedSource = "usage.cache_read_input_tokens"
	} else if _, ok := jNum(usage["cached_input_tokens"]); ok {
		cachedSource = "usage.cached_input_tokens"
	}
	if r.CacheHit != nil {
		cachedSource += "; cache_hit " + strconv.FormatBool(*r.CacheHit) + " (true when cached_tokens > 0)"
	}
	row("cached_tokens", i64p(r.CachedTokens), cachedSource)
	if haveCreation {
		row("cache_creation_tokens", i64p(r.CacheCreationTokens), "usage.cache_creation_input_tokens (tokens written to the cache)")
	}
	if folded {
		fmt.Fprintln(w, "\nThe Anthropic cache fold: Anthropic's input_tokens counts only the prompt tokens after the last")
		fmt.Fprintln(w, "cache breakpoint; tokens read from the cache (cache_read_input_tokens) and written to it")
		fmt.Fprintln(w, "(cache_creation_input_tokens) are reported apart. tokens_in adds the three, so it is the whole")
		fmt.Fprintln(w, "prompt, as OpenAI's prompt_tokens is; cached_tokens is the part read from the cache.")
	} else if (haveRead || haveCreation) && (inName == "prompt_tokens" || hasSubset) {
		fmt.Fprintln(w, "\nThe cache fields are not added to tokens_in: the usage is OpenAI-shaped (prompt_tokens or a")
		fmt.Fprintln(w, "cached_tokens subset), whose prompt count already includes the cached tokens.")
	}
}

// printGeminiUsage is printUsage for Gemini's usageMetadata, whose thoughts are counted beside the
// candidates: tokens_out adds the two, so that it includes tokens_reasoning as for the other
// dialects.
func printGeminiUsage(w io.Writer, r *modelcalls.ModelCallRecord, meta map[string]any) {
	row := func(name, value, source string) {
		fmt.Fprintf(w, "%-22s %8s  %s\n", name, value, source)
	}
	have := func(k string) bool { _, ok := jNum(meta[k]); return ok }
	inSource := "unknown: no promptTokenCount"
	if have("promptTokenCount") {
		inSource = "usageMetadata.promptTokenCount"
		if have("toolUsePromptTokenCount") {
			inSource += " + toolUsePromptTokenCount"
		}
	}
	row("tokens_in", i64p(r.TokensIn), inSource)
	outSource := "unknown: no candidatesTokenCount or thoughtsTokenCount"
	switch {
	case have("candidatesTokenCount") && have("thoughtsTokenCount"):
		outSource = "usageMetadata.candidatesTokenCount + thoughtsTokenCount (Gemini counts thoughts apart)"
	case have("candidatesTokenCount"):
		outSource = "usageMetadata.candidatesTokenCount"
	case have("thoughtsTokenCount"):
		outSource = "usageMetadata.thoughtsTokenCount"
	}
	row("tokens_out", i64p(r.TokensOut), outSource)
	reasonSource := "unknown: no thoughtsTokenCount (not the same as 0)"
	if have("thoughtsTokenCount") {
		reasonSource = "usageMetadata.thoughtsTokenCount (part of tokens_out)"
	}
	row("tokens_reasoning", i64p(r.TokensReasoning), reasonSource)
	totalSource := "unknown: needs tokens_in and tokens_out"
	if have("totalTokenCount") {
		totalSource = "usageMetadata.totalTokenCount as reported"
	} else if r.TokensTotal != nil {
		totalSource = "tokens_in + tokens_out (no totalTokenCount)"
	}
	row("tokens_total", i64p(r.TokensTotal), totalSource)
	cachedSource := "unknown: no cachedContentTokenCount (cache_hit is null)"
	if have("cachedContentTokenCount") {
		cachedSource = "usageMetadata.cachedContentTokenCount (a subset of tokens_in)"
	}
	if r.CacheHit != nil {
		cachedSource += "; cache_hit " + strconv.FormatBool(*r.CacheHit) + " (true when cached_tokens > 0)"
	}
	row("cached_tokens", i64p(r.CachedTokens), cachedSource)
}
