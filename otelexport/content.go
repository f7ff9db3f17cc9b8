package otelexport

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls/dialect"

	"github.com/modelcalls/modelcalls/record"
)

// Message content (--otlp-content) in the GenAI conventions' JSON shapes:
//
//	gen_ai.input.messages       [{"role": ..., "parts": [part, ...]}, ...]
//	gen_ai.output.messages      [{"role": "assistant", "parts": [...], "finish_reason": ...}]
//	gen_ai.system_instructions  [part, ...]
//
// with parts {"type":"text","content":s}, {"type":"reasoning","content":s},
// {"type":"tool_call","id":s,"name":s,"arguments":any} and
// {"type":"tool_call_response","id":s,"response":any}. Other content (images, files, audio) becomes
// a part with only its type: the span says it was there without carrying the bytes. Chat
// Completions system messages stay in the input messages with role "system"; the Responses API's
// instructions and the Messages API's system prompt are the system instructions. Tool-call
// arguments that are JSON text are carried as JSON.

type part struct {
	Type      string `json:"type"`
	Content   any    `json:"content,omitempty"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments any    `json:"arguments,omitempty"`
	Response  any    `json:"response,omitempty"`
}

type message struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

// ContentTextLimit is the most bytes of one text a content attribute carries: a text part's or a
// reasoning part's content, or tool-call arguments sent as JSON text, is cut there (never inside a
// UTF-8 sequence; arguments that long are carried as the cut string, not as JSON) and the span
// says modelcalls.content_truncated. Live export gets a little more than this of a streamed text
// that spilled to a temp file (dialect.SummaryTextBytes), so that the live span and the span
// export otlp builds from the capture line carry the same content; and a streamed answer of many
// MiB does not become one attribute that size (a Collector's OTLP receiver refuses requests past
// 4 MiB by default).
const ContentTextLimit = dialect.SummaryTextBytes - utf8.UTFMax

// contentAttributes returns gen_ai.input.messages, gen_ai.output.messages and
// gen_ai.system_instructions as JSON text ("" when there is nothing to say), and whether a text in
// them was cut at ContentTextLimit.
func contentAttributes(rec *record.ModelCallRecord) (input, output, system string, truncated bool) {
	if rec.Dialect == nil {
		return "", "", "", false
	}
	var req, resp map[string]any
	if rec.Request != nil {
		_ = json.Unmarshal(rec.Request, &req)
	}
	if rec.Response != nil {
		_ = json.Unmarshal(rec.Response, &resp)
	}
	var in, out []message
	var sys []part
	switch dialect.Dialect(*rec.Dialect) {
	case dialect.Chat:
		in = chatInput(req)
		out = chatOutput(resp)
	case dialect.Responses:
		in, sys = responsesInput(req)
		out = responsesOutput(resp, rec.FinishReason)
	case dialect.Messages:
		in, sys = messagesInput(req)
		out = messagesOutput(resp)
	default:
		// Dialects without a reader of their own here (Gemini) are read as package dialect reads
		// them for people (dialect.ParseRequest, dialect.ParseResponse).
		in, sys = conversationInput(rec.Request)
		out = conversationOutput(rec.Response, rec.FinishReason)
	}
	for _, m := range in {
		truncated = capParts(m.Parts) || truncated
	}
	for _, m := range out {
		truncated = capParts(m.Parts) || truncated
	}
	truncated = capParts(sys) || truncated
	return marshalOrEmpty(in), marshalOrEmpty(out), marshalOrEmpty(sys), truncated
}

// capParts cuts the texts of parts at ContentTextLimit, reporting whether it cut any.
func capParts(parts []part) bool {
	cut := false
	for i := range parts {
		if s, ok := parts[i].Content.(string); ok && len(s) > ContentTextLimit {
			parts[i].Content, cut = capText(s), true
		}
		if s, ok := parts[i].Arguments.(string); ok && len(s) > ContentTextLimit {
			parts[i].Arguments, cut = capText(s), true
		}
	}
	return cut
}

// capText is s cut at ContentTextLimit bytes, less a UTF-8 sequence the cut would split.
func capText(s string) string {
	s = s[:ContentTextLimit]
	for k := 1; k <= utf8.UTFMax && k <= len(s); k++ {
		if utf8.RuneStart(s[len(s)-k]) {
			if !utf8.FullRuneInString(s[len(s)-k:]) {
				return s[:len(s)-k]
			}
			break
		}
	}
	return s
}

func marshalOrEmpty[T any](v []T) string {
	if len(v) == 0 {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

func str(v any) string { s, _ := v.(string); return s }

func list(v any) []any { l, _ := v.([]any); return l }

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

// jsonArg carries JSON text as JSON when it parses, else as the string; text past
// ContentTextLimit stays a string (capParts cuts it), as the prefix a live span gets of long
// streamed arguments would not parse.
func jsonArg(v any) any {
	s, ok := v.(string)
	if !ok || len(s) > ContentTextLimit {
		return v
	}
	var parsed any
	if json.Unmarshal([]byte(s), &parsed) == nil {
		return parsed
	}
	return s
}

// blockParts reads content that is a string (one text part) or a list of typed blocks, each made a
// part by block; a block of a type block does not know (ok false) becomes a part with only its type,
// and a block without a type is skipped.
func blockParts(content any, block func(typ string, m map[string]any) (p part, ok bool)) []part {
	if s, ok := content.(string); ok {
		return []part{{Type: "text", Content: s}}
	}
	var parts []part
	for _, b := range list(content) {
		m := obj(b)
		t := str(m["type"])
		if t == "" {
			continue
		}
		p, ok := block(t, m)
		if !ok {
			p = part{Type: t}
		}
		parts = append(parts, p)
	}
	return parts
}

// textParts reads OpenAI content: a string or a list of typed blocks with "text" (or "refusal").
func textParts(content any) []part {
	return blockParts(content, func(t string, m map[string]any) (part, bool) {
		switch t {
		case "text", "input_text", "output_text":
			return part{Type: "text", Content: str(m["text"])}, true
		case "refusal":
			return part{Type: "text", Content: str(m["refusal"])}, true
		}
		return part{}, false
	})
}

func chatInput(req map[string]any) []message {
	var msgs []message
	for _, m := range list(req["messages"]) {
		mm := obj(m)
		role := str(mm["role"])
		if role == "developer" {
			role = "system"
		}
		var parts []part
		if role == "tool" {
			parts = append(parts, part{Type: "tool_call_response", ID: str(mm["tool_call_id"]), Response: mm["content"]})
		} else {
			parts = textParts(mm["content"])
		}
		for _, tc := range list(mm["tool_calls"]) {
			t := obj(tc)
			fn := obj(t["function"])
			parts = append(parts, part{Type: "tool_call", ID: str(t["id"]), Name: str(fn["name"]), Arguments: jsonArg(fn["arguments"])})
		}
		msgs = append(msgs, message{Role: role, Parts: nonNil(parts)})
	}
	return msgs
}

func chatOutput(resp map[string]any) []message {
	var msgs []message
	for _, c := range list(resp["choices"]) {
		cm := obj(c)
		m := obj(cm["message"])
		var parts []part
		if r := str(m["reasoning_content"]); r != "" {
			parts = append(parts, part{Type: "reasoning", Content: r})
		}
		if m["content"] != nil {
			parts = append(parts, textParts(m["content"])...)
		}
		for _, tc := range list(m["tool_calls"]) {
			t := obj(tc)
			fn := obj(t["function"])
			parts = append(parts, part{Type: "tool_call", ID: str(t["id"]), Name: str(fn["name"]), Arguments: jsonArg(fn["arguments"])})
		}
		role := str(m["role"])
		if role == "" {
			role = "assistant"
		}
		msgs = append(msgs, message{Role: role, Parts: nonNil(parts), FinishReason: str(cm["finish_reason"])})
	}
	return msgs
}

func responsesInput(req map[string]any) ([]message, []part) {
	var sys []part
	if s := str(req["instructions"]); s != "" {
		sys = []part{{Type: "text", Content: s}}
	}
	if s, ok := req["input"].(string); ok {
		return []message{{Role: "user", Parts: []part{{Type: "text", Content: s}}}}, sys
	}
	var msgs []message
	for _, it := range list(req["input"]) {
		m := obj(it)
		switch t := str(m["type"]); t {
		case "", "message":
			role := str(m["role"])
			if role == "developer" {
				role = "system"
			}
			msgs = append(msgs, message{Role: role, Parts: nonNil(textParts(m["content"]))})
		case "function_call":
			msgs = append(msgs, message{Role: "assistant", Parts: []part{{Type: "tool_call", ID: str(m["call_id"]), Name: str(m["name"]), Arguments: jsonArg(m["arguments"])}}})
		case "function_call_output":
			msgs = append(msgs, message{Role: "tool", Parts: []part{{Type: "tool_call_response", ID: str(m["call_id"]), Response: m["output"]}}})
		case "reasoning":
			msgs = append(msgs, message{Role: "assistant", Parts: nonNil(reasoningParts(m))})
		default:
			msgs = append(msgs, message{Role: "user", Parts: []part{{Type: t}}})
		}
	}
	return msgs, sys
}

func reasoningParts(m map[string]any) []part {
	var parts []part
	for _, s := range list(m["summary"]) {
		if t := str(obj(s)["text"]); t != "" {
			parts = append(parts, part{Type: "reasoning", Content: t})
		}
	}
	return parts
}

func responsesOutput(resp map[string]any, finish *string) []message {
	if resp == nil {
		return nil
	}
	var parts []part
	toolCall := false
	for _, it := range list(resp["output"]) {
		m := obj(it)
		switch t := str(m["type"]); t {
		case "message":
			parts = append(parts, textParts(m["content"])...)
		case "function_call":
			toolCall = true
			parts = append(parts, part{Type: "tool_call", ID: str(m["call_id"]), Name: str(m["name"]), Arguments: jsonArg(m["arguments"])})
		case "reasoning":
			parts = append(parts, reasoningParts(m)...)
		case "":
		default:
			parts = append(parts, part{Type: t})
		}
	}
	// The Responses API has no finish reason on a completed response: the convention's
	// "stop" / "tool_call" are used then; incomplete_details.reason otherwise.
	reason := "stop"
	if toolCall {
		reason = "tool_call"
	}
	if finish != nil {
		reason = *finish
	}
	return []message{{Role: "assistant", Parts: nonNil(parts), FinishReason: reason}}
}

// messagesBlocks reads Anthropic content: a string or a list of text, thinking, tool_use and
// tool_result blocks.
func messagesBlocks(content any) []part {
	return blockParts(content, func(t string, m map[string]any) (part, bool) {
		switch t {
		case "text":
			return part{Type: "text", Content: str(m["text"])}, true
		case "thinking":
			return part{Type: "reasoning", Content: str(m["thinking"])}, true
		case "tool_use":
			return part{Type: "tool_call", ID: str(m["id"]), Name: str(m["name"]), Arguments: m["input"]}, true
		case "tool_result":
			return part{Type: "tool_call_response", ID: str(m["tool_use_id"]), Response: m["content"]}, true
		}
		return part{}, false
	})
}

func messagesInput(req map[string]any) ([]message, []part) {
	sys := messagesBlocks(req["system"])
	var msgs []message
	for _, m := range list(req["messages"]) {
		mm := obj(m)
		msgs = append(msgs, message{Role: str(mm["role"]), Parts: nonNil(messagesBlocks(mm["content"]))})
	}
	return msgs, sys
}

func messagesOutput(resp map[string]any) []message {
	if resp == nil || resp["content"] == nil {
		return nil
	}
	role := str(resp["role"])
	if role == "" {
		role = "assistant"
	}
	return []message{{Role: role, Parts: nonNil(messagesBlocks(resp["content"])), FinishReason: str(resp["stop_reason"])}}
}

// conversationInput maps a request as dialect.ParseRequest reads it to GenAI messages: the system
// messages it starts with are the system instructions.
func conversationInput(req json.RawMessage) ([]message, []part) {
	if req == nil {
		return nil, nil
	}
	msgs, _ := dialect.ParseRequest(req)
	var sys []part
	for len(msgs) > 0 && msgs[0].Role == "system" {
		sys = append(sys, genAIParts(msgs[0].Parts)...)
		msgs = msgs[1:]
	}
	var out []message
	for _, m := range msgs {
		out = append(out, message{Role: m.Role, Parts: nonNil(genAIParts(m.Parts))})
	}
	return out, sys
}

// conversationOutput maps a response as dialect.ParseResponse reads it to GenAI messages, each
// with the call's finish reason.
func conversationOutput(resp json.RawMessage, finish *string) []message {
	if resp == nil {
		return nil
	}
	msgs, _ := dialect.ParseResponse(resp)
	var out []message
	for _, m := range msgs {
		out = append(out, message{Role: m.Role, Parts: nonNil(genAIParts(m.Parts)), FinishReason: str(derefAny(finish))})
	}
	return out
}

func derefAny(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// genAIParts maps dialect parts to GenAI parts: text, reasoning, tool_call (JSON arguments as
// JSON), tool_call_response (JSON results as JSON); images and other parts by their kind or name.
func genAIParts(ps []dialect.Part) []part {
	var parts []part
	for _, p := range ps {
		switch p.Kind {
		case "text", "reasoning":
			parts = append(parts, part{Type: p.Kind, Content: p.Text})
		case "tool_call":
			parts = append(parts, part{Type: "tool_call", ID: p.CallID, Name: p.Name, Arguments: jsonArg(p.Arguments)})
		case "tool_result":
			parts = append(parts, part{Type: "tool_call_response", ID: p.CallID, Response: jsonArg(p.Text)})
		default:
			t := p.Name
			if t == "" {
				t = p.Kind
			}
			parts = append(parts, part{Type: t})
		}
	}
	return parts
}

func nonNil(p []part) []part {
	if p == nil {
		return []part{}
	}
	return p
}
