package dialect

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/sse"
)

// completionsDialect is the legacy Completions API: POST /v1/completions, whose prompt is text or
// token ids (the token-in path RL loops use against vLLM, SGLang and llama-server). Its answer is
// {"id", "object": "text_completion", "created", "model", "choices": [{"index", "text",
// "logprobs", "finish_reason"}], "usage"}; a stream sends chunks of that shape, each choice's text
// a piece, and ends with data: [DONE], as Chat's does. Its errors are OpenAI's. Its tool calls,
// reasoning and finish reason are read by Chat's shape (choices), which it shares.
type completionsDialect struct{}

func (completionsDialect) observes(path string) bool              { return path == "/v1/completions" }
func (completionsDialect) path() string                           { return "/v1/completions" }
func (completionsDialect) pathModel(string) string                { return "" }
func (completionsDialect) pathStream(string, string) (bool, bool) { return false, false }
func (completionsDialect) provider() string                       { return "openai" }
func (completionsDialect) reassembler(sp *spill, lim *budget) reassembler {
	return &completionsState{sp: sp, lim: lim}
}
func (completionsDialect) env(base string) []EnvVar { return openAIEnv(base) }

func (completionsDialect) errorBody(status int, code, message string) []byte {
	return openAIErrorBody(status, code, message)
}

// terminal and terminalPrefix are Chat's: [DONE] completes, an error event or object fails.
func (completionsDialect) terminal(typ string, hasData bool, data, obj []byte) Terminal {
	return chatDialect{}.terminal(typ, hasData, data, obj)
}

func (completionsDialect) terminalPrefix(ev *sse.RawEvent) Terminal {
	return chatDialect{}.terminalPrefix(ev)
}

// request reads "prompt" as one user message: a string as its text, a list of strings as one text
// each, token ids (a list of integers) as the ids' JSON text, a list of id lists as one each.
func (completionsDialect) request(r members, c *Conversation) {
	p, ok := r["prompt"]
	if !ok || isNull(p) {
		return
	}
	var parts []Part
	if s, ok := asString(p); ok {
		parts = append(parts, Part{Kind: "text", Text: s})
	} else {
		var list []json.RawMessage
		if json.Unmarshal(p, &list) != nil {
			parts = append(parts, Part{Kind: "other", Text: string(p)})
		} else if promptIDs(p) {
			parts = append(parts, Part{Kind: "other", Name: "token_ids", Text: plainJSON(p)})
		} else {
			for _, el := range list {
				if s, ok := asString(el); ok {
					parts = append(parts, Part{Kind: "text", Text: s})
				} else {
					parts = append(parts, Part{Kind: "other", Name: "token_ids", Text: plainJSON(el)})
				}
			}
		}
	}
	c.Input = append(c.Input, Message{Role: "user", Parts: parts})
}

// promptIDs reports whether p is a list of integers (a prompt of token ids).
func promptIDs(p json.RawMessage) bool {
	var ids []int64
	return json.Unmarshal(p, &ids) == nil
}

// PromptKind says what a Completions request's prompt is.
type PromptKind int

// The kinds of Completions prompt.
const (
	// PromptNone: no prompt, null, or a value of no documented shape.
	PromptNone PromptKind = iota
	// PromptText: one prompt with text in it: a string, or a list mixing token ids and strings
	// (llama-server reads such a list as one prompt, tokenizing its strings in place).
	PromptText
	// PromptIDs: one prompt of token ids only.
	PromptIDs
	// PromptBatch: several prompts (a list of several strings or id lists), one answer choice each.
	PromptBatch
)

// CompletionsPrompt returns the one prompt of a Completions request body, as its JSON value, and
// its kind. A list of one prompt (one string, one id list) is that prompt. For PromptBatch and
// PromptNone the value is nil. body that is not one valid JSON object has PromptNone.
func CompletionsPrompt(body []byte) (json.RawMessage, PromptKind) {
	t := jsonscan.TrimWS(body)
	if !jsonscan.IsObject(t) || jsonscan.Validate(t) != nil {
		return nil, PromptNone
	}
	p := jsonscan.Lookup(t, "prompt")
	kind := promptKind(p, true)
	if kind == PromptNone || kind == PromptBatch {
		return nil, kind
	}
	if jsonscan.IsArray(p) {
		var only []byte
		n := 0
		jsonscan.EachElement(p, func(e []byte) bool {
			only = e
			n++
			return true
		})
		if n == 1 && (jsonscan.IsString(only) || jsonscan.IsArray(only)) {
			p = only // a list of one prompt
		}
	}
	return json.RawMessage(p), kind
}

// fitsInt64 reports whether an integer literal is a token id an int64 holds.
func fitsInt64(v []byte) bool {
	_, err := strconv.ParseInt(string(v), 10, 64)
	return err == nil
}

// promptKind classifies a prompt value; top is false inside a list, where only one level of
// lists (of ids, or of ids and strings) may follow. An integer beyond int64 is no token id.
func promptKind(p []byte, top bool) PromptKind {
	if jsonscan.IsString(p) {
		return PromptText
	}
	if !jsonscan.IsArray(p) {
		return PromptNone
	}
	var ints, strs, lists int
	var kinds []PromptKind
	ok := true
	jsonscan.EachElement(p, func(e []byte) bool {
		switch {
		case jsonscan.IsInt(e) && fitsInt64(e):
			ints++
		case jsonscan.IsString(e):
			strs++
		case top && jsonscan.IsArray(e):
			lists++
			kinds = append(kinds, promptKind(e, false))
		default:
			ok = false
		}
		return ok
	})
	n := ints + strs + lists
	switch {
	case !ok || n == 0:
		return PromptNone
	case ints > 0 && lists == 0 && strs == 0:
		return PromptIDs
	case ints > 0 && lists == 0:
		return PromptText // ids and strings: one prompt
	case ints > 0:
		return PromptNone
	case n > 1:
		return PromptBatch
	case strs == 1:
		return PromptText
	}
	if k := kinds[0]; k == PromptIDs || k == PromptText {
		return k
	}
	return PromptNone
}

// response reads choices[].text, each choice one assistant message, when the response is a
// text_completion (a Chat answer's choices have no text).
func (completionsDialect) response(r members, c *Conversation) {
	if str(r["object"]) != "text_completion" {
		return
	}
	var list []members
	decodeMemberList(r["choices"], &list)
	for _, ch := range list {
		if t, ok := asString(ch["text"]); ok {
			c.Output = append(c.Output, Message{Role: "assistant", Parts: []Part{{Kind: "text", Text: t}}})
		}
	}
}

// toolCalls: the Completions shape is Chat's choices, read by Chat's entry; this one reads none.
func (completionsDialect) toolCalls(*ResponseMembers, Sink) bool { return false }

// finishReason: choices[0].finish_reason, read by Chat's entry; this one decides nothing.
func (completionsDialect) finishReason(*ResponseMembers) ([]byte, bool) { return nil, false }

// completionsState rebuilds a Completions response from its chunks: the last truthy model and
// usage, the last string id and created, and per choice index its text pieces joined, its last
// truthy finish_reason, and what the engine streams as the non-streaming answer carries it: the
// legacy logprobs arrays (tokens, token_logprobs, top_logprobs, text_offset) concatenated, or
// llama-server's logprobs.content entries concatenated (its Completions answers use Chat's
// shape), vLLM's token_ids concatenated and its first prompt_token_ids.
type completionsState struct {
	model, id, created, usage []byte
	choices                   map[int64]*completionsChoice
	sp                        *spill
	lim                       *budget
}

type completionsChoice struct {
	text          text
	logprobs      bool // some chunk had a logprobs object
	tokens        ids
	tokenLogprobs ids
	topLogprobs   ids
	textOffset    ids
	content       ids // llama-server's logprobs.content entries
	choiceTail
}

func (c *completionsState) add(ev []byte) {
	if m := jsonscan.Lookup(ev, "model"); jsonscan.Truthy(m) {
		c.model = keep(c.model, m)
	}
	if id := jsonscan.Lookup(ev, "id"); jsonscan.IsString(id) {
		c.id = keep(c.id, id)
	}
	if v := jsonscan.Lookup(ev, "created"); jsonscan.IsInt(v) {
		c.created = keep(c.created, v)
	}
	if u := jsonscan.Lookup(ev, "usage"); jsonscan.Truthy(u) {
		c.usage = keep(c.usage, u)
	}
	jsonscan.EachElement(jsonscan.Lookup(ev, "choices"), func(ch []byte) bool {
		if jsonscan.IsObject(ch) {
			c.choice(ch)
		}
		return !c.lim.done()
	})
}

func (c *completionsState) choice(ch []byte) {
	idx, ok := choiceIndex(ch)
	if !ok {
		return // malformed choice index: skip the choice
	}
	st, ok := entry(&c.choices, idx, c.lim)
	if !ok {
		return
	}
	if v, ok := jsonscan.Text(jsonscan.Lookup(ch, "text")); ok && len(v) > 0 {
		st.text.append(v, c.sp)
	}
	st.choiceTail.add(ch)
	if lp := jsonscan.Lookup(ch, "logprobs"); jsonscan.IsObject(lp) {
		st.logprobs = true
		st.tokens.add(jsonscan.Lookup(lp, "tokens"))
		st.tokenLogprobs.add(jsonscan.Lookup(lp, "token_logprobs"))
		st.topLogprobs.add(jsonscan.Lookup(lp, "top_logprobs"))
		st.textOffset.add(jsonscan.Lookup(lp, "text_offset"))
		st.content.add(jsonscan.Lookup(lp, "content"))
	}
}

func (c *completionsState) has() bool { return len(c.choices) > 0 }

// encode writes {"id", "object": "text_completion", "created", "model", "choices", "usage"}, id,
// created and usage only when some chunk had them; a choice is {"index", "text", "logprobs",
// "finish_reason"} (logprobs null when no chunk had one; the legacy arrays, unless the chunks
// carried only content entries, then {"content": [...]}), then token_ids and prompt_token_ids
// when seen.
func (c *completionsState) encode(e *enc) {
	e.raw("{")
	if c.id != nil {
		e.raw(`"id":`)
		e.bytes(c.id)
		e.raw(",")
	}
	e.raw(`"object":"text_completion",`)
	if c.created != nil {
		e.raw(`"created":`)
		e.bytes(c.created)
		e.raw(",")
	}
	e.raw(`"model":`)
	if c.model != nil {
		e.bytes(c.model)
	} else {
		e.raw("null")
	}
	e.raw(`,"choices":[`)
	for i, idx := range slices.Sorted(maps.Keys(c.choices)) {
		e.comma(i)
		c.choices[idx].encode(e, idx)
	}
	e.raw("]")
	if c.usage != nil {
		e.raw(`,"usage":`)
		e.bytes(c.usage)
	}
	e.raw("}")
}

func (st *completionsChoice) encode(e *enc, idx int64) {
	e.raw(`{"index":`)
	e.b = strconv.AppendInt(e.b, idx, 10)
	e.raw(`,"text":`)
	e.text(&st.text)
	e.raw(`,"logprobs":`)
	legacy := st.tokens.seen || st.tokenLogprobs.seen || st.topLogprobs.seen || st.textOffset.seen || !st.content.seen
	switch {
	case st.logprobs && legacy:
		e.raw(`{"tokens":`)
		st.tokens.encode(e)
		e.raw(`,"token_logprobs":`)
		st.tokenLogprobs.encode(e)
		e.raw(`,"top_logprobs":`)
		st.topLogprobs.encode(e)
		e.raw(`,"text_offset":`)
		st.textOffset.encode(e)
		if st.content.seen {
			e.raw(`,"content":`)
			st.content.encode(e)
		}
		e.raw("}")
	case st.logprobs:
		e.raw(`{"content":`)
		st.content.encode(e)
		e.raw("}")
	default:
		e.raw("null")
	}
	st.choiceTail.encode(e)
	e.raw("}")
}
