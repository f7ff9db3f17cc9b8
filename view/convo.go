package view

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Part is one piece of a message as the viewer renders it.
type Part struct {
	// Kind is "text", "reasoning", "tool_call", "tool_result", "image", "error" or "other".
	Kind      string `json:"kind"`
	Text      string `json:"text,omitempty"`      // text, reasoning, tool result content, error message
	Name      string `json:"name,omitempty"`      // tool name (tool_call; tool_result when its call is in the same request), item type (other)
	CallID    string `json:"call_id,omitempty"`   // tool call id (tool_call, tool_result)
	Arguments string `json:"arguments,omitempty"` // tool call arguments, JSON text as sent
}

// Message is one message (or Responses input/output item) of a conversation.
type Message struct {
	Role  string `json:"role"` // system, developer, user, assistant, tool
	Parts []Part `json:"parts"`
	// New is true when the message did not appear in the request or response of an earlier call of
	// the rollout: the part of the conversation this call added, as opposed to resent history.
	New bool `json:"new"`
}

// Conversation is what the model saw on one call (the request) and what it answered (the output).
type Conversation struct {
	Input  []Message `json:"input"`  // system prompt first, then the messages in request order
	Tools  []string  `json:"tools"`  // names of the tools the request offered
	Output []Message `json:"output"` // the response's messages / output items
	// Error is the error message of an error response body, "" otherwise.
	Error string `json:"error,omitempty"`
}

// ParseRequest turns a request object of any of the three dialects into messages, and the names of
// the tools it offers (a built-in tool by its type; "" when a tool has neither). The shapes are
// told apart by their keys, not by the dialect: Responses "instructions" and "input"; Chat
// Completions and Messages "messages" (Messages' "system" is a top-level string or block list).
// Unknown item and block types become "other" parts named by their type.
func ParseRequest(req []byte) (msgs []Message, tools []string) {
	var r map[string]json.RawMessage
	if json.Unmarshal(req, &r) != nil {
		return nil, nil
	}
	if sys, ok := r["system"]; ok && !isNull(sys) {
		if parts := contentParts(sys); len(parts) > 0 {
			msgs = append(msgs, Message{Role: "system", Parts: parts})
		}
	}
	if ins, ok := r["instructions"]; ok && !isNull(ins) {
		if parts := contentParts(ins); len(parts) > 0 {
			msgs = append(msgs, Message{Role: "system", Parts: parts})
		}
	}
	if in, ok := r["input"]; ok {
		msgs = append(msgs, items(in)...)
	}
	if m, ok := r["messages"]; ok {
		var list []json.RawMessage
		json.Unmarshal(m, &list)
		for _, raw := range list {
			msgs = append(msgs, chatMessage(raw))
		}
	}
	var tl []map[string]json.RawMessage
	json.Unmarshal(r["tools"], &tl)
	for _, t := range tl {
		name := str(t["name"])
		if name == "" {
			var fn map[string]json.RawMessage
			json.Unmarshal(t["function"], &fn)
			name = str(fn["name"])
		}
		if name == "" {
			name = str(t["type"])
		}
		tools = append(tools, name)
	}
	return msgs, tools
}

// ParseResponse turns a response object into the messages it answered: Chat Completions
// choices[].message, Responses output[] items, Messages content[] blocks. An error body
// ({"error": ...} or {"type": "error", ...}) gives its message.
func ParseResponse(resp []byte) (msgs []Message, errMsg string) {
	var r map[string]json.RawMessage
	if json.Unmarshal(resp, &r) != nil {
		return nil, ""
	}
	if e, ok := r["error"]; ok && !isNull(e) {
		var eo map[string]json.RawMessage
		if json.Unmarshal(e, &eo) == nil && str(eo["message"]) != "" {
			errMsg = str(eo["message"])
		} else if s := str(e); s != "" {
			errMsg = s
		} else {
			errMsg = string(e)
		}
	}
	if ch, ok := r["choices"]; ok {
		var list []map[string]json.RawMessage
		json.Unmarshal(ch, &list)
		for _, c := range list {
			if m, ok := c["message"]; ok {
				msgs = append(msgs, chatMessage(m))
			}
		}
	}
	if out, ok := r["output"]; ok {
		msgs = append(msgs, items(out)...)
	}
	if content, ok := r["content"]; ok && str(r["type"]) == "message" {
		role := str(r["role"])
		if role == "" {
			role = "assistant"
		}
		msgs = append(msgs, Message{Role: role, Parts: contentParts(content)})
	}
	return msgs, errMsg
}

// chatMessage reads a Chat Completions or Messages message: role, content (string or blocks), and
// Chat's tool_calls, tool_call_id and reasoning_content / reasoning.
func chatMessage(raw json.RawMessage) Message {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return Message{Role: "?", Parts: []Part{{Kind: "other", Text: string(raw)}}}
	}
	msg := Message{Role: str(m["role"])}
	for _, k := range []string{"reasoning_content", "reasoning"} {
		if s := str(m[k]); s != "" {
			msg.Parts = append(msg.Parts, Part{Kind: "reasoning", Text: s})
		}
	}
	if id := str(m["tool_call_id"]); id != "" {
		msg.Parts = append(msg.Parts, Part{Kind: "tool_result", CallID: id, Text: joinText(contentParts(m["content"]))})
	} else {
		msg.Parts = append(msg.Parts, contentParts(m["content"])...)
	}
	var tcs []map[string]json.RawMessage
	json.Unmarshal(m["tool_calls"], &tcs)
	for _, tc := range tcs {
		var fn map[string]json.RawMessage
		json.Unmarshal(tc["function"], &fn)
		msg.Parts = append(msg.Parts, Part{Kind: "tool_call", CallID: str(tc["id"]), Name: str(fn["name"]), Arguments: argText(fn["arguments"])})
	}
	return msg
}

// items reads a Responses input or output: a string (one user message) or a list of items.
func items(raw json.RawMessage) []Message {
	if s, ok := asString(raw); ok {
		return []Message{{Role: "user", Parts: []Part{{Kind: "text", Text: s}}}}
	}
	var list []map[string]json.RawMessage
	json.Unmarshal(raw, &list)
	var msgs []Message
	for _, it := range list {
		typ := str(it["type"])
		switch {
		case typ == "function_call" || typ == "custom_tool_call":
			args := it["arguments"]
			if typ == "custom_tool_call" {
				args = it["input"]
			}
			msgs = append(msgs, Message{Role: "assistant", Parts: []Part{{Kind: "tool_call", CallID: str(it["call_id"]), Name: str(it["name"]), Arguments: argText(args)}}})
		case typ == "function_call_output" || typ == "custom_tool_call_output":
			msgs = append(msgs, Message{Role: "tool", Parts: []Part{{Kind: "tool_result", CallID: str(it["call_id"]), Text: joinText(contentParts(it["output"]))}}})
		case typ == "reasoning":
			var texts []string
			for _, k := range []string{"summary", "content"} {
				for _, p := range contentParts(it[k]) {
					texts = append(texts, p.Text)
				}
			}
			text := strings.Join(texts, "\n")
			if text == "" && len(it["encrypted_content"]) > 0 {
				text = "(encrypted reasoning)"
			}
			msgs = append(msgs, Message{Role: "assistant", Parts: []Part{{Kind: "reasoning", Text: text}}})
		case typ == "message" || (typ == "" && len(it["role"]) > 0):
			msgs = append(msgs, Message{Role: str(it["role"]), Parts: contentParts(it["content"])})
		default:
			msgs = append(msgs, Message{Role: "assistant", Parts: []Part{{Kind: "other", Name: typ, Text: plainJSON(it)}}})
		}
	}
	return msgs
}

// contentParts reads message content: a string, or a list of blocks of any dialect.
func contentParts(raw json.RawMessage) []Part {
	if isNull(raw) {
		return nil
	}
	if s, ok := asString(raw); ok {
		if s == "" {
			return nil
		}
		return []Part{{Kind: "text", Text: s}}
	}
	var blocks []map[string]json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil {
		return []Part{{Kind: "other", Text: string(raw)}}
	}
	var parts []Part
	for _, b := range blocks {
		typ := str(b["type"])
		switch typ {
		case "text", "input_text", "output_text", "summary_text", "reasoning_text":
			parts = append(parts, Part{Kind: "text", Text: str(b["text"])})
		case "refusal":
			parts = append(parts, Part{Kind: "text", Text: str(b["refusal"])})
		case "thinking":
			parts = append(parts, Part{Kind: "reasoning", Text: str(b["thinking"])})
		case "redacted_thinking":
			parts = append(parts, Part{Kind: "reasoning", Text: "(redacted thinking)"})
		case "tool_use", "server_tool_use":
			parts = append(parts, Part{Kind: "tool_call", CallID: str(b["id"]), Name: str(b["name"]), Arguments: argText(b["input"])})
		case "tool_result":
			parts = append(parts, Part{Kind: "tool_result", CallID: str(b["tool_use_id"]), Text: joinText(contentParts(b["content"]))})
		case "image", "image_url", "input_image", "input_file", "document":
			parts = append(parts, Part{Kind: "image", Name: typ})
		default:
			parts = append(parts, Part{Kind: "other", Name: typ, Text: plainJSON(b)})
		}
	}
	return parts
}

func joinText(parts []Part) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// argText returns tool-call arguments as text: a JSON string's content (Chat, Responses send the
// arguments as a string), else the JSON value itself (Messages' input object).
func argText(raw json.RawMessage) string {
	if isNull(raw) {
		return ""
	}
	if s, ok := asString(raw); ok {
		return s
	}
	return string(raw)
}

func asString(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func str(raw json.RawMessage) string {
	s, _ := asString(raw)
	return s
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// partKey identifies one part of a message for telling new from resent: the message's role, the
// part's kind, text, name, call id and arguments (JSON arguments compared by value, so key order and
// spacing do not matter).
func partKey(role string, p *Part) string {
	return role + "\x00" + p.Kind + "\x00" + p.Text + "\x00" + p.Name + "\x00" + p.CallID + "\x00" + canonicalJSON(p.Arguments)
}

// canonicalJSON re-encodes JSON text with sorted keys and no spacing; text that is not JSON is
// returned as is.
func canonicalJSON(s string) string {
	if s == "" {
		return ""
	}
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return s
	}
	return string(b)
}

// markNew sets Message.New on each call's input: a message is new on a call when one of its parts
// appeared in no earlier call (earlier in the order given), neither in its request nor in its
// response output. Matching parts rather than whole messages keeps a resent turn history when the
// harness drops some of its blocks (thinking, text beside a tool call) or regroups Responses items.
// A message without parts is new unless an earlier call had an empty message of that role. A repeated identical message (the same user
// text twice) counts as history.
func markNew(convs []*Conversation) {
	seen := map[string]bool{}
	for _, c := range convs {
		if c == nil {
			continue
		}
		for i := range c.Input {
			m := &c.Input[i]
			m.New = len(m.Parts) == 0 && !seen[m.Role+"\x00(empty)"]
			for j := range m.Parts {
				if !seen[partKey(m.Role, &m.Parts[j])] {
					m.New = true
				}
			}
		}
		for i := range c.Output {
			c.Output[i].New = true
		}
		for _, list := range [][]Message{c.Input, c.Output} {
			for i := range list {
				if len(list[i].Parts) == 0 {
					seen[list[i].Role+"\x00(empty)"] = true
				}
				for j := range list[i].Parts {
					seen[partKey(list[i].Role, &list[i].Parts[j])] = true
				}
			}
		}
	}
}

// plainJSON is v as compact JSON text for display, "<", ">" and "&" kept as they are (json.Marshal
// would show them as \u003c, \u003e and \u0026).
func plainJSON(v any) string {
	var b strings.Builder
	if encodeJSON(&b, v) != nil {
		return ""
	}
	return strings.TrimSuffix(b.String(), "\n")
}
