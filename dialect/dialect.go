package dialect

import (
	"strconv"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/sse"
)

// Dialect names one observed wire API. Its value is the exchange's "dialect" field in a capture
// line, with NeMo Gym's values: "responses", "chat" or "messages".
type Dialect string

// The observed dialects.
const (
	Responses Dialect = "responses" // OpenAI Responses API, POST /v1/responses
	Chat      Dialect = "chat"      // OpenAI Chat Completions API, POST /v1/chat/completions
	Messages  Dialect = "messages"  // Anthropic Messages API, POST /v1/messages
)

// ForPath returns the dialect observed on path, which must already have its /ng-rollout/<id>
// prefix and its query stripped. The match is exact, as in NeMo Gym's capture middleware:
// "/v1/responses", "/v1/chat/completions" and "/v1/messages" only; a trailing slash, "/v1/models"
// or "/v1/messages/count_tokens" are not observed (ok false).
func ForPath(path string) (Dialect, bool) {
	for _, d := range All {
		if d.Path() == path {
			return d, true
		}
	}
	return "", false
}

// All are the observed dialects, in the order Responses, Chat, Messages.
var All = [...]Dialect{Responses, Chat, Messages}

// Path returns the path d is observed on, without a /ng-rollout/<id> prefix: "/v1/responses",
// "/v1/chat/completions" or "/v1/messages"; "" when d is not Valid.
func (d Dialect) Path() string {
	switch d {
	case Responses:
		return "/v1/responses"
	case Chat:
		return "/v1/chat/completions"
	case Messages:
		return "/v1/messages"
	}
	return ""
}

// Valid reports whether d is one of the three observed dialects.
func (d Dialect) Valid() bool { return d == Responses || d == Chat || d == Messages }

// Terminal is the kind of terminal event a stream ended with; the kinds are NeMo Gym's
// (complete, incomplete, error), and each maps to the exchange's error category.
type Terminal int

// Terminal kinds. TerminalIncomplete is only produced by the Responses dialect.
const (
	TerminalNone       Terminal = iota // no terminal event (yet)
	TerminalComplete                   // response.completed, [DONE], message_stop
	TerminalIncomplete                 // response.incomplete: error category "incomplete"
	TerminalError                      // an error event: error category "upstream_error"
)

// String returns "none", "complete", "incomplete" or "error".
func (t Terminal) String() string {
	switch t {
	case TerminalNone:
		return "none"
	case TerminalComplete:
		return "complete"
	case TerminalIncomplete:
		return "incomplete"
	case TerminalError:
		return "error"
	}
	return "Terminal(" + strconv.Itoa(int(t)) + ")"
}

// TerminalOf reports whether ev is a terminal event of dialect d and which kind. The event names
// are the ones NeMo Gym's capture middleware detects (OpenAI's Responses stream ends with
// response.completed, Chat Completions with data: [DONE], Anthropic's Messages with message_stop):
//
//	responses: event response.completed → complete; response.incomplete → incomplete;
//	           response.failed or error → error
//	messages:  event message_stop → complete; error → error
//	chat:      event error → error; data exactly [DONE] → complete; a data JSON object with an
//	           "error" member that is not null (even false) → error
//
// An event without an event field (or with the SSE default type "message") is also recognised
// by the "type" of its data JSON object, with the same names (many servers send no event line;
// NeMo Gym misses those); for chat only the type "error" counts. The data lines of the event are joined with "\n"
// before any JSON decoding (sse.Event.Data already is). Matching is exact and case-sensitive;
// the decoder has already removed leading white space from values. Another dialect value gives
// TerminalNone.
func (d Dialect) TerminalOf(ev sse.Event) Terminal {
	data := []byte(ev.Data)
	if ev.Truncated {
		return d.terminalOfPrefix(&sse.RawEvent{Type: ev.Type, Data: data, HasData: ev.HasData})
	}
	return d.terminalOf(ev.Type, ev.HasData, data, payload(ev.HasData, data))
}

// terminalOfPrefix is TerminalOf for an event too large to hold (sse.Event.Truncated): its event
// type decides, or for a data-only event the "type" member when it is the first member of the
// data's JSON object (as every provider writes it). Chat's [DONE] and error objects are small,
// so a truncated chat event is never terminal unless its event type says error.
func (d Dialect) terminalOfPrefix(ev *sse.RawEvent) Terminal {
	switch d {
	case Responses, Messages:
		if t := d.terminalType(ev.Type); t != TerminalNone {
			return t
		}
		if ev.Type == "" || ev.Type == "message" {
			if typ, ok := leadingType(ev.Data); ok {
				return d.terminalType(string(typ))
			}
		}
	case Chat:
		if ev.Type == "error" {
			return TerminalError
		}
	}
	return TerminalNone
}

// leadingType returns the text of the "type" member when it is the first member of the JSON
// object that data starts with (the rest of data may be cut off).
func leadingType(data []byte) ([]byte, bool) {
	i := jsonscan.SkipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	i = jsonscan.SkipWS(data, i+1)
	const key = `"type"`
	if len(data)-i < len(key) || string(data[i:i+len(key)]) != key {
		return nil, false
	}
	i = jsonscan.SkipWS(data, i+len(key))
	if i >= len(data) || data[i] != ':' {
		return nil, false
	}
	i = jsonscan.SkipWS(data, i+1)
	if i >= len(data) || data[i] != '"' {
		return nil, false
	}
	e := jsonscan.SkipString(data, i)
	if e > len(data) || e <= i+1 || data[e-1] != '"' {
		return nil, false
	}
	return jsonscan.Text(data[i:e])
}

// terminalOf is TerminalOf with the event's data already decoded by payload (nil when it is not
// a JSON object).
func (d Dialect) terminalOf(typ string, hasData bool, data, obj []byte) Terminal {
	switch d {
	case Responses, Messages:
		if t := d.terminalType(typ); t != TerminalNone {
			return t
		}
		if (typ == "" || typ == "message") && obj != nil {
			if typ, ok := jsonscan.Text(jsonscan.Lookup(obj, "type")); ok {
				return d.terminalType(string(typ))
			}
		}
	case Chat:
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
	}
	return TerminalNone
}

// terminalType maps an event type name to its terminal kind for the Responses and Messages
// dialects.
func (d Dialect) terminalType(typ string) Terminal {
	switch d {
	case Responses:
		switch typ {
		case "response.completed":
			return TerminalComplete
		case "response.incomplete":
			return TerminalIncomplete
		case "response.failed", "error":
			return TerminalError
		}
	case Messages:
		switch typ {
		case "message_stop":
			return TerminalComplete
		case "error":
			return TerminalError
		}
	}
	return TerminalNone
}
