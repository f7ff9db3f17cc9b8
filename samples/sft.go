// Package samples turns a rollout's calls and their lineage (package lineage) into training
// samples a trainer reads:
//
//   - SFT: one line per segment of the main chain (the chain split at each compaction) in the
//     OpenAI chat fine-tuning shape ({"messages", "tools"}), assistant turns the model wrote with
//     weight 1 and those the client wrote with weight 0;
//   - TokenRows: the main chain as token ids with a loss mask and the rollout's log probabilities,
//     split at each compaction and where the token-prefix audit fails;
//   - Transitions: one row per call.
//
// docs/lineage.md describes each schema and rule.
package samples

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcalls/modelcalls/lineage"
)

// SFTLine is one line of the chat fine-tuning format: the messages of a conversation and the
// function tools it offered.
type SFTLine struct {
	Messages []SFTMessage      `json:"messages"`
	Tools    []json.RawMessage `json:"tools,omitempty"`
}

// SFTMessage is one message: role system, user, assistant or tool. An assistant message has
// content, tool calls or both, and a weight (1: train on it, 0: context only); a tool message
// answers one tool call by its id.
type SFTMessage struct {
	Role       string        `json:"role"`
	Content    *string       `json:"content,omitempty"`
	ToolCalls  []SFTToolCall `json:"tool_calls,omitempty"`
	ToolCallID string        `json:"tool_call_id,omitempty"`
	Weight     *int          `json:"weight,omitempty"`
}

// SFTToolCall is one function call of an assistant message; Arguments is JSON text.
type SFTToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Options choose what samples train. The zero value trains every generation once.
type Options struct {
	// ContextOnlySummaries makes a compaction summary (the answer of a call that a compaction
	// continues from: the model writing the summary the next history holds) context only: weight
	// 0 in SFT lines, loss mask 0 in token rows. By default a summary is trained like any other
	// generation of the conversation.
	ContextOnlySummaries bool
}

// summaryCalls returns the ids of the calls a compaction continues from (their answer is a
// summary).
func summaryCalls(l *lineage.Lineage) map[string]bool {
	out := map[string]bool{}
	for i := range l.Calls {
		if n := &l.Calls[i]; n.Relation == lineage.RelationCompaction && n.ParentCallID != nil {
			out[*n.ParentCallID] = true
		}
	}
	return out
}

// ErrNoMainChain is returned by SFT for a rollout whose lineage has no main chain (no call
// completed).
var ErrNoMainChain = errors.New("samples: no main chain (no call completed)")

// SFT returns the main chain of a rollout as fine-tuning lines, one per segment
// (lineage.Segments: the chain split at each compaction), first segment first: the conversation
// the segment's last call saw, then its answer. Each assistant turn gets weight 1 when the model
// wrote it (lineage's author) and the turn's generation has not already been given weight 1 in an
// earlier line or earlier in this one, else 0; a compaction summary is weight 0 when
// opt.ContextOnlySummaries. A segment left with nothing to train is dropped, unless no segment
// has anything: then the last is returned alone (ValidateSFT rejects it). Reasoning, images and
// other non-text parts are left out (the format has no place for them). calls and l are one
// rollout's calls and their lineage (lineage.Derive(calls)).
//
// A chain whose calls continue stored responses (Responses previous_response_id) sends only new
// input per call; the conversation is then rebuilt by appending each call's answer and the next
// call's input.
func SFT(calls []lineage.Call, l *lineage.Lineage, opt Options) ([]*SFTLine, error) {
	chain := chainCalls(l)
	if len(chain) == 0 {
		return nil, ErrNoMainChain
	}
	lines, last := sftChain(calls, l, chain, opt.trained(l))
	if len(lines) == 0 {
		lines = []*SFTLine{last}
	}
	return lines, nil
}

// trained returns the start of a rollout's set of trained generations: empty, or the summaries
// when they are context only.
func (o Options) trained(l *lineage.Lineage) map[string]bool {
	if o.ContextOnlySummaries {
		return summaryCalls(l)
	}
	return map[string]bool{}
}

// sftChain returns the lines of a chain's segments that have something to train, and the last
// segment's line whatever it holds.
func sftChain(calls []lineage.Call, l *lineage.Lineage, chain []int, trained map[string]bool) (lines []*SFTLine, last *SFTLine) {
	for _, seg := range l.Segments(chain) {
		last = SFTPath(calls, l, seg, trained)
		if hasWeight(last) {
			lines = append(lines, last)
		}
	}
	return lines, last
}

// SFTPaths returns the lines of every path of a rollout: the main chain's first (SFT), then the
// path of each other leaf (lineage.Leaves: abandoned branches, resampled answers, side calls) in
// capture order, each split at its compactions as the main chain is. A generation is trained once
// across the lines: a model turn already given weight 1 in an earlier line has weight 0 in later
// ones, and a line left with nothing to train is dropped.
func SFTPaths(calls []lineage.Call, l *lineage.Lineage, opt Options) ([]*SFTLine, error) {
	main := chainCalls(l)
	if len(main) == 0 {
		return nil, ErrNoMainChain
	}
	trained := opt.trained(l)
	out, last := sftChain(calls, l, main, trained)
	if len(out) == 0 {
		out = []*SFTLine{last}
	}
	for _, leaf := range l.Leaves() {
		if leaf == main[len(main)-1] {
			continue
		}
		lines, _ := sftChain(calls, l, l.ChainTo(leaf), trained)
		out = append(out, lines...)
	}
	return out, nil
}

func hasWeight(l *SFTLine) bool {
	for _, m := range l.Messages {
		if m.Weight != nil && *m.Weight == 1 {
			return true
		}
	}
	return false
}

// SFTPath returns the line of one chain segment (positions in l.Calls, first call first, as
// lineage.Segments gives them: no compaction inside; given a chain across a compaction, the line
// is the last segment's conversation); trained holds the calls whose generation already has
// weight 1 and gets this line's added. The line's tools are those of the segment's last call that
// offered any (a summary request ending a segment may offer none, its conversation's calls still
// used them).
func SFTPath(calls []lineage.Call, l *lineage.Lineage, chain []int, trained map[string]bool) *SFTLine {
	type authored struct {
		msg  lineage.Message
		from string // the call that answered it; "" for the client's
	}
	var conv []authored
	var prevAnswer []lineage.Message
	var prevID string
	var tools json.RawMessage
	// A call that does not continue a stored response resends its whole history, which starts the
	// conversation over: the chain is read from the last such call on (reading each call's context
	// would cost the chain's length times its history).
	start := len(chain) - 1
	for start > 0 && lineage.UsesPreviousResponse(&calls[chain[start]]) {
		start--
	}
	for k, i := range chain[start:] {
		k += start
		ctx, _, answer := lineage.Conversation(&calls[i])
		if k > 0 && lineage.UsesPreviousResponse(&calls[i]) {
			for _, m := range prevAnswer {
				conv = append(conv, authored{m, prevID})
			}
		} else {
			conv = conv[:0]
		}
		for j, m := range ctx {
			a := authored{msg: m}
			if j < len(l.Calls[i].Messages) && l.Calls[i].Messages[j].Author == lineage.AuthorModel {
				a.from = l.Calls[i].Messages[j].FromCallID
			}
			conv = append(conv, a)
		}
		prevAnswer, prevID = answer, calls[i].ID
		if t := rawTools(calls[i].Request); t != nil { // a summary request may offer none
			tools = t
		}
	}
	for _, m := range prevAnswer {
		conv = append(conv, authored{m, prevID})
	}
	// The tools are the last offered along the chain, also before the calls read above (a request
	// without the text "tools" offers none: most are passed over without decoding them).
	for k := start - 1; k >= 0 && tools == nil; k-- {
		if req := calls[chain[k]].Request; bytes.Contains(req, []byte(`"tools"`)) {
			tools = rawTools(req)
		}
	}

	line := &SFTLine{Messages: []SFTMessage{}}
	for i := 0; i < len(conv); {
		m := conv[i].msg
		switch m.Role {
		case "assistant":
			j := i
			for j < len(conv) && conv[j].msg.Role == "assistant" {
				j++
			}
			var msgs []lineage.Message
			for _, a := range conv[i:j] {
				msgs = append(msgs, a.msg)
			}
			out := assistantMessage(msgs, len(line.Messages))
			w := 0
			if from := conv[i].from; from != "" && !trained[from] {
				w = 1
				trained[from] = true
			}
			out.Weight = &w
			if out.Content != nil || len(out.ToolCalls) > 0 {
				line.Messages = append(line.Messages, out)
			}
			i = j
			continue
		case "system", "developer":
			if t := texts(m.Parts); t != "" {
				line.Messages = append(line.Messages, SFTMessage{Role: "system", Content: &t})
			}
		default: // user, tool: tool results become tool messages, text a user message
			for _, p := range m.Parts {
				if p.Kind == "tool_result" {
					t := p.Text
					line.Messages = append(line.Messages, SFTMessage{Role: "tool", ToolCallID: p.CallID, Content: &t})
				}
			}
			if t := texts(m.Parts); t != "" {
				line.Messages = append(line.Messages, SFTMessage{Role: "user", Content: &t})
			}
		}
		i++
	}
	if len(tools) > 0 {
		var list []json.RawMessage
		json.Unmarshal(tools, &list)
		line.Tools = list
	}
	return line
}

// chainCalls returns the positions of the main chain's calls in l.Calls.
func chainCalls(l *lineage.Lineage) []int {
	pos := make(map[string]int, len(l.Calls))
	for i := range l.Calls {
		pos[l.Calls[i].CallID] = i
	}
	out := make([]int, 0, len(l.MainChain))
	for _, id := range l.MainChain {
		out = append(out, pos[id])
	}
	return out
}

// assistantMessage turns an assistant turn into one message: its texts joined, its tool calls (a
// call without an id gets call_<message index>_<n>).
func assistantMessage(msgs []lineage.Message, index int) SFTMessage {
	out := SFTMessage{Role: "assistant"}
	var b strings.Builder
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch p.Kind {
			case "text":
				b.WriteString(p.Text)
			case "tool_call":
				var tc SFTToolCall
				tc.ID, tc.Type = p.CallID, "function"
				if tc.ID == "" {
					tc.ID = fmt.Sprintf("call_%d_%d", index, len(out.ToolCalls))
				}
				tc.Function.Name, tc.Function.Arguments = p.Name, p.Arguments
				if strings.TrimSpace(tc.Function.Arguments) == "" {
					tc.Function.Arguments = "{}"
				}
				out.ToolCalls = append(out.ToolCalls, tc)
			}
		}
	}
	if t := b.String(); t != "" {
		out.Content = &t
	}
	return out
}

// texts joins the text parts of a message with newlines.
func texts(parts []lineage.Part) string {
	var ts []string
	for _, p := range parts {
		if p.Kind == "text" && p.Text != "" {
			ts = append(ts, p.Text)
		}
	}
	return strings.Join(ts, "\n")
}

// rawTools returns a request's function tools in the Chat Completions form
// {"type":"function","function":{"name","description","parameters"}}: Chat tools as sent,
// Responses function tools ({"type":"function","name",...}) and Anthropic tools ({"name",
// "description","input_schema"}) rewritten. Built-in tools (web search, code execution, ...) have
// no function form and are left out. nil when the request offers none.
func rawTools(req []byte) json.RawMessage {
	var r struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(req, &r) != nil || len(r.Tools) == 0 {
		return nil
	}
	var out []any
	for _, t := range r.Tools {
		var typ string
		json.Unmarshal(t["type"], &typ)
		switch {
		case t["function"] != nil:
			out = append(out, map[string]any{"type": "function", "function": t["function"]})
		case t["input_schema"] != nil && (typ == "" || typ == "custom"):
			fn := map[string]any{"name": t["name"], "parameters": t["input_schema"]}
			if d := t["description"]; d != nil {
				fn["description"] = d
			}
			out = append(out, map[string]any{"type": "function", "function": fn})
		case typ == "function" && t["name"] != nil:
			fn := map[string]any{"name": t["name"]}
			if d := t["description"]; d != nil {
				fn["description"] = d
			}
			if p := t["parameters"]; p != nil {
				fn["parameters"] = p
			}
			out = append(out, map[string]any{"type": "function", "function": fn})
		}
	}
	if len(out) == 0 {
		return nil
	}
	b, _ := json.Marshal(out)
	return b
}

// ValidateSFT checks a line against the chat fine-tuning rules (docs/lineage.md, "sft"):
//
//  1. messages is not empty; roles are system, user, assistant or tool;
//  2. system and user messages have non-empty string content;
//  3. an assistant message has content, tool calls or both, and a weight of 0 or 1; no other
//     message has a weight; at least one assistant message has weight 1;
//  4. each tool call has an id unique in the line, type "function", a name, and arguments that are
//     JSON text;
//  5. each tool message answers, by tool_call_id, a tool call of the latest assistant message
//     before it that no earlier tool message answered, and every tool call of an assistant message
//     is answered before the next user or assistant message (or the end);
//  6. each tool is {"type":"function","function":{"name",...}} with a name.
func ValidateSFT(l *SFTLine) error {
	if len(l.Messages) == 0 {
		return errors.New("no messages")
	}
	ids := map[string]bool{}
	open := map[string]bool{} // tool calls of the latest assistant message not yet answered
	trainable := false
	closeTurn := func(i int) error {
		for id := range open {
			return fmt.Errorf("message %d: tool call %q has no tool message", i, id)
		}
		return nil
	}
	for i, m := range l.Messages {
		if m.Weight != nil && m.Role != "assistant" {
			return fmt.Errorf("message %d: weight on a %s message", i, m.Role)
		}
		switch m.Role {
		case "system", "user":
			if err := closeTurn(i); err != nil {
				return err
			}
			if m.Content == nil || *m.Content == "" {
				return fmt.Errorf("message %d: %s message without content", i, m.Role)
			}
		case "assistant":
			if err := closeTurn(i); err != nil {
				return err
			}
			if m.Content == nil && len(m.ToolCalls) == 0 {
				return fmt.Errorf("message %d: assistant message with neither content nor tool calls", i)
			}
			if m.Weight == nil || (*m.Weight != 0 && *m.Weight != 1) {
				return fmt.Errorf("message %d: assistant weight must be 0 or 1", i)
			}
			trainable = trainable || *m.Weight == 1
			for _, tc := range m.ToolCalls {
				if tc.ID == "" || ids[tc.ID] {
					return fmt.Errorf("message %d: tool call id %q empty or repeated", i, tc.ID)
				}
				if tc.Type != "function" || tc.Function.Name == "" || !json.Valid([]byte(tc.Function.Arguments)) {
					return fmt.Errorf("message %d: tool call %q: want type function, a name and JSON arguments", i, tc.ID)
				}
				ids[tc.ID] = true
				open[tc.ID] = true
			}
		case "tool":
			if !open[m.ToolCallID] {
				return fmt.Errorf("message %d: tool message for %q answers no open tool call", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
			if m.Content == nil {
				return fmt.Errorf("message %d: tool message without content", i)
			}
		default:
			return fmt.Errorf("message %d: role %q", i, m.Role)
		}
	}
	if err := closeTurn(len(l.Messages)); err != nil {
		return err
	}
	if !trainable {
		return errors.New("no assistant message with weight 1")
	}
	for i, t := range l.Tools {
		var tool struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(t, &tool) != nil || tool.Type != "function" || tool.Function.Name == "" {
			return fmt.Errorf("tool %d: want {\"type\":\"function\",\"function\":{\"name\":...}}", i)
		}
	}
	return nil
}
