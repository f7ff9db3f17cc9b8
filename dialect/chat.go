package dialect

import (
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// chatState rebuilds an OpenAI Chat Completions response from its chunks, as NeMo Gym's stream
// reconstruction does (last truthy model and usage, last string id, content and reasoning
// fragments joined, tool-call arguments appended per slot), except that an n > 1 stream keeps
// one choice per choice index (Gym merges every choice into one message) and tool-call deltas
// follow the id rules of toolDelta. Token ids and logprobs the engine streams are kept as the
// non-streaming answer carries them (Gym keeps them only in the raw body): vLLM's prompt_token_ids
// (first chunk) and per-choice token_ids, each choice's logprobs.content, SGLang's per-choice
// prompt_token_ids and its sglext (one, in a last chunk without choices).
type chatState struct {
	model     []byte // last truthy chunk model
	id        []byte // last chunk id that is a string
	usage     []byte // last truthy chunk usage
	promptIDs []byte // first prompt_token_ids that is an array (vLLM)
	sglext    []byte // last truthy sglext (SGLang: input_ids, output_ids)
	choices   map[int64]*chatChoice
	sp        *spill
	lim       *budget
}

type chatChoice struct {
	role         []byte // last truthy delta role; "assistant" when never given
	content      text
	hasContent   bool
	reasoning    text
	hasReasoning bool
	logprobs     ids // logprobs.content of every chunk, concatenated
	calls        []*toolCall
	byIndex      map[int64]*toolCall // the latest call of each index, once calls passes toolCallScan
	last         *toolCall           // the call the previous tool-call delta went to
	choiceTail
}

// toolCallScan is the call count up to which a tool-call delta's index is looked up by scanning
// the calls; past it chatChoice.byIndex is kept, so that n deltas with distinct indexes cost O(n),
// not O(n²).
const toolCallScan = 8

type toolCall struct {
	index int64 // the delta index it was created for; calls are sorted by it, then by creation
	id    string
	hasID bool
	name  []byte
	args  text
}

func (c *chatState) add(ev []byte) {
	if m := jsonscan.Lookup(ev, "model"); jsonscan.Truthy(m) {
		c.model = keep(c.model, m)
	}
	if id := jsonscan.Lookup(ev, "id"); jsonscan.IsString(id) {
		c.id = keep(c.id, id)
	}
	if u := jsonscan.Lookup(ev, "usage"); jsonscan.Truthy(u) {
		c.usage = keep(c.usage, u)
	}
	if p := jsonscan.Lookup(ev, "prompt_token_ids"); c.promptIDs == nil && jsonscan.IsArray(p) {
		c.promptIDs = compact(p)
	}
	if s := jsonscan.Lookup(ev, "sglext"); jsonscan.Truthy(s) {
		c.sglext = keep(c.sglext, s)
	}
	jsonscan.EachElement(jsonscan.Lookup(ev, "choices"), func(ch []byte) bool {
		if jsonscan.IsObject(ch) {
			c.choice(ch)
		}
		return !c.lim.done()
	})
}

// choiceIndex is a streamed choice's "index": 0 when absent or null, as OpenAI's Chat and
// Completions streams of one choice may omit it; ok is false when it is not an integer.
func choiceIndex(ch []byte) (idx int64, ok bool) {
	v := jsonscan.Lookup(ch, "index")
	if jsonscan.IsNull(v) {
		return 0, true
	}
	return jsonscan.Int(v)
}

// choiceTail is what a Chat or Completions stream chunk carries per choice beside its own content,
// in the same members on both APIs: the last truthy finish_reason, the generated ids of every
// chunk concatenated (vLLM's token_ids) and the first prompt_token_ids that is an array (SGLang's
// per choice on Chat, vLLM's on Completions).
type choiceTail struct {
	finish    []byte
	tokenIDs  ids
	promptIDs []byte
}

// add reads a streamed choice object's tail members.
func (t *choiceTail) add(ch []byte) {
	if fr := jsonscan.Lookup(ch, "finish_reason"); jsonscan.Truthy(fr) {
		t.finish = keep(t.finish, fr)
	}
	t.tokenIDs.add(jsonscan.Lookup(ch, "token_ids"))
	if p := jsonscan.Lookup(ch, "prompt_token_ids"); t.promptIDs == nil && jsonscan.IsArray(p) {
		t.promptIDs = compact(p)
	}
}

// encode writes ,"finish_reason":F (null when none came), then "token_ids" and
// "prompt_token_ids" when a chunk carried them, as the non-streaming answer's choice ends.
func (t *choiceTail) encode(e *enc) {
	e.raw(`,"finish_reason":`)
	if t.finish != nil {
		e.bytes(t.finish)
	} else {
		e.raw("null")
	}
	if t.tokenIDs.seen {
		e.raw(`,"token_ids":`)
		t.tokenIDs.encode(e)
	}
	if t.promptIDs != nil {
		e.raw(`,"prompt_token_ids":`)
		e.bytes(t.promptIDs)
	}
}

func (c *chatState) choice(ch []byte) {
	idx, ok := choiceIndex(ch)
	if !ok {
		return // malformed choice index: skip the choice
	}
	st, ok := entry(&c.choices, idx, c.lim)
	if !ok {
		return
	}
	st.choiceTail.add(ch)
	if lp := jsonscan.Lookup(ch, "logprobs"); jsonscan.IsObject(lp) {
		st.logprobs.add(jsonscan.Lookup(lp, "content"))
	}
	delta := jsonscan.Lookup(ch, "delta")
	if !jsonscan.IsObject(delta) {
		return // falsy, or malformed: nothing to merge
	}
	if r := jsonscan.Lookup(delta, "role"); jsonscan.Truthy(r) {
		st.role = keep(st.role, r)
	}
	if v, ok := jsonscan.Text(jsonscan.Lookup(delta, "content")); ok && len(v) > 0 {
		st.content.append(v, c.sp)
		st.hasContent = true
	}
	rc := jsonscan.Lookup(delta, "reasoning_content")
	if !jsonscan.Truthy(rc) {
		rc = jsonscan.Lookup(delta, "reasoning")
	}
	if v, ok := jsonscan.Text(rc); ok && len(v) > 0 {
		st.reasoning.append(v, c.sp)
		st.hasReasoning = true
	}
	jsonscan.EachElement(jsonscan.Lookup(delta, "tool_calls"), func(tc []byte) bool {
		if jsonscan.IsObject(tc) {
			st.toolDelta(tc, c.sp, c.lim)
		}
		return !c.lim.done()
	})
}

// toolDelta applies one tool-call delta: a delta without index (or with a null index)
// continues the last call; a non-empty id that differs from the id its call already holds starts
// a new call with the same index; an empty id never starts a call. Real servers need each rule:
// some send every parallel call whole with index 0, and Qwen (DashScope) sends "id": "" on
// continuation deltas.
func (st *chatChoice) toolDelta(tc []byte, sp *spill, lim *budget) {
	fn := jsonscan.Lookup(tc, "function")
	if jsonscan.Truthy(fn) && !jsonscan.IsObject(fn) {
		return // malformed function member: skip the whole delta
	}
	var call *toolCall
	iv := jsonscan.Lookup(tc, "index")
	if jsonscan.IsNull(iv) {
		call = st.last
		if call == nil {
			if call = st.newCall(0, lim); call == nil {
				return
			}
		}
	} else {
		idx, ok := jsonscan.Int(iv)
		if !ok {
			return // malformed index: skip the delta
		}
		if call = st.callAt(idx); call == nil {
			if call = st.newCall(idx, lim); call == nil {
				return
			}
		}
	}
	if id, ok := jsonscan.Text(jsonscan.Lookup(tc, "id")); ok && len(id) > 0 {
		if call.hasID && call.id != string(id) {
			if call = st.newCall(call.index, lim); call == nil {
				return
			}
		}
		if !call.hasID {
			call.id, call.hasID = string(id), true
		}
	}
	st.last = call
	if name := jsonscan.Lookup(fn, "name"); jsonscan.Truthy(name) {
		if s, ok := jsonscan.AppendText(nil, name); ok {
			call.name = s
		}
	}
	if args, ok := jsonscan.Text(jsonscan.Lookup(fn, "arguments")); ok && len(args) > 0 {
		call.args.append(args, sp)
	}
}

// callAt returns the latest call created for index idx, nil when there is none.
func (st *chatChoice) callAt(idx int64) *toolCall {
	if st.byIndex != nil {
		return st.byIndex[idx]
	}
	for i := len(st.calls) - 1; i >= 0; i-- {
		if st.calls[i].index == idx {
			return st.calls[i]
		}
	}
	return nil
}

// newCall starts a call for index idx; nil when lim refuses another element.
func (st *chatChoice) newCall(idx int64, lim *budget) *toolCall {
	if !lim.take(1) {
		return nil
	}
	call := &toolCall{index: idx}
	st.calls = append(st.calls, call)
	switch {
	case st.byIndex != nil:
		st.byIndex[idx] = call
	case len(st.calls) > toolCallScan:
		st.byIndex = make(map[int64]*toolCall, 2*len(st.calls))
		for _, c := range st.calls { // in creation order: the latest call of an index wins
			st.byIndex[c.index] = c
		}
	}
	return call
}

func (c *chatState) has() bool { return len(c.choices) > 0 }

func (c *chatState) encode(e *enc) {
	e.raw(`{"object":"chat.completion","model":`)
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
	if c.id != nil {
		e.raw(`,"id":`)
		e.bytes(c.id)
	}
	if c.usage != nil {
		e.raw(`,"usage":`)
		e.bytes(c.usage)
	}
	if c.promptIDs != nil {
		e.raw(`,"prompt_token_ids":`)
		e.bytes(c.promptIDs)
	}
	if c.sglext != nil {
		e.raw(`,"sglext":`)
		e.bytes(c.sglext)
	}
	e.raw("}")
}

// ids concatenates the elements of the arrays a stream sends piecewise (token ids, logprob
// entries): each array's compacted elements are appended, so memory and work are linear in the
// bytes received. An array member that is absent, null or not an array adds nothing; seen says
// some chunk had one (even empty).
type ids struct {
	elems []byte // the elements, comma-separated, without brackets
	seen  bool
}

func (a *ids) add(arr []byte) {
	if !jsonscan.IsArray(arr) {
		return
	}
	a.seen = true
	inner := jsonscan.TrimWS(arr[1 : len(arr)-1])
	if len(inner) == 0 {
		return
	}
	if len(a.elems) > 0 {
		a.elems = append(a.elems, ',')
	}
	a.elems = appendCompact(a.elems, inner)
}

// encode writes the concatenation as one JSON array.
func (a *ids) encode(e *enc) {
	e.raw("[")
	e.bytes(a.elems)
	e.raw("]")
}

func (st *chatChoice) encode(e *enc, idx int64) {
	e.raw(`{"index":`)
	e.b = strconv.AppendInt(e.b, idx, 10)
	e.raw(`,"message":{"role":`)
	if st.role != nil {
		e.bytes(st.role)
	} else {
		e.raw(`"assistant"`)
	}
	e.raw(`,"content":`)
	if st.hasContent {
		e.text(&st.content)
	} else {
		e.raw("null")
	}
	if st.hasReasoning {
		e.raw(`,"reasoning_content":`)
		e.text(&st.reasoning)
	}
	if len(st.calls) > 0 {
		calls := append([]*toolCall(nil), st.calls...)
		sort.SliceStable(calls, func(i, j int) bool { return calls[i].index < calls[j].index })
		e.raw(`,"tool_calls":[`)
		for i, call := range calls {
			e.comma(i)
			e.raw(`{"id":`)
			if call.hasID {
				e.str(call.id)
			} else {
				e.raw("null")
			}
			e.raw(`,"type":"function","function":{"name":`)
			e.b = jsonscan.AppendString(e.b, call.name)
			e.raw(`,"arguments":`)
			if call.args.size() == 0 {
				// No argument text was streamed: the non-streaming API answers a call without
				// arguments with "{}", so the record's arguments come out {} (not {"_raw": ""}).
				e.raw(`"{}"`)
			} else {
				e.text(&call.args)
			}
			e.raw("}}")
		}
		e.raw("]")
	}
	e.raw("}")
	if st.logprobs.seen {
		e.raw(`,"logprobs":{"content":`)
		st.logprobs.encode(e)
		e.raw("}")
	}
	st.choiceTail.encode(e)
	e.raw("}")
}
