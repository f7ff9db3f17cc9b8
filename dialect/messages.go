package dialect

import (
	"maps"
	"slices"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// messagesState rebuilds an Anthropic Messages response from its stream events, as NeMo Gym's
// stream reconstruction does (message_start's fields, content blocks by index with their text,
// thinking and tool input deltas), except that message_delta's usage replaces message_start's
// values field by field and never with null (see messageDelta), and that signature_delta, which
// Gym drops, fills the thinking block's signature as the non-streaming API returns it.
type messagesState struct {
	message  *object           // message_start's id/type/role/model/stop_reason; nil before it
	blocks   map[int64]*object // content blocks by their index
	toolJSON map[int64][]byte  // input_json_delta fragments by block index
	usage    object            // merged usage
	sp       *spill
	lim      *budget
}

// messageFields are the message_start fields kept, in the order NeMo Gym writes them.
var messageFields = [...]string{"id", "type", "role", "model", "stop_reason"}

func (m *messagesState) add(ev []byte) {
	typ, _ := jsonscan.Text(jsonscan.Lookup(ev, "type"))
	switch string(typ) {
	case "message_start":
		m.messageStart(ev)
	case "content_block_start":
		m.blockStart(ev)
	case "content_block_delta":
		m.blockDelta(ev)
	case "message_delta":
		m.messageDelta(ev)
	}
	// ping, content_block_stop, message_stop, error and unknown types add nothing.
}

func (m *messagesState) messageStart(ev []byte) {
	msg := jsonscan.Lookup(ev, "message")
	if !jsonscan.IsObject(msg) {
		return // malformed: NeMo Gym fails the whole reconstruction here, we skip the event
	}
	o := &object{}
	for _, k := range messageFields {
		if v := jsonscan.Lookup(msg, k); !jsonscan.IsNull(v) {
			o.set(k, rawNode(v))
		}
	}
	m.message = o
	// message_start usage is taken as given, nulls included (NeMo Gym's dict update).
	jsonscan.EachMember(jsonscan.Lookup(msg, "usage"), func(k, v []byte) bool {
		m.usage.set(string(jsonscan.KeyName(k)), rawNode(v))
		return true
	})
}

// blockKey returns the block index of a content block event: the "index" member when present,
// else def. ok is false when the index is present but not an integer (NeMo Gym would fail the
// reconstruction on unsortable keys; we skip the event).
func blockKey(ev []byte, def int64) (int64, bool) {
	v := jsonscan.Lookup(ev, "index")
	if v == nil {
		return def, true
	}
	return jsonscan.Int(v)
}

func (m *messagesState) blockStart(ev []byte) {
	key, ok := blockKey(ev, int64(len(m.blocks)))
	if !ok {
		return
	}
	cb := jsonscan.Lookup(ev, "content_block")
	var block *object
	switch {
	case !jsonscan.Truthy(cb):
		block = &object{}
	case jsonscan.IsObject(cb):
		block = parseObject(cb)
	default:
		return
	}
	if _, ok := m.blocks[key]; !ok && !m.lim.take(1) {
		return
	}
	if m.blocks == nil {
		m.blocks = make(map[int64]*object)
	}
	m.blocks[key] = block
}

func (m *messagesState) blockDelta(ev []byte) {
	key, ok := blockKey(ev, 0)
	if !ok {
		return
	}
	delta := jsonscan.Lookup(ev, "delta")
	if jsonscan.Truthy(delta) && !jsonscan.IsObject(delta) {
		return
	}
	block, ok := entry(&m.blocks, key, m.lim)
	if !ok {
		return
	}
	dtyp, _ := jsonscan.Text(jsonscan.Lookup(delta, "type"))
	switch string(dtyp) {
	case "text_delta":
		appendBlockText(block, "text", "text", jsonscan.Lookup(delta, "text"), m.sp)
	case "thinking_delta":
		appendBlockText(block, "thinking", "thinking", jsonscan.Lookup(delta, "thinking"), m.sp)
	case "signature_delta":
		// The signature a client must send back with the thinking block on its next turn. The
		// non-streaming API returns it whole; the stream sends it in signature_delta events
		// (content_block_start carries "signature": ""). Fragments append.
		appendBlockText(block, "thinking", "signature", jsonscan.Lookup(delta, "signature"), m.sp)
	case "input_json_delta":
		if m.toolJSON == nil {
			m.toolJSON = make(map[int64][]byte)
		}
		buf := m.toolJSON[key]
		if buf == nil {
			buf = []byte{}
		}
		buf, _ = jsonscan.AppendText(buf, jsonscan.Lookup(delta, "partial_json"))
		m.toolJSON[key] = buf
	}
	// citations_delta and unknown delta types are ignored.
}

// appendBlockText sets the block's type to typ if unset and appends the string fragment frag to
// its name member. A fragment or member that is not a string is skipped.
func appendBlockText(block *object, typ, name string, frag []byte, sp *spill) {
	if block.index("type") < 0 {
		block.set("type", stringNode(typ))
	}
	text, ok := jsonscan.Text(frag)
	if !ok {
		return
	}
	n := block.get(name)
	if n == nil {
		block.set(name, textNode(text))
		return
	}
	n.appendText(text, sp)
}

func (m *messagesState) messageDelta(ev []byte) {
	// message_delta usage replaces message_start values field by field, only with values that
	// are not null (a null or absent field keeps what message_start said); it never sums.
	jsonscan.EachMember(jsonscan.Lookup(ev, "usage"), func(k, v []byte) bool {
		if !jsonscan.IsNull(v) {
			m.usage.set(string(jsonscan.KeyName(k)), rawNode(v))
		}
		return true
	})
	if m.message == nil {
		return
	}
	if sr := jsonscan.Lookup(jsonscan.Lookup(ev, "delta"), "stop_reason"); jsonscan.Truthy(sr) {
		m.message.set("stop_reason", rawNode(sr))
	}
}

func (m *messagesState) has() bool { return m.message != nil || len(m.blocks) > 0 }

func (m *messagesState) encode(e *enc) {
	// The message is built once: message_start's fields with "type" set, then content and usage
	// (message_start's fields never include those two).
	var out object
	if m.message != nil {
		out.keys = append(make([]string, 0, len(m.message.keys)+3), m.message.keys...)
		out.vals = append(make([]*node, 0, len(m.message.keys)+3), m.message.vals...)
	}
	out.set("type", stringNode("message"))
	keys := slices.Sorted(maps.Keys(m.blocks))
	content := &node{isArr: true, arr: make([]*node, 0, len(keys))}
	for _, k := range keys {
		block := m.blocks[k]
		// Every block that streamed input_json_delta (tool_use, server_tool_use, mcp_tool_use
		// and any later tool block) gets the streamed input, as the non-streaming API returns
		// it; content_block_start announces such blocks with "input": {}.
		if js, ok := m.toolJSON[k]; ok && !block.get("input").truthy() {
			block = block.with("input", toolInput(js))
		}
		content.arr = append(content.arr, &node{obj: block})
	}
	out.set("content", content)
	if len(m.usage.keys) > 0 {
		out.set("usage", &node{obj: &m.usage})
	}
	out.encode(e)
}

// toolInput decodes accumulated input_json_delta text as NeMo Gym's reconstruction does: {} for
// empty text, the decoded value when it is strict JSON, else {"_raw": text}.
func toolInput(js []byte) *node {
	if len(js) == 0 {
		return &node{raw: []byte("{}")}
	}
	if jsonscan.Validate(js) == nil && !jsonscan.DeeperThan(js, maxPayloadNesting) {
		return rawNode(js)
	}
	o := &object{}
	o.set("_raw", &node{str: newText(js), isStr: true})
	return &node{obj: o}
}
