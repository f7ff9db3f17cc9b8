package dialect

import (
	"strconv"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/sse"
)

// Dialect names one observed wire API. Its value is the exchange's "dialect" field in a capture
// line, with NeMo Gym's values "responses", "chat" and "messages", and ours, "gemini". Everything
// the product knows about a dialect is reached through its value (the methods below, ErrorBody,
// NewStream, ParseRequest and ParseResponse, ClientEnv), each dispatching to the dialect's entry
// in the registry (registry.go); no other package tells dialects apart by name.
type Dialect string

// The observed dialects.
const (
	Responses Dialect = "responses" // OpenAI Responses API, POST /v1/responses
	Chat      Dialect = "chat"      // OpenAI Chat Completions API, POST /v1/chat/completions
	Messages  Dialect = "messages"  // Anthropic Messages API, POST /v1/messages
	// Gemini is Google's Gemini API, POST /{version}/models/{model}:generateContent and
	// :streamGenerateContent (gemini.go). NeMo Gym has no such value.
	Gemini Dialect = "gemini"
	// Completions is OpenAI's legacy Completions API, POST /v1/completions (completions.go), the
	// text or token-ids prompt of vLLM, SGLang and llama-server. NeMo Gym has no such value.
	Completions Dialect = "completions"
)

// ForPath returns the dialect observed on path, which must already have its /ng-rollout/<id>
// prefix and its query stripped. The OpenAI and Anthropic paths match exactly, as in NeMo Gym's
// capture middleware: "/v1/responses", "/v1/chat/completions" and "/v1/messages" only; a trailing
// slash, "/v1/models" or "/v1/messages/count_tokens" are not observed (ok false). Gemini's paths
// hold the model (see Gemini): "/v1beta/models/gemini-2.5-flash:generateContent".
func ForPath(path string) (Dialect, bool) {
	for _, d := range All {
		if registry[d].observes(path) {
			return d, true
		}
	}
	return "", false
}

// ErrorDialect returns the dialect whose error shape an answer to a request on path takes: the
// dialect observed on path, else Chat (OpenAI's shape, which most clients of other paths read).
func ErrorDialect(path string) Dialect {
	if d, ok := ForPath(path); ok {
		return d
	}
	return Chat
}

// ModelOfPath returns the model named by an observed path ("" when the dialect's paths name none,
// as the OpenAI and Anthropic paths do): Gemini's "/v1beta/models/gemini-2.5-flash:generateContent"
// names "gemini-2.5-flash".
func ModelOfPath(path string) string {
	for _, d := range All {
		if b := registry[d]; b.observes(path) {
			return b.pathModel(path)
		}
	}
	return ""
}

// All are the observed dialects, in the order Responses, Chat, Messages, Gemini (the registry's).
var All = func() [len(entries)]Dialect {
	var a [len(entries)]Dialect
	for i, e := range entries {
		a[i] = e.d
	}
	return a
}()

// Path returns the path d is observed on, without a /ng-rollout/<id> prefix: "/v1/responses",
// "/v1/chat/completions", "/v1/messages", or for Gemini the pattern
// "/v1beta/models/{model}:generateContent"; "" when d is not Valid.
func (d Dialect) Path() string {
	if b, ok := registry[d]; ok {
		return b.path()
	}
	return ""
}

// Valid reports whether d is one of the observed dialects.
func (d Dialect) Valid() bool {
	_, ok := registry[d]
	return ok
}

// Provider returns the owner of d's wire API, as OpenTelemetry's gen_ai.provider.name names it:
// "openai" (responses, chat), "anthropic" (messages), "gcp.gemini" (gemini); "" when d is not
// Valid. The server that answered may be any that speaks the API (vLLM, a router): the capture
// cannot tell, so the API's owner is the name.
func (d Dialect) Provider() string {
	if b, ok := registry[d]; ok {
		return b.provider()
	}
	return ""
}

// Terminal is the kind of terminal event a stream ended with; the kinds are NeMo Gym's
// (complete, incomplete, error), and each maps to the exchange's error category.
type Terminal int

// Terminal kinds. TerminalIncomplete is only produced by the Responses dialect.
const (
	TerminalNone       Terminal = iota // no terminal event (yet)
	TerminalComplete                   // response.completed, [DONE], message_stop, Gemini's finishReason
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
//	gemini:    see Gemini: the first event whose every candidate has a finishReason (or that
//	           answers a blocked prompt) → complete; event error, or an "error" object → error
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
// data's JSON object (as every provider writes it); each dialect's entry says which.
func (d Dialect) terminalOfPrefix(ev *sse.RawEvent) Terminal {
	if b, ok := registry[d]; ok {
		return b.terminalPrefix(ev)
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
	if b, ok := registry[d]; ok {
		return b.terminal(typ, hasData, data, obj)
	}
	return TerminalNone
}
