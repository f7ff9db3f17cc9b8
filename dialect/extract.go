package dialect

import "github.com/modelcalls/modelcalls/internal/jsonscan"

// Extraction from a response object: which dialect's shape it has, its tool calls and reasoning,
// its finish reason. The shape decides, not the call's dialect (a Chat-shaped body on a responses
// line still extracts), as NeMo Gym's record builder decides. The record builder walks the response
// once into ResponseMembers and hands them here; values are raw JSON (validated by the caller),
// read through Tree when it indexes them (package jsonscan), and decoded by the caller, which owns
// its strings.

// ResponseMembers are the members of a response object that tell its shape and hold its tool
// calls, reasoning and finish reason: raw JSON values, nil when absent.
type ResponseMembers struct {
	Output     []byte // Responses: the output items
	Choices    []byte // Chat Completions: the choices
	Content    []byte // Messages: the content blocks
	Candidates []byte // Gemini: the candidates

	StopReason        []byte // Messages' stop_reason
	IncompleteDetails []byte // Responses' incomplete_details

	Tree *jsonscan.Tree // the index the values are read through (nil: walked as text)
}

// RawToolCall is one tool call as the response holds it: raw JSON values, nil when absent.
type RawToolCall struct {
	CallID, Name, Args []byte
	// ArgsObject says Args is an object member (Messages' input, Gemini's args): a value that is
	// not truthy means no arguments ({}). Otherwise Args is Responses' or Chat's arguments (a
	// string of JSON, as the APIs send it).
	ArgsObject bool
}

// Sink receives what ToolCalls finds, in response order: each tool call, and each reasoning text
// as a raw JSON string (the response's own, unjoined). Both are called while ToolCalls runs, and
// the values they get are slices of the response: a caller keeps what it needs of them.
type Sink struct {
	Call      func(RawToolCall)
	Reasoning func(text []byte)
}

// ToolCalls hands the tool calls and reasoning texts of the response to x, read in the first shape
// whose member is a JSON array, in the order of All: Responses output, Chat choices, Messages
// content, Gemini candidates (an output array, even empty, ends the search, as in NeMo Gym). It
// reports false when the response has none of the shapes. What each shape counts is on its
// entry's toolCalls (openai.go, anthropic.go, gemini.go).
//
// The record builder calls this for every record, so the entries' readers are called here as the
// concrete types they are, in the registry's order written out (TestShapeOrder holds it to the
// registry), not through the behaviour interface: what passes through an interface call cannot
// stay on the caller's stack, and the state that had to move to the heap (or be pooled) and the
// dispatch cost the record builder a tenth of its time.
func ToolCalls(m *ResponseMembers, x Sink) bool {
	return responsesDialect{}.toolCalls(m, x) || chatDialect{}.toolCalls(m, x) ||
		messagesDialect{}.toolCalls(m, x) || geminiDialect{}.toolCalls(m, x)
}

// FinishReason returns the raw value of why generation stopped, to be read as a string (nil when
// none): the first shape that decides, in NeMo Gym's order: Messages stop_reason when a string,
// Chat choices[0].finish_reason (when choices is a non-empty array whose first item is an object
// and that member is a string), Responses incomplete_details.reason (when incomplete_details is an
// object), then Gemini candidates[0].finishReason (when candidates is a non-empty array whose first
// item is an object).
//
// Like ToolCalls, it calls the entries' readers directly, in the order of their finish places in
// the registry, written out (TestShapeOrder).
func FinishReason(m *ResponseMembers) []byte {
	if v, ok := (messagesDialect{}).finishReason(m); ok {
		return v
	}
	if v, ok := (chatDialect{}).finishReason(m); ok {
		return v
	}
	if v, ok := (responsesDialect{}).finishReason(m); ok {
		return v
	}
	v, _ := geminiDialect{}.finishReason(m)
	return v
}

// firstElement returns the first element of arr (nil when arr is not a non-empty array).
func firstElement(t *jsonscan.Tree, arr []byte) []byte {
	var first []byte
	t.EachElement(arr, func(v []byte) bool {
		first = v
		return false
	})
	return first
}

// nonEmptyString reports whether v is a JSON string other than "".
func nonEmptyString(v []byte) bool { return jsonscan.IsString(v) && len(v) > 2 }

// ResponseModelUsage reads what a response object says about itself at its top level, in whichever
// dialect's members say it: the model that answered ("model", else Gemini's "modelVersion"; each a
// non-empty string, else none) and the raw usage object ("usage", else Gemini's "usageMetadata";
// nil when neither is present). The last member of a name wins, as the record builder reads them.
// The gateway's access log and the OpenTelemetry export read a response through it; the record
// builder has its own walk of the same members (package record).
func ResponseModelUsage(obj []byte) (model string, usage []byte) {
	var version string
	var metadata []byte
	jsonscan.EachMember(obj, func(key, v []byte) bool {
		switch {
		case jsonscan.KeyIs(key, "model"):
			model, _ = jsonscan.String(v)
		case jsonscan.KeyIs(key, "usage"):
			usage = v
		case jsonscan.KeyIs(key, "modelVersion"):
			version, _ = jsonscan.String(v)
		case jsonscan.KeyIs(key, "usageMetadata"):
			metadata = v
		}
		return true
	})
	if model == "" {
		model = version
	}
	if usage == nil {
		usage = metadata
	}
	return model, usage
}
