package dialect

import (
	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/sse"
)

// messagesDialect is Anthropic's Messages API: POST /v1/messages.
type messagesDialect struct{}

func (messagesDialect) observes(path string) bool              { return path == "/v1/messages" }
func (messagesDialect) path() string                           { return "/v1/messages" }
func (messagesDialect) pathModel(string) string                { return "" }
func (messagesDialect) pathStream(string, string) (bool, bool) { return false, false }
func (messagesDialect) provider() string                       { return "anthropic" }
func (messagesDialect) reassembler(sp *spill, lim *budget) reassembler {
	return &messagesState{sp: sp, lim: lim}
}

// env points Anthropic SDKs and Claude Code at base (they add /v1 themselves).
func (messagesDialect) env(base string) []EnvVar { return []EnvVar{{"ANTHROPIC_BASE_URL", base}} }

// terminalType: message_stop → complete, error → error.
func (messagesDialect) terminalType(typ string) Terminal {
	switch typ {
	case "message_stop":
		return TerminalComplete
	case "error":
		return TerminalError
	}
	return TerminalNone
}

func (d messagesDialect) terminal(typ string, _ bool, _, obj []byte) Terminal {
	return typedTerminal(d.terminalType, typ, obj)
}

func (d messagesDialect) terminalPrefix(ev *sse.RawEvent) Terminal {
	return typedTerminalPrefix(d.terminalType, ev)
}

// errorBody is {"type":"error","error":{"type":T,"message":M}}: the Anthropic shape has no code
// member, so a caller that needs the code seen by an Anthropic client must say it in message.
// T (Anthropic's documented error types): 400 invalid_request_error, 401 authentication_error,
// 403 permission_error, 404 not_found_error, 413 request_too_large, 429 rate_limit_error, 504
// timeout_error, 529 overloaded_error, 503 overloaded_error (the server is not taking work), other
// 5xx api_error, other 4xx invalid_request_error.
func (messagesDialect) errorBody(status int, _, message string) []byte {
	typ := commonErrorType(status)
	if typ == "" {
		switch {
		case status == 413:
			typ = "request_too_large"
		case status == 504:
			typ = "timeout_error"
		case status == 503 || status == 529:
			typ = "overloaded_error"
		case status >= 500:
			typ = "api_error"
		default:
			typ = "invalid_request_error"
		}
	}
	b := append([]byte(nil), `{"type":"error","error":{"type":`...)
	b = jsonscan.AppendString(b, typ)
	b = append(b, `,"message":`...)
	b = jsonscan.AppendString(b, message)
	return append(b, "}}"...)
}

// request reads Messages' top-level "system" (a string or block list); its "messages" are read by
// the chat entry, which reads both shapes.
func (messagesDialect) request(r members, c *Conversation) {
	if sys, ok := r["system"]; ok && !isNull(sys) {
		if parts := contentParts(sys); len(parts) > 0 {
			c.system = append(c.system, Message{Role: "system", Parts: parts})
		}
	}
}

// response reads a Messages response: its content blocks, when its type is "message".
func (messagesDialect) response(r members, c *Conversation) {
	if content, ok := r["content"]; ok && str(r["type"]) == "message" {
		role := str(r["role"])
		if role == "" {
			role = "assistant"
		}
		c.Output = append(c.Output, Message{Role: role, Parts: contentParts(content)})
	}
}

// toolCalls reads Messages content blocks: each tool_use block is a tool call (id, name, input:
// {} when not truthy); thinking and redacted_thinking blocks give their thinking when a string,
// empty strings included (as NeMo Gym counts them).
func (messagesDialect) toolCalls(m *ResponseMembers, x Sink) bool {
	if !jsonscan.IsArray(m.Content) {
		return false
	}
	t := m.Tree
	t.EachElement(m.Content, func(block []byte) bool {
		if !jsonscan.IsObject(block) {
			return true
		}
		var typ, id, name, input, thinking []byte
		t.EachMember(block, func(k, v []byte) bool {
			switch string(jsonscan.KeyName(k)) {
			case "type":
				typ = v
			case "id":
				id = v
			case "name":
				name = v
			case "input":
				input = v
			case "thinking":
				thinking = v
			}
			return true
		})
		switch typ, _ := jsonscan.StringAlias(typ); typ { // only compared
		case "tool_use":
			x.Call(RawToolCall{CallID: id, Name: name, Args: input, ArgsObject: true})
		case "thinking", "redacted_thinking":
			if jsonscan.IsString(thinking) {
				x.Reasoning(thinking)
			}
		}
		return true
	})
	return true
}

// finishReason: stop_reason, decided when a string.
func (messagesDialect) finishReason(m *ResponseMembers) ([]byte, bool) {
	return m.StopReason, jsonscan.IsString(m.StopReason)
}
