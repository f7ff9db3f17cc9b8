package dialect

import (
	"github.com/modelcalls/modelcalls/sse"
)

// behaviour is everything modelcalls knows about one dialect beyond its name. Each dialect's
// entry lives beside its reassembly (openai.go, anthropic.go, gemini.go); Dialect's methods and
// this package's functions dispatch to it, so adding a dialect is one type and one registry line.
type behaviour interface {
	// observes reports whether path (rollout prefix and query stripped) is a call of the dialect.
	observes(path string) bool
	// path is the path (or path pattern) the dialect is observed on, for people to read.
	path() string
	// pathModel is the model an observed path names, "" when its paths name none.
	pathModel(path string) string
	// pathStream reports whether a call on path with query rawQuery asks for an event stream, and
	// whether the path says so at all (known false: the request body says, as "stream" does).
	pathStream(path, rawQuery string) (stream, known bool)
	// terminal is Dialect.terminalOf: obj is the event's data when it is a JSON object, else nil.
	terminal(typ string, hasData bool, data, obj []byte) Terminal
	// terminalPrefix is Dialect.terminalOfPrefix, for an event too large to hold.
	terminalPrefix(ev *sse.RawEvent) Terminal
	// reassembler returns the state that rebuilds one streamed response; long texts go through
	// sp, and the elements it creates count against lim (MaxElements).
	reassembler(sp *spill, lim *budget) reassembler
	// errorBody is ErrorBody for the dialect.
	errorBody(status int, code, message string) []byte
	// provider is Dialect.Provider.
	provider() string
	// env lists the environment variables that point the dialect's SDKs and agents at base, the
	// gateway's address with the rollout prefix and without a trailing slash (ClientEnv).
	env(base string) []EnvVar
	// request and response add what a request or response object of the dialect's shape holds to
	// c (ParseRequest, ParseResponse); r maps the object's members. They read only the members
	// their shape owns, so one object is read by every entry in turn.
	request(r members, c *Conversation)
	response(r members, c *Conversation)
	// toolCalls hands the tool calls and reasoning of a response to x when the response has the
	// dialect's shape (its member in m is a JSON array), and reports whether it had (ToolCalls,
	// which calls it on the concrete type).
	toolCalls(m *ResponseMembers, x Sink) bool
	// finishReason returns the raw finish reason of a response in the dialect's shape, and whether
	// the shape decided it (FinishReason, which calls it on the concrete type).
	finishReason(m *ResponseMembers) (raw []byte, decided bool)
}

// entries is the registry: one line per dialect, in the order of All, which is also the order in
// which ToolCalls tries the shapes. finish is the dialect's place in FinishReason's order (NeMo
// Gym's order of the first three, then Gemini).
var entries = [...]struct {
	d      Dialect
	b      behaviour
	finish int
}{
	{Responses, responsesDialect{}, 2},
	{Chat, chatDialect{}, 1},
	{Messages, messagesDialect{}, 0},
	{Gemini, geminiDialect{}, 3},
	{Completions, completionsDialect{}, 4}, // its shape is Chat's choices: read by Chat's entry
}

// registry maps each dialect to its entry.
var registry = func() map[Dialect]behaviour {
	m := make(map[Dialect]behaviour, len(entries))
	for _, e := range entries {
		m[e.d] = e.b
	}
	return m
}()

// StreamOnPath reports whether a model call on path (prefix stripped) with query rawQuery asks
// for an event stream, when its dialect says so in the URL: Gemini's :streamGenerateContent with
// alt=sse (known true). For the OpenAI and Anthropic paths the request body's "stream" says, and
// known is false.
func StreamOnPath(path, rawQuery string) (stream, known bool) {
	for _, d := range All {
		if b := registry[d]; b.observes(path) {
			return b.pathStream(path, rawQuery)
		}
	}
	return false, false
}

// EnvVar is one environment variable a client reads its base URL from.
type EnvVar struct {
	Name, Value string
}

// ClientEnv returns the environment variables that point the SDKs and agents of every dialect at
// base (the gateway's address with the /ng-rollout/<id> prefix, no trailing slash), in the order
// of All, each name once:
//
//	OPENAI_BASE_URL, OPENAI_API_BASE   base + "/v1"   OpenAI SDKs, LiteLLM-style tools (responses, chat)
//	ANTHROPIC_BASE_URL                 base           Anthropic SDKs, Claude Code (messages)
//	GOOGLE_GEMINI_BASE_URL             base           Google Gen AI SDK, Gemini CLI (gemini)
func ClientEnv(base string) []EnvVar {
	var out []EnvVar
	seen := map[string]bool{}
	for _, d := range All {
		for _, v := range registry[d].env(base) {
			if !seen[v.Name] {
				seen[v.Name] = true
				out = append(out, v)
			}
		}
	}
	return out
}
