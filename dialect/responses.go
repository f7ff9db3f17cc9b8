package dialect

import (
	"bytes"
	"maps"
	"math"
	"slices"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// responsesState rebuilds an OpenAI Responses response from its stream events: the response
// envelope of the last terminal event (response.completed, .incomplete or .failed; failing that,
// of the last event carrying a response object), as NeMo Gym's stream reconstruction takes it.
// Unlike Gym, when the envelope's output is missing or empty, the output is rebuilt from the
// streamed output items in output_index order: real servers send response.completed with an
// empty output.
type responsesState struct {
	final  []byte // compact "response" of the last response.completed/incomplete/failed event
	latest []byte // compact "response" of the last event carrying a response object

	items map[int64]*node // output items by output_index (each an object node); only the indexes seen
	byID  map[string]int64
	next  int64 // the index after the highest in items: where an item without output_index goes
	sp    *spill
	lim   *budget
}

// Text-carrying events of the Responses stream: where their fragment goes.
type textTarget struct {
	partTarget        // the part list ("content" or "summary"; "" for a member of the item itself) and the types of what the stream never announced
	member     string // the member of the part (or of the item) that holds the text
	fragment   string // the event member carrying the text: "delta", or the full text on .done
	replace    bool   // .done events carry the whole text: replace instead of append
}

// responsesTextEvents holds each text event as a pair: <name>.delta appends the event's "delta",
// <name>.done carries the whole text under the member's own name and replaces it.
var responsesTextEvents = func() map[string]textTarget {
	events := map[string]textTarget{}
	for _, e := range []struct {
		name   string
		part   partTarget
		member string
	}{
		{"response.output_text", partTarget{"content", "content_index", "output_text", "message"}, "text"},
		{"response.refusal", partTarget{"content", "content_index", "refusal", "message"}, "refusal"},
		{"response.reasoning_text", partTarget{"content", "content_index", "reasoning_text", "reasoning"}, "text"},
		{"response.reasoning_summary_text", partTarget{"summary", "summary_index", "summary_text", "reasoning"}, "text"},
		{"response.function_call_arguments", partTarget{itemType: "function_call"}, "arguments"},
		{"response.custom_tool_call_input", partTarget{itemType: "custom_tool_call"}, "input"},
	} {
		events[e.name+".delta"] = textTarget{e.part, e.member, "delta", false}
		events[e.name+".done"] = textTarget{e.part, e.member, e.member, true}
	}
	return events
}()

// Part events: a whole content or summary part.
var responsesPartEvents = map[string]partTarget{
	"response.content_part.added":           {"content", "content_index", "output_text", "message"},
	"response.content_part.done":            {"content", "content_index", "output_text", "message"},
	"response.reasoning_summary_part.added": {"summary", "summary_index", "summary_text", "reasoning"},
	"response.reasoning_summary_part.done":  {"summary", "summary_index", "summary_text", "reasoning"},
}

// partTarget says where a part event's whole part goes; partType and itemType are used for
// parts and items the stream never announced.
type partTarget struct{ list, indexKey, partType, itemType string }

func (r *responsesState) add(ev []byte) {
	typ, _ := jsonscan.Text(jsonscan.Lookup(ev, "type"))
	if resp := jsonscan.Lookup(ev, "response"); jsonscan.IsObject(resp) {
		c := compact(resp)
		r.latest = c
		switch string(typ) {
		case "response.completed", "response.incomplete", "response.failed":
			r.final = c
		}
	}
	if !bytes.HasPrefix(typ, []byte("response.")) {
		return
	}
	switch string(typ) {
	case "response.output_item.added", "response.output_item.done":
		r.itemEvent(ev)
		return
	}
	if t, ok := responsesTextEvents[string(typ)]; ok {
		r.textEvent(ev, t)
		return
	}
	if p, ok := responsesPartEvents[string(typ)]; ok {
		r.partEvent(ev, p)
	}
}

// itemEvent stores the whole item of response.output_item.added / .done at its output_index;
// .done replaces what deltas built, as it carries the finished item.
func (r *responsesState) itemEvent(ev []byte) {
	item := jsonscan.Lookup(ev, "item")
	if !jsonscan.IsObject(item) {
		return
	}
	idx, ok := jsonscan.Int(jsonscan.Lookup(ev, "output_index"))
	if !ok {
		if jsonscan.Lookup(ev, "output_index") != nil {
			return
		}
		idx = r.next
	}
	if !r.put(idx, rawNode(item)) {
		return
	}
	if id, ok := jsonscan.String(jsonscan.Lookup(item, "id")); ok && id != "" {
		r.byID[id] = idx
	}
}

// put stores n as the item at idx; ok is false when idx is new and lim refuses another element.
func (r *responsesState) put(idx int64, n *node) bool {
	if _, ok := r.items[idx]; !ok {
		if !r.lim.take(1) {
			return false
		}
		if idx >= r.next && idx < math.MaxInt64 {
			r.next = idx + 1
		}
	}
	if r.items == nil {
		r.items = make(map[int64]*node)
		r.byID = make(map[string]int64)
	}
	r.items[idx] = n
	return true
}

// target finds the item an item-level event is about: by item_id when that id is known, else by
// output_index. When neither names a known item, an item of type itemType is created at
// output_index (or after the last item) with the event's item_id. ok is false when the event
// names no usable place.
func (r *responsesState) target(ev []byte, itemType string) (*object, bool) {
	id, hasID := jsonscan.String(jsonscan.Lookup(ev, "item_id"))
	if hasID && id != "" {
		if idx, ok := r.byID[id]; ok {
			if o := r.items[idx].asObject(); o != nil {
				return o, true
			}
			return nil, false
		}
	}
	idxRaw := jsonscan.Lookup(ev, "output_index")
	idx, ok := jsonscan.Int(idxRaw)
	if !ok {
		if idxRaw != nil || !hasID || id == "" {
			return nil, false
		}
		idx = r.next
	}
	if n := r.items[idx]; n != nil {
		o := n.asObject()
		return o, o != nil
	}
	o := &object{}
	if hasID && id != "" {
		o.set("id", stringNode(id))
	}
	o.set("type", stringNode(itemType))
	if !r.put(idx, &node{obj: o}) {
		return nil, false
	}
	if hasID && id != "" {
		r.byID[id] = idx
	}
	return o, true
}

// part returns the part at the event's index in the item's list (content or summary), creating
// parts of partType up to it when the stream never announced them: at most maxPartGap below it
// (an index further beyond the parts the item has is refused and counted by lim), each an element
// lim counts.
func (r *responsesState) part(item *object, ev []byte, list, indexKey, partType string) (*node, bool) {
	pi := int64(0)
	if v := jsonscan.Lookup(ev, indexKey); v != nil {
		var ok bool
		if pi, ok = jsonscan.Int(v); !ok || pi < 0 {
			return nil, false
		}
	}
	ln := item.get(list)
	if ln != nil && !ln.asArray() {
		return nil, false
	}
	have := int64(0)
	if ln != nil {
		have = int64(len(ln.arr))
	}
	if pi >= have {
		if pi-have > maxPartGap {
			r.lim.refused++
			return nil, false
		}
		if !r.lim.take(int(pi - have + 1)) {
			return nil, false
		}
	}
	if ln == nil {
		ln = &node{isArr: true}
		item.set(list, ln)
	}
	for int64(len(ln.arr)) <= pi {
		ln.arr = append(ln.arr, &node{raw: partFillers[partType]})
	}
	return ln.arr[pi], true
}

// partFillers holds, for each part type, the part created where the stream never announced one:
// {"type": <part type>}, shared raw JSON (a node opens its own copy when an event edits it).
var partFillers = func() map[string][]byte {
	fillers := map[string][]byte{}
	add := func(p partTarget) {
		if p.partType != "" {
			fillers[p.partType] = []byte(`{"type":` + string(jsonscan.AppendString(nil, []byte(p.partType))) + `}`)
		}
	}
	for _, t := range responsesTextEvents {
		add(t.partTarget)
	}
	for _, p := range responsesPartEvents {
		add(p)
	}
	return fillers
}()

func (r *responsesState) textEvent(ev []byte, t textTarget) {
	frag, ok := jsonscan.Text(jsonscan.Lookup(ev, t.fragment))
	if !ok {
		return
	}
	item, ok := r.target(ev, t.itemType)
	if !ok {
		return
	}
	holder := item
	if t.list != "" {
		p, ok := r.part(item, ev, t.list, t.indexKey, t.partType)
		if !ok {
			return
		}
		if holder = p.asObject(); holder == nil {
			return
		}
	}
	n := holder.get(t.member)
	if t.replace || n == nil {
		holder.set(t.member, textNode(frag))
		return
	}
	n.appendText(frag, r.sp)
}

func (r *responsesState) partEvent(ev []byte, t partTarget) {
	pv := jsonscan.Lookup(ev, "part")
	if !jsonscan.IsObject(pv) {
		return
	}
	item, ok := r.target(ev, t.itemType)
	if !ok {
		return
	}
	p, ok := r.part(item, ev, t.list, t.indexKey, t.partType)
	if !ok {
		return
	}
	*p = *rawNode(pv)
}

func (r *responsesState) has() bool { return r.final != nil || r.latest != nil }

func (r *responsesState) encode(e *enc) {
	env := r.final
	if env == nil {
		env = r.latest
	}
	if len(r.items) == 0 {
		e.bytes(env)
		return
	}
	if out := jsonscan.Lookup(env, "output"); out != nil && jsonscan.Truthy(out) {
		e.bytes(env)
		return
	}
	idxs := slices.Sorted(maps.Keys(r.items))
	output := &node{isArr: true, arr: make([]*node, 0, len(idxs))}
	for _, k := range idxs {
		output.arr = append(output.arr, r.items[k])
	}
	o := parseObject(env)
	o.set("output", output)
	o.encode(e)
}
