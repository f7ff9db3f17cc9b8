package dialect

import (
	"encoding/json"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/sse"
)

// responsesDialect is OpenAI's Responses API: POST /v1/responses.
type responsesDialect struct{}

func (responsesDialect) observes(path string) bool              { return path == "/v1/responses" }
func (responsesDialect) path() string                           { return "/v1/responses" }
func (responsesDialect) pathModel(string) string                { return "" }
func (responsesDialect) pathStream(string, string) (bool, bool) { return false, false }
func (responsesDialect) provider() string                       { return "openai" }
func (responsesDialect) reassembler(sp *spill, lim *budget) reassembler {
	return &responsesState{sp: sp, lim: lim}
}
func (responsesDialect) env(base string) []EnvVar { return openAIEnv(base) }

func (responsesDialect) errorBody(status int, code, message string) []byte {
	return openAIErrorBody(status, code, message)
}

// terminalType maps a Responses event type to its terminal kind: response.completed → complete,
// response.incomplete → incomplete, response.failed or error → error.
func (responsesDialect) terminalType(typ string) Terminal {
	switch typ {
	case "response.completed":
		return TerminalComplete
	case "response.incomplete":
		return TerminalIncomplete
	case "response.failed", "error":
		return TerminalError
	}
	return TerminalNone
}

func (d responsesDialect) terminal(typ string, _ bool, _, obj []byte) Terminal {
	return typedTerminal(d.terminalType, typ, obj)
}

func (d responsesDialect) terminalPrefix(ev *sse.RawEvent) Terminal {
	return typedTerminalPrefix(d.terminalType, ev)
}

// request reads Responses' "instructions" (a system prompt) and "input" (a string or items).
func (responsesDialect) request(r members, c *Conversation) {
	if ins, ok := r["instructions"]; ok && !isNull(ins) {
		if parts := contentParts(ins); len(parts) > 0 {
			c.system = append(c.system, Message{Role: "system", Parts: parts})
		}
	}
	if in, ok := r["input"]; ok {
		c.Input = append(c.Input, items(in)...)
	}
}

// response reads Responses' output items.
func (responsesDialect) response(r members, c *Conversation) {
	if out, ok := r["output"]; ok {
		c.Output = append(c.Output, items(out)...)
	}
}

// chatDialect is OpenAI's Chat Completions API: POST /v1/chat/completions. A value that is no
// dialect is reassembled as chat, as NeMo Gym's reconstruction does (NewStream).
type chatDialect struct{}

func (chatDialect) observes(path string) bool              { return path == "/v1/chat/completions" }
func (chatDialect) path() string                           { return "/v1/chat/completions" }
func (chatDialect) pathModel(string) string                { return "" }
func (chatDialect) pathStream(string, string) (bool, bool) { return false, false }
func (chatDialect) provider() string                       { return "openai" }
func (chatDialect) reassembler(sp *spill, lim *budget) reassembler {
	return &chatState{sp: sp, lim: lim}
}
func (chatDialect) env(base string) []EnvVar { return openAIEnv(base) }

func (chatDialect) errorBody(status int, code, message string) []byte {
	return openAIErrorBody(status, code, message)
}

// terminal: event error → error; data exactly [DONE] → complete; a data object whose "error"
// member is present and not null (even false) → error; a data-only event whose "type" is "error"
// → error.
func (chatDialect) terminal(typ string, hasData bool, data, obj []byte) Terminal {
	if typ == "error" {
		return TerminalError
	}
	if hasData && string(data) == "[DONE]" {
		return TerminalComplete
	}
	if e := jsonscan.Lookup(obj, "error"); !jsonscan.IsNull(e) {
		return TerminalError
	}
	if typ == "" || typ == "message" {
		if typ, _ := jsonscan.Text(jsonscan.Lookup(obj, "type")); string(typ) == "error" {
			return TerminalError
		}
	}
	return TerminalNone
}

// terminalPrefix: Chat's [DONE] and error objects are small, so a truncated chat event is never
// terminal unless its event type says error.
func (chatDialect) terminalPrefix(ev *sse.RawEvent) Terminal {
	if ev.Type == "error" {
		return TerminalError
	}
	return TerminalNone
}

// request reads the "messages" list (Chat Completions' and Messages' alike) and the tool list of
// the OpenAI and Anthropic shapes.
func (chatDialect) request(r members, c *Conversation) {
	if m, ok := r["messages"]; ok {
		var list []json.RawMessage
		decodeList(m, &list)
		for _, raw := range list {
			c.Input = append(c.Input, chatMessage(raw))
		}
	}
	toolNames(r, c)
}

// response reads Chat Completions' choices[].message.
func (chatDialect) response(r members, c *Conversation) {
	if ch, ok := r["choices"]; ok {
		var list []members
		decodeMemberList(ch, &list)
		for _, ci := range list {
			if m, ok := ci["message"]; ok {
				c.Output = append(c.Output, chatMessage(m))
			}
		}
	}
}

// openAIEnv points OpenAI SDKs (Python, Node, Go) and tools in their style (Qwen Code, LiteLLM) at
// base + "/v1".
func openAIEnv(base string) []EnvVar {
	return []EnvVar{{"OPENAI_BASE_URL", base + "/v1"}, {"OPENAI_API_BASE", base + "/v1"}}
}

// openAIErrorBody is {"error":{"message":M,"type":T,"param":null,"code":C}}, C null when code is "".
// T by status: 401 authentication_error, 403 permission_error, 404 not_found_error, 429
// rate_limit_error, other 4xx invalid_request_error, 5xx server_error.
func openAIErrorBody(status int, code, message string) []byte {
	typ := "invalid_request_error"
	if t := commonErrorType(status); t != "" {
		typ = t
	} else if status >= 500 {
		typ = "server_error"
	}
	b := append([]byte(nil), `{"error":{"message":`...)
	b = jsonscan.AppendString(b, message)
	b = append(b, `,"type":`...)
	b = jsonscan.AppendString(b, typ)
	b = append(b, `,"param":null,"code":`...)
	if code == "" {
		b = append(b, "null"...)
	} else {
		b = jsonscan.AppendString(b, code)
	}
	return append(b, "}}"...)
}

// commonErrorType is the error type OpenAI and Anthropic share for a status, "" for the others.
func commonErrorType(status int) string {
	switch status {
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 429:
		return "rate_limit_error"
	}
	return ""
}

// typedTerminal detects a terminal event by its event type, or for an event without one (or with
// the SSE default "message") by the "type" member of its data object (Responses, Messages).
func typedTerminal(of func(string) Terminal, typ string, obj []byte) Terminal {
	if t := of(typ); t != TerminalNone {
		return t
	}
	if (typ == "" || typ == "message") && obj != nil {
		if typ, ok := jsonscan.Text(jsonscan.Lookup(obj, "type")); ok {
			return of(string(typ))
		}
	}
	return TerminalNone
}

// typedTerminalPrefix is typedTerminal for an event too large to hold: the "type" member counts
// when it is the first member of the data's object.
func typedTerminalPrefix(of func(string) Terminal, ev *sse.RawEvent) Terminal {
	if t := of(ev.Type); t != TerminalNone {
		return t
	}
	if ev.Type == "" || ev.Type == "message" {
		if typ, ok := leadingType(ev.Data); ok {
			return of(string(typ))
		}
	}
	return TerminalNone
}

// toolCalls reads Responses output items: each function_call item is a tool call (call_id, or id
// when call_id is not truthy; name; arguments); each reasoning item gives the non-empty string
// text of each entry of its summary.
func (responsesDialect) toolCalls(m *ResponseMembers, x Sink) bool {
	if !jsonscan.IsArray(m.Output) {
		return false
	}
	t := m.Tree
	t.EachElement(m.Output, func(item []byte) bool {
		if !jsonscan.IsObject(item) {
			return true
		}
		var typ, callID, id, name, args, summary []byte
		t.EachMember(item, func(k, v []byte) bool {
			switch string(jsonscan.KeyName(k)) {
			case "type":
				typ = v
			case "call_id":
				callID = v
			case "id":
				id = v
			case "name":
				name = v
			case "arguments":
				args = v
			case "summary":
				summary = v
			}
			return true
		})
		switch typ, _ := jsonscan.StringAlias(typ); typ { // only compared
		case "function_call":
			if !jsonscan.Truthy(callID) {
				callID = id
			}
			x.Call(RawToolCall{CallID: callID, Name: name, Args: args})
		case "reasoning":
			t.EachElement(summary, func(entry []byte) bool {
				if v := t.Lookup(entry, "text"); nonEmptyString(v) {
					x.Reasoning(v)
				}
				return true
			})
		}
		return true
	})
	return true
}

// finishReason: incomplete_details.reason, decided whenever incomplete_details is an object.
func (responsesDialect) finishReason(m *ResponseMembers) ([]byte, bool) {
	if !jsonscan.IsObject(m.IncompleteDetails) {
		return nil, false
	}
	return m.Tree.Lookup(m.IncompleteDetails, "reason"), true
}

// toolCalls reads Chat choices: for every choice whose message is an object, each object of
// message.tool_calls is a tool call (id, function.name, function.arguments); the reasoning is
// message.reasoning_content when truthy, else message.reasoning, when a non-empty string (a
// truthy non-string reasoning_content blocks the fallback, as in NeMo Gym).
func (chatDialect) toolCalls(m *ResponseMembers, x Sink) bool {
	if !jsonscan.IsArray(m.Choices) {
		return false
	}
	t := m.Tree
	t.EachElement(m.Choices, func(choice []byte) bool {
		message := t.Lookup(choice, "message")
		if !jsonscan.IsObject(message) {
			return true
		}
		var toolCalls, reasoningContent, reasoningAlt []byte
		t.EachMember(message, func(k, v []byte) bool {
			switch string(jsonscan.KeyName(k)) {
			case "tool_calls":
				toolCalls = v
			case "reasoning_content":
				reasoningContent = v
			case "reasoning":
				reasoningAlt = v
			}
			return true
		})
		t.EachElement(toolCalls, func(tc []byte) bool {
			if !jsonscan.IsObject(tc) {
				return true
			}
			fn := t.Lookup(tc, "function")
			var name, args []byte
			if jsonscan.IsObject(fn) {
				name, args = t.Lookup(fn, "name"), t.Lookup(fn, "arguments")
			}
			x.Call(RawToolCall{CallID: t.Lookup(tc, "id"), Name: name, Args: args})
			return true
		})
		reasoning := reasoningContent
		if !jsonscan.Truthy(reasoning) {
			reasoning = reasoningAlt
		}
		if nonEmptyString(reasoning) {
			x.Reasoning(reasoning)
		}
		return true
	})
	return true
}

// finishReason: choices[0].finish_reason, decided when choices is a non-empty array whose first
// item is an object and that member is a string.
func (chatDialect) finishReason(m *ResponseMembers) ([]byte, bool) {
	first := firstElement(m.Tree, m.Choices)
	if !jsonscan.IsObject(first) {
		return nil, false
	}
	v := m.Tree.Lookup(first, "finish_reason")
	return v, jsonscan.IsString(v)
}
