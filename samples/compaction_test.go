package samples

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/lineage"
)

// A scripted conversation rendered into each dialect's request and response objects, so the
// samples of a chain crossing compactions are checked on Chat, Responses and Messages alike.

// msg is one message of a scripted conversation: role system, user, assistant or tool; an
// assistant message has text or one tool call (call: its id, name "read", args); a tool message
// answers call.
type msg struct {
	role, text, call, args string
}

func sysMsg(t string) msg  { return msg{role: "system", text: t} }
func userMsg(t string) msg { return msg{role: "user", text: t} }
func say(t string) msg     { return msg{role: "assistant", text: t} }
func readCall(id, path string) msg {
	return msg{role: "assistant", call: id, args: `{"path":"` + path + `"}`}
}
func readResult(id, out string) msg { return msg{role: "tool", call: id, text: out} }

type o = map[string]any

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// request renders a history as a request of dialect d; tools false sends no tools (a summary
// request).
func request(d string, history []msg, tools bool) []byte {
	r := o{"model": "m"}
	var list []any
	switch d {
	case "chat":
		var msgs []any
		for _, m := range history {
			switch {
			case m.role == "assistant" && m.call != "":
				msgs = append(msgs, o{"role": "assistant", "content": nil, "tool_calls": []any{o{"id": m.call, "type": "function", "function": o{"name": "read", "arguments": m.args}}}})
			case m.role == "tool":
				msgs = append(msgs, o{"role": "tool", "tool_call_id": m.call, "content": m.text})
			default:
				msgs = append(msgs, o{"role": m.role, "content": m.text})
			}
		}
		r["messages"] = msgs
		list = []any{o{"type": "function", "function": o{"name": "read", "parameters": o{"type": "object"}}}}
	case "responses":
		var input []any
		for _, m := range history {
			switch {
			case m.role == "system":
				r["instructions"] = m.text
			case m.role == "assistant" && m.call != "":
				input = append(input, o{"type": "function_call", "call_id": m.call, "name": "read", "arguments": m.args})
			case m.role == "assistant":
				input = append(input, o{"type": "message", "role": "assistant", "content": []any{o{"type": "output_text", "text": m.text}}})
			case m.role == "tool":
				input = append(input, o{"type": "function_call_output", "call_id": m.call, "output": m.text})
			default:
				input = append(input, o{"type": "message", "role": "user", "content": []any{o{"type": "input_text", "text": m.text}}})
			}
		}
		r["input"] = input
		list = []any{o{"type": "function", "name": "read", "parameters": o{"type": "object"}}}
	case "messages":
		var msgs []any
		for _, m := range history {
			switch {
			case m.role == "system":
				r["system"] = m.text
			case m.role == "assistant":
				msgs = append(msgs, o{"role": "assistant", "content": messagesContent(m)})
			case m.role == "tool":
				msgs = append(msgs, o{"role": "user", "content": []any{o{"type": "tool_result", "tool_use_id": m.call, "content": m.text}}})
			default:
				msgs = append(msgs, o{"role": "user", "content": []any{o{"type": "text", "text": m.text}}})
			}
		}
		r["messages"], r["max_tokens"] = msgs, 1024
		list = []any{o{"name": "read", "input_schema": o{"type": "object"}}}
	}
	if tools {
		r["tools"] = list
	}
	return mustMarshal(r)
}

func messagesContent(m msg) []any {
	if m.call != "" {
		var in any
		json.Unmarshal([]byte(m.args), &in)
		return []any{o{"type": "tool_use", "id": m.call, "name": "read", "input": in}}
	}
	return []any{o{"type": "text", "text": m.text}}
}

// response renders an answer of dialect d.
func response(d string, n int, a msg) []byte {
	switch d {
	case "chat":
		m := o{"role": "assistant", "content": a.text}
		if a.call != "" {
			m = o{"role": "assistant", "content": nil, "tool_calls": []any{o{"id": a.call, "type": "function", "function": o{"name": "read", "arguments": a.args}}}}
		}
		return mustMarshal(o{"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "choices": []any{o{"index": 0, "message": m, "finish_reason": "stop"}}})
	case "responses":
		item := o{"type": "message", "role": "assistant", "content": []any{o{"type": "output_text", "text": a.text}}}
		if a.call != "" {
			item = o{"type": "function_call", "call_id": a.call, "name": "read", "arguments": a.args}
		}
		return mustMarshal(o{"id": fmt.Sprintf("resp_%d", n), "object": "response", "status": "completed", "output": []any{item}})
	default:
		return mustMarshal(o{"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "content": messagesContent(a), "stop_reason": "end_turn"})
	}
}

// scriptedCall is one call of a scripted rollout: the history sent, the answer, whether tools are
// offered, and token ids (prompt, generated).
type scriptedCall struct {
	history        []msg
	answer         msg
	noTools        bool
	prompt, output []int64
}

func renderCalls(d string, script []scriptedCall) []lineage.Call {
	calls := make([]lineage.Call, len(script))
	for i, s := range script {
		calls[i] = lineage.Call{ID: fmt.Sprintf("c%d", i), Index: i, Dialect: d, Completed: true,
			Request: request(d, s.history, !s.noTools), Response: response(d, i, s.answer),
			Tokens: &lineage.TokenIDs{Prompt: s.prompt, Generated: s.output}}
		var id struct{ ID string }
		json.Unmarshal(calls[i].Response, &id)
		calls[i].ResponseID = id.ID
	}
	return calls
}

const (
	summary1 = "Summary so far: the user asked to read a.txt, which says hello; the next step is reading b.txt."
	summary2 = "Summary so far: a.txt says hello and b.txt says world; the user may now ask about either file."
)

// compactedOnce: a tool round trip, a summary request without tools, then the conversation goes on
// from the summary with another tool round trip.
var compactedOnce = []scriptedCall{
	{history: []msg{sysMsg("S"), userMsg("read a.txt")}, answer: readCall("call_1", "a.txt"), prompt: []int64{1, 2}, output: []int64{3}},
	{history: []msg{sysMsg("S"), userMsg("read a.txt"), readCall("call_1", "a.txt"), readResult("call_1", "hello"), userMsg("Summarize the conversation.")},
		answer: say(summary1), noTools: true, prompt: []int64{1, 2, 3, 4, 5}, output: []int64{6, 7}},
	{history: []msg{sysMsg("S"), userMsg("Earlier work, summarized: " + summary1), userMsg("read b.txt")}, answer: readCall("call_2", "b.txt"),
		prompt: []int64{1, 8, 6, 7, 9}, output: []int64{10}},
	{history: []msg{sysMsg("S"), userMsg("Earlier work, summarized: " + summary1), userMsg("read b.txt"), readCall("call_2", "b.txt"), readResult("call_2", "world")},
		answer: say("b.txt says world"), prompt: []int64{1, 8, 6, 7, 9, 10, 11}, output: []int64{12}},
}

// compactedTwice: compactedOnce, then a second summary request and one more prompt after it.
var compactedTwice = append(slices.Clone(compactedOnce[:3]),
	scriptedCall{history: []msg{sysMsg("S"), userMsg("Earlier work, summarized: " + summary1), userMsg("read b.txt"), readCall("call_2", "b.txt"), readResult("call_2", "world"), userMsg("Summarize the conversation.")},
		answer: say(summary2), noTools: true, prompt: []int64{1, 8, 6, 7, 9, 10, 11, 5}, output: []int64{13}},
	scriptedCall{history: []msg{sysMsg("S"), userMsg("Earlier work, summarized: " + summary2), userMsg("what did they say?")},
		answer: say("hello and world"), prompt: []int64{1, 8, 13, 14}, output: []int64{15}},
)

// TestSamplesAcrossCompactions: a main chain crossing one or two compactions is exported in
// segments split at each compaction: an sft line per segment (the summary request's ending the
// segment before it), token rows split with the reason "compaction", transitions with the relation
// and parent; every generation trained once, summaries too unless they are context only.
func TestSamplesAcrossCompactions(t *testing.T) {
	cases := []struct {
		name   string
		script []scriptedCall
		// lines: per sft line, its assistant turns as text=weight (a tool call as its id);
		// context: the same with summaries as context only.
		lines, context []string
		rows           [][]string // the calls glued into each token row
		mask           [][]int32  // each row's loss mask
		compactions    []int      // the calls that are a compaction of the call before
	}{
		{
			name:    "one compaction",
			script:  compactedOnce,
			lines:   []string{"call_1=1 S1=1", "call_2=1 b.txt says world=1"},
			context: []string{"call_1=1 S1=0", "call_2=1 b.txt says world=1"},
			rows:    [][]string{{"c0", "c1"}, {"c2", "c3"}},
			mask:    [][]int32{{0, 0, 1, 0, 0, 1, 1}, {0, 0, 0, 0, 0, 1, 0, 1}},
			// compaction: c2 of c1
			compactions: []int{2},
		},
		{
			name:        "two compactions",
			script:      compactedTwice,
			lines:       []string{"call_1=1 S1=1", "call_2=1 S2=1", "hello and world=1"},
			context:     []string{"call_1=1 S1=0", "call_2=1 S2=0", "hello and world=1"},
			rows:        [][]string{{"c0", "c1"}, {"c2", "c3"}, {"c4"}},
			mask:        [][]int32{{0, 0, 1, 0, 0, 1, 1}, {0, 0, 0, 0, 0, 1, 0, 0, 1}, {0, 0, 0, 0, 1}},
			compactions: []int{2, 4},
		},
	}
	short := strings.NewReplacer(summary1, "S1", summary2, "S2")
	for _, d := range []string{"chat", "responses", "messages"} {
		for _, tc := range cases {
			t.Run(d+"/"+tc.name, func(t *testing.T) {
				calls := renderCalls(d, tc.script)
				l := lineage.Derive(calls)
				if len(l.MainChain) != len(calls) || l.Summary.OffMainChain != 0 {
					t.Fatalf("main chain %v, want every call", l.MainChain)
				}
				for _, opt := range []Options{{}, {ContextOnlySummaries: true}} {
					lines, err := SFT(calls, l, opt)
					if err != nil {
						t.Fatal(err)
					}
					var got []string
					for _, line := range lines {
						if err := ValidateSFT(line); err != nil {
							t.Fatalf("%+v: invalid line: %v", opt, err)
						}
						if len(line.Tools) != 1 {
							t.Errorf("%+v: tools %s, want the conversation's read tool", opt, line.Tools)
						}
						var turns []string
						for _, m := range line.Messages {
							if m.Role != "assistant" {
								continue
							}
							s := ""
							if m.Content != nil {
								s = short.Replace(*m.Content)
							}
							for _, tc := range m.ToolCalls {
								s += tc.ID
							}
							turns = append(turns, fmt.Sprintf("%s=%d", s, *m.Weight))
						}
						got = append(got, strings.Join(turns, " "))
					}
					want := tc.lines
					if opt.ContextOnlySummaries {
						want = tc.context
					}
					if !slices.Equal(got, want) {
						t.Errorf("%+v: sft lines %q, want %q", opt, got, want)
					}

					rows := TokenRows("r", nil, calls, l, opt)
					if len(rows) != len(tc.rows) {
						t.Fatalf("%+v: %d token rows, want %d: %+v", opt, len(rows), len(tc.rows), rows)
					}
					for k, r := range rows {
						wantReason := ""
						if k > 0 {
							wantReason = SplitCompaction
						}
						mask := slices.Clone(tc.mask[k])
						if opt.ContextOnlySummaries && k < len(rows)-1 { // the row's last call wrote a summary
							for p := r.GenerationStarts[len(r.GenerationStarts)-1]; p < r.Ends[len(r.Ends)-1]; p++ {
								mask[p] = 0
							}
						}
						if r.Segment != k || r.SplitReason != wantReason || !slices.Equal(r.ModelCallIDs, tc.rows[k]) || !slices.Equal(r.LossMask, mask) {
							t.Errorf("%+v: row %d: segment %d %q calls %v mask %v, want %q %v %v", opt, k, r.Segment, r.SplitReason, r.ModelCallIDs, r.LossMask,
								wantReason, tc.rows[k], mask)
						}
					}
				}

				for i, tr := range Transitions("r", nil, calls, l) {
					wantRel := string(lineage.RelationExtends)
					switch {
					case i == 0:
						wantRel = string(lineage.RelationRoot)
					case slices.Contains(tc.compactions, i):
						wantRel = string(lineage.RelationCompaction)
					}
					if tr.Relation != wantRel || !tr.MainChain || i > 0 && (tr.ParentCallID == nil || *tr.ParentCallID != calls[i-1].ID) {
						t.Errorf("transition %d: %s of %v main %v, want %s of %s on the main chain", i, tr.Relation, tr.ParentCallID, tr.MainChain, wantRel, calls[max(i-1, 0)].ID)
					}
				}
			})
		}
	}
}

// TestSFTPathsRealCompaction: with every path, Claude Code's compacted rollout adds no line to its
// main chain's two: the one other path (the first prompt's two calls) holds only generations the
// main chain's lines train already.
func TestSFTPathsRealCompaction(t *testing.T) {
	calls, l := readRollout(t, "e2e-scripted-claude-code-compact")
	main, err := SFT(calls, l, Options{})
	if err != nil {
		t.Fatal(err)
	}
	all, err := SFTPaths(calls, l, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(main) != 2 || len(all) != 2 {
		t.Errorf("%d main-chain lines and %d lines of every path, want 2 and 2", len(main), len(all))
	}
	if leaves := l.Leaves(); fmt.Sprint(leaves) != "[1 4]" {
		t.Errorf("leaves %v, want the first prompt's answer and the last call", leaves)
	}
}
