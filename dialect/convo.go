package dialect

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// Part is one piece of a message as a person reads it (modelcalls show, the viewer, OpenTelemetry
// content).
type Part struct {
	// Kind is "text", "reasoning", "tool_call", "tool_result", "image", "error" or "other".
	Kind      string `json:"kind"`
	Text      string `json:"text,omitempty"`      // text, reasoning, tool result content, error message
	Name      string `json:"name,omitempty"`      // tool name (tool_call, tool_result when known), item type (other)
	CallID    string `json:"call_id,omitempty"`   // tool call id (tool_call, tool_result)
	Arguments string `json:"arguments,omitempty"` // tool call arguments, JSON text as sent
}

// CanonicalArguments is a tool call's argument text in one form, for comparing calls: JSON
// re-encoded with sorted keys and no spacing; empty (or all white space) text is "{}", as an
// API answers a call without arguments; text that is not JSON is returned as is.
func CanonicalArguments(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
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

// Message is one message (or Responses input/output item) of a conversation.
type Message struct {
	Role  string `json:"role"` // system, developer, user, assistant, tool
	Parts []Part `json:"parts"`
	// New is true when the message did not appear in the request or response of an earlier call of
	// the rollout: the part of the conversation this call added, as opposed to resent history.
	// ParseRequest and ParseResponse leave it false; a reader that compares calls sets it.
	New bool `json:"new"`
}

// Conversation is what the model saw on one call (the request) and what it answered (the output).
type Conversation struct {
	Input  []Message `json:"input"`  // system prompt first, then the messages in request order
	Tools  []string  `json:"tools"`  // names of the tools the request offered
	Output []Message `json:"output"` // the response's messages / output items
	// Error is the error message of an error response body, "" otherwise.
	Error string `json:"error,omitempty"`

	system []Message // system prompts, put before Input by ParseRequest

	// tools is the request's "tools" list, decoded once for the dialects that read it.
	tools     []members
	toolsRead bool
}

// requestTools returns the objects of a request's "tools" list (nil elements for null ones, none
// when it is not a list of objects), decoded on the first call and kept for the next dialect: a
// coding agent's tool list, with each tool's parameter schema, is a large part of its request.
func (c *Conversation) requestTools(r members) []members {
	if !c.toolsRead {
		decodeMemberList(r["tools"], &c.tools)
		c.toolsRead = true
	}
	return c.tools
}

// members maps the members of a request or response object.
type members map[string]json.RawMessage

// ParseRequest turns a request object of any dialect into messages, and the names of the tools it
// offers (a built-in tool by its type; "" when a tool has neither). The shapes are told apart by
// their keys, not by the dialect of the call, each dialect reading the members its shape owns:
// Responses "instructions" and "input"; Chat Completions and Messages "messages" (Messages'
// "system" is a top-level string or block list); Gemini "systemInstruction" and "contents".
// Unknown item and block types become "other" parts named by their type. System prompts come
// first.
func ParseRequest(req []byte) (msgs []Message, tools []string) {
	var r members
	if decodeMembers(req, &r) != nil {
		return nil, nil
	}
	var c Conversation
	for _, d := range All {
		registry[d].request(r, &c)
	}
	return append(c.system, c.Input...), c.Tools
}

// ParseResponse turns a response object into the messages it answered: Chat Completions
// choices[].message, Responses output[] items, Messages content[] blocks, Gemini
// candidates[].content. An error body ({"error": ...} of OpenAI and Gemini, {"type": "error",
// ...} of Anthropic) gives its message.
func ParseResponse(resp []byte) (msgs []Message, errMsg string) {
	var r members
	if decodeMembers(resp, &r) != nil {
		return nil, ""
	}
	if e, ok := r["error"]; ok && !isNull(e) {
		var eo members
		if decodeMembers(e, &eo) == nil && str(eo["message"]) != "" {
			errMsg = str(eo["message"])
		} else if s := str(e); s != "" {
			errMsg = s
		} else {
			errMsg = string(e)
		}
	}
	var c Conversation
	for _, d := range All {
		registry[d].response(r, &c)
	}
	return c.Output, errMsg
}

// chatMessage reads a Chat Completions or Messages message: role, content (string or blocks), and
// Chat's tool_calls, tool_call_id and reasoning_content / reasoning.
func chatMessage(raw json.RawMessage) Message {
	var m members
	if decodeMembers(raw, &m) != nil {
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
	var tcs []members
	decodeMemberList(m["tool_calls"], &tcs)
	for _, tc := range tcs {
		var fn members
		decodeMembers(tc["function"], &fn)
		msg.Parts = append(msg.Parts, Part{Kind: "tool_call", CallID: str(tc["id"]), Name: str(fn["name"]), Arguments: argText(fn["arguments"])})
	}
	return msg
}

// items reads a Responses input or output: a string (one user message) or a list of items.
func items(raw json.RawMessage) []Message {
	if s, ok := asString(raw); ok {
		return []Message{{Role: "user", Parts: []Part{{Kind: "text", Text: s}}}}
	}
	var list []members
	decodeMemberList(raw, &list)
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

// contentParts reads message content: a string, or a list of blocks of the OpenAI and Anthropic
// dialects.
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
	var blocks []members
	if decodeMemberList(raw, &blocks) != nil {
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

// toolNames adds the names of the tools a request's "tools" list offers in the OpenAI and
// Anthropic shapes: name, else function.name, else the built-in tool's type. A Gemini tool (an
// object of functionDeclarations or built-in tool members, without "name" or "type") is left to
// the Gemini entry.
func toolNames(r members, c *Conversation) {
	for _, t := range c.requestTools(r) {
		if isGeminiTool(t) {
			continue
		}
		name := str(t["name"])
		if name == "" {
			var fn members
			decodeMembers(t["function"], &fn)
			name = str(fn["name"])
		}
		if name == "" {
			name = str(t["type"])
		}
		c.Tools = append(c.Tools, name)
	}
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
// arguments as a string), else the JSON value itself (Messages' input object, Gemini's args).
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
	if n := len(raw); n >= 2 && raw[n-1] == '"' && plainString(raw[1:n-1]) {
		return string(raw[1 : n-1]), true
	}
	if jsonscan.Validate(raw) == nil {
		return jsonscan.String(raw) // decoded as encoding/json decodes a string that passed the strict check
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

// plainJSON is v as compact JSON text for display, "<", ">" and "&" kept as they are (json.Marshal
// would show them as \u003c, \u003e and \u0026).
func plainJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return ""
	}
	return strings.TrimSuffix(b.String(), "\n")
}
