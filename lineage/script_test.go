package lineage

import (
	"encoding/json"
	"fmt"
)

// A scripted conversation, written once and rendered into each dialect's request and response
// objects, so every lineage case runs on Chat, Responses and Messages alike.

// turn is one message of a scripted conversation.
type turn struct {
	role      string // system, user, assistant, tool
	text      string
	reasoning string     // assistant: reasoning the model wrote (left out of resent history)
	calls     []toolCall // assistant: tool calls
	callID    string     // tool: the call answered
}

type toolCall struct {
	id, name, args string // args: JSON object text
}

func sys(t string) turn  { return turn{role: "system", text: t} }
func user(t string) turn { return turn{role: "user", text: t} }
func asst(t string, calls ...toolCall) turn {
	return turn{role: "assistant", text: t, calls: calls}
}
func result(id, t string) turn { return turn{role: "tool", callID: id, text: t} }

// dialects renders scripted turns into one dialect's request and response.
type dialectScript struct {
	name     string
	request  func(history []turn) []byte
	response func(n int, answer turn) []byte
}

var dialects = []dialectScript{
	{"chat", chatRequest, chatResponse},
	{"responses", responsesRequest, responsesResponse},
	{"messages", messagesRequest, messagesResponse},
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

type obj = map[string]any

func chatRequest(history []turn) []byte {
	var msgs []any
	for _, t := range history {
		switch t.role {
		case "assistant":
			m := obj{"role": "assistant", "content": t.text}
			var tcs []any
			for _, c := range t.calls {
				tcs = append(tcs, obj{"id": c.id, "type": "function", "function": obj{"name": c.name, "arguments": c.args}})
			}
			if tcs != nil {
				m["tool_calls"] = tcs
			}
			msgs = append(msgs, m)
		case "tool":
			msgs = append(msgs, obj{"role": "tool", "tool_call_id": t.callID, "content": t.text})
		default:
			msgs = append(msgs, obj{"role": t.role, "content": t.text})
		}
	}
	return mustJSON(obj{"model": "m", "messages": msgs, "tools": []any{obj{"type": "function", "function": obj{"name": "read"}}}})
}

func chatResponse(n int, a turn) []byte {
	m := obj{"role": "assistant", "content": a.text}
	if a.reasoning != "" {
		m["reasoning_content"] = a.reasoning
	}
	var tcs []any
	for _, c := range a.calls {
		tcs = append(tcs, obj{"id": c.id, "type": "function", "function": obj{"name": c.name, "arguments": c.args}})
	}
	if tcs != nil {
		m["tool_calls"] = tcs
	}
	return mustJSON(obj{"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "model": "m",
		"choices": []any{obj{"index": 0, "message": m, "finish_reason": "stop"}}})
}

func responsesItems(a turn, output bool) []any {
	var items []any
	if output && a.reasoning != "" {
		items = append(items, obj{"type": "reasoning", "id": "rs_1", "summary": []any{obj{"type": "summary_text", "text": a.reasoning}}})
	}
	if a.text != "" {
		items = append(items, obj{"type": "message", "role": "assistant", "content": []any{obj{"type": "output_text", "text": a.text}}})
	}
	for _, c := range a.calls {
		items = append(items, obj{"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.args})
	}
	return items
}

func responsesRequest(history []turn) []byte {
	r := obj{"model": "m", "tools": []any{obj{"type": "function", "name": "read"}}}
	var input []any
	for _, t := range history {
		switch t.role {
		case "system":
			r["instructions"] = t.text
		case "assistant":
			input = append(input, responsesItems(t, false)...)
		case "tool":
			input = append(input, obj{"type": "function_call_output", "call_id": t.callID, "output": t.text})
		default:
			input = append(input, obj{"type": "message", "role": t.role, "content": []any{obj{"type": "input_text", "text": t.text}}})
		}
	}
	r["input"] = input
	return mustJSON(r)
}

func responsesResponse(n int, a turn) []byte {
	return mustJSON(obj{"id": fmt.Sprintf("resp_%d", n), "object": "response", "status": "completed", "model": "m", "output": responsesItems(a, true)})
}

func messagesBlocks(a turn, output bool) []any {
	var blocks []any
	if output && a.reasoning != "" {
		blocks = append(blocks, obj{"type": "thinking", "thinking": a.reasoning, "signature": "sig"})
	}
	if a.text != "" {
		blocks = append(blocks, obj{"type": "text", "text": a.text})
	}
	for _, c := range a.calls {
		var in any
		if err := json.Unmarshal([]byte(c.args), &in); err != nil {
			panic(err)
		}
		blocks = append(blocks, obj{"type": "tool_use", "id": c.id, "name": c.name, "input": in})
	}
	return blocks
}

func messagesRequest(history []turn) []byte {
	r := obj{"model": "m", "max_tokens": 1024, "tools": []any{obj{"name": "read", "input_schema": obj{"type": "object"}}}}
	var msgs []any
	for _, t := range history {
		switch t.role {
		case "system":
			r["system"] = t.text
		case "assistant":
			msgs = append(msgs, obj{"role": "assistant", "content": messagesBlocks(t, false)})
		case "tool":
			msgs = append(msgs, obj{"role": "user", "content": []any{obj{"type": "tool_result", "tool_use_id": t.callID, "content": t.text}}})
		default:
			msgs = append(msgs, obj{"role": "user", "content": []any{obj{"type": "text", "text": t.text}}})
		}
	}
	r["messages"] = msgs
	return mustJSON(r)
}

func messagesResponse(n int, a turn) []byte {
	return mustJSON(obj{"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": "m",
		"content": messagesBlocks(a, true), "stop_reason": "end_turn"})
}

// step is one scripted call: the history it sends and the answer it gets (failed: no answer).
type step struct {
	history []turn
	answer  turn
	failed  bool
	// raw replaces the rendered request (for shapes a dialect cannot express with turns).
	raw func(d dialectScript) []byte
}

// render turns scripted steps into calls of one dialect.
func render(d dialectScript, steps []step) []Call {
	calls := make([]Call, len(steps))
	for i, s := range steps {
		c := Call{ID: fmt.Sprintf("c%d", i), Index: i, Dialect: d.name, Model: "m"}
		if s.raw != nil {
			c.Request = s.raw(d)
		} else {
			c.Request = d.request(s.history)
		}
		if !s.failed {
			c.Response = d.response(i, s.answer)
			c.Completed = true
			var id struct{ ID string }
			json.Unmarshal(c.Response, &id)
			c.ResponseID = id.ID
		}
		calls[i] = c
	}
	return calls
}
