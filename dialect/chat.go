package dialect

import (
	"github.com/modelcalls/modelcalls/internal/jsonscan"

	"sort"
	"strconv"
)

// chatState rebuilds an OpenAI Chat Completions response from its chunks (reference §7.5 with
// SPEC §7: one choice per choice index, and the tool-call id rules).
type chatState struct {
	model   []byte // last truthy chunk model
	id      []byte // last chunk id that is a string
	usage   []byte // last truthy chunk usage
	choices map[int64]*chatChoice
}

type chatChoice struct {
	role         []byte // last truthy delta role; "assistant" when never given
	content      []byte
	hasContent   bool
	reasoning    []byte
	hasReasoning bool
	finish       []byte // last truthy finish_reason
	calls        []*toolCall
	last         *toolCall // the call the previous tool-call delta went to
}

type toolCall struct {
	index int64 // the delta index it was created for; calls are sorted by it, then by creation
	id    string
	hasID bool
	name  []byte
	args  []byte
}

func (c *chatState) add(ev []byte) {
	if m := field(ev, "model"); truthy(m) {
		c.model = keep(c.model, m)
	}
	if id := field(ev, "id"); kindOf(id) == '"' {
		c.id = keep(c.id, id)
	}
	if u := field(ev, "usage"); truthy(u) {
		c.usage = keep(c.usage, u)
	}
	eachElem(field(ev, "choices"), func(ch []byte) {
		if kindOf(ch) == '{' {
			c.choice(ch)
		}
	})
}

func (c *chatState) choice(ch []byte) {
	idx := int64(0)
	if v := field(ch, "index"); v != nil && !isNull(v) {
		var ok bool
		if idx, ok = intValue(v); !ok {
			return // malformed choice index: skip the choice
		}
	}
	if c.choices == nil {
		c.choices = make(map[int64]*chatChoice)
	}
	st := c.choices[idx]
	if st == nil {
		st = &chatChoice{}
		c.choices[idx] = st
	}
	if fr := field(ch, "finish_reason"); truthy(fr) {
		st.finish = keep(st.finish, fr)
	}
	delta := field(ch, "delta")
	if kindOf(delta) != '{' {
		return // falsy, or malformed: nothing to merge
	}
	if r := field(delta, "role"); truthy(r) {
		st.role = keep(st.role, r)
	}
	if v := field(delta, "content"); truthy(v) {
		var ok bool
		if st.content, ok = appendStringValue(st.content, v); ok {
			st.hasContent = true
		}
	}
	rc := field(delta, "reasoning_content")
	if !truthy(rc) {
		rc = field(delta, "reasoning")
	}
	if truthy(rc) {
		var ok bool
		if st.reasoning, ok = appendStringValue(st.reasoning, rc); ok {
			st.hasReasoning = true
		}
	}
	eachElem(field(delta, "tool_calls"), func(tc []byte) {
		if kindOf(tc) == '{' {
			st.toolDelta(tc)
		}
	})
}

// toolDelta applies one tool-call delta (SPEC §7): a delta without index (or with a null index)
// continues the last call; a non-empty id that differs from the id its call already holds starts
// a new call with the same index; an empty id never starts a call.
func (st *chatChoice) toolDelta(tc []byte) {
	fn := field(tc, "function")
	if truthy(fn) && kindOf(fn) != '{' {
		return // malformed function member: skip the whole delta
	}
	var call *toolCall
	iv := field(tc, "index")
	if iv == nil || isNull(iv) {
		call = st.last
		if call == nil {
			call = st.newCall(0)
		}
	} else {
		idx, ok := intValue(iv)
		if !ok {
			return // malformed index: skip the delta
		}
		for i := len(st.calls) - 1; i >= 0; i-- {
			if st.calls[i].index == idx {
				call = st.calls[i]
				break
			}
		}
		if call == nil {
			call = st.newCall(idx)
		}
	}
	if id, ok := textOf(field(tc, "id")); ok && len(id) > 0 {
		if call.hasID && call.id != string(id) {
			call = st.newCall(call.index)
		}
		if !call.hasID {
			call.id, call.hasID = string(id), true
		}
	}
	st.last = call
	if name := field(fn, "name"); truthy(name) {
		if s, ok := appendStringValue(nil, name); ok {
			call.name = s
		}
	}
	if args := field(fn, "arguments"); truthy(args) {
		call.args, _ = appendStringValue(call.args, args)
	}
}

func (st *chatChoice) newCall(idx int64) *toolCall {
	call := &toolCall{index: idx}
	st.calls = append(st.calls, call)
	return call
}

func (c *chatState) response() []byte {
	if len(c.choices) == 0 {
		return nil
	}
	b := []byte(`{"object":"chat.completion","model":`)
	if c.model != nil {
		b = append(b, c.model...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"choices":[`...)
	idxs := make([]int64, 0, len(c.choices))
	for k := range c.choices {
		idxs = append(idxs, k)
	}
	sort.Slice(idxs, func(i, j int) bool { return idxs[i] < idxs[j] })
	for i, idx := range idxs {
		if i > 0 {
			b = append(b, ',')
		}
		b = c.choices[idx].appendJSON(b, idx)
	}
	b = append(b, ']')
	if c.id != nil {
		b = append(b, `,"id":`...)
		b = append(b, c.id...)
	}
	if c.usage != nil {
		b = append(b, `,"usage":`...)
		b = append(b, c.usage...)
	}
	return append(b, '}')
}

func (st *chatChoice) appendJSON(b []byte, idx int64) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, idx, 10)
	b = append(b, `,"message":{"role":`...)
	if st.role != nil {
		b = append(b, st.role...)
	} else {
		b = append(b, `"assistant"`...)
	}
	b = append(b, `,"content":`...)
	if st.hasContent {
		b = jsonscan.AppendString(b, st.content)
	} else {
		b = append(b, "null"...)
	}
	if st.hasReasoning {
		b = append(b, `,"reasoning_content":`...)
		b = jsonscan.AppendString(b, st.reasoning)
	}
	if len(st.calls) > 0 {
		calls := append([]*toolCall(nil), st.calls...)
		sort.SliceStable(calls, func(i, j int) bool { return calls[i].index < calls[j].index })
		b = append(b, `,"tool_calls":[`...)
		for i, call := range calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			if call.hasID {
				b = jsonscan.AppendString(b, call.id)
			} else {
				b = append(b, "null"...)
			}
			b = append(b, `,"type":"function","function":{"name":`...)
			b = jsonscan.AppendString(b, call.name)
			b = append(b, `,"arguments":`...)
			if len(call.args) == 0 {
				// No argument text was streamed: the non-streaming API answers a call without
				// arguments with "{}", so the record's arguments come out {} (not {"_raw": ""}).
				b = append(b, `"{}"`...)
			} else {
				b = jsonscan.AppendString(b, call.args)
			}
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	b = append(b, `},"finish_reason":`...)
	if st.finish != nil {
		b = append(b, st.finish...)
	} else {
		b = append(b, "null"...)
	}
	return append(b, '}')
}
