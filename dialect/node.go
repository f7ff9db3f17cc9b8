package dialect

import (
	"maps"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// node is a JSON value under reconstruction. It starts as raw compact JSON and is opened up only
// where a stream edits it: into an ordered object (members keep their first position, as in a
// Python dict), an array, or a string that grows by appended deltas. Untouched values stay raw, so
// their numbers and escapes are written back exactly as the server sent them.
type node struct {
	raw []byte  // compact JSON when none of obj, arr, str is in use
	obj *object // set when opened as an object
	arr []*node // elements when opened as an array (isArr)
	str *text   // decoded text when opened as a string (isStr)

	isArr bool
	isStr bool
}

// object is an ordered JSON object. A small object is searched key by key; one with more than
// objectScanKeys members also keeps pos, so that setting or finding each of n members costs O(1),
// not O(n) (an object with n keys is then built in O(n), not O(n²)).
type object struct {
	keys []string
	vals []*node
	pos  map[string]int // key → position in keys, nil while the object has objectScanKeys keys or fewer
}

// objectScanKeys is the member count up to which an object is searched key by key: below it the
// scan costs less than a map lookup, and the object no map allocation.
const objectScanKeys = 8

// rawNode wraps a raw value, copying it compactly so it does not pin the event buffer.
func rawNode(v []byte) *node { return &node{raw: compact(v)} }

// stringNode is a string node holding s.
func stringNode(s string) *node { return &node{str: newText([]byte(s)), isStr: true} }

// textNode is a string node holding a copy of b.
func textNode(b []byte) *node { return &node{str: newText(append([]byte(nil), b...)), isStr: true} }

// parseObject opens the raw object v; nil when v is not an object. Duplicate keys keep the first
// position and the last value.
func parseObject(v []byte) *object {
	if !jsonscan.IsObject(v) {
		return nil
	}
	o := &object{}
	jsonscan.EachMember(v, func(k, val []byte) bool {
		o.set(string(jsonscan.KeyName(k)), rawNode(val))
		return true
	})
	return o
}

func (o *object) index(key string) int {
	if o.pos != nil {
		return o.indexed(key)
	}
	for i, k := range o.keys {
		if k == key {
			return i
		}
	}
	return -1
}

// indexed is index for an object that keeps pos.
func (o *object) indexed(key string) int {
	if i, ok := o.pos[key]; ok {
		return i
	}
	return -1
}

// get returns the member key, nil when absent.
func (o *object) get(key string) *node {
	if i := o.index(key); i >= 0 {
		return o.vals[i]
	}
	return nil
}

// set replaces the member key in place, or appends it.
func (o *object) set(key string, n *node) {
	if i := o.index(key); i >= 0 {
		o.vals[i] = n
		return
	}
	o.add(key, n)
}

// add appends the member key, which o does not have, keeping pos once o passes objectScanKeys
// (apart from set so that set stays small enough to inline).
func (o *object) add(key string, n *node) {
	o.keys = append(o.keys, key)
	o.vals = append(o.vals, n)
	switch {
	case o.pos != nil:
		o.pos[key] = len(o.keys) - 1
	case len(o.keys) > objectScanKeys:
		o.pos = make(map[string]int, 2*len(o.keys))
		for i, k := range o.keys {
			o.pos[k] = i
		}
	}
}

// with returns a shallow copy of o with key set to n; o is not changed.
func (o *object) with(key string, n *node) *object {
	c := &object{keys: append([]string(nil), o.keys...), vals: append([]*node(nil), o.vals...)}
	if o.pos != nil {
		c.pos = maps.Clone(o.pos)
	}
	c.set(key, n)
	return c
}

// asObject opens n as an object; nil when n holds something else.
func (n *node) asObject() *object {
	if n.obj == nil && !n.isArr && !n.isStr {
		n.obj = parseObject(n.raw)
		if n.obj != nil {
			n.raw = nil
		}
	}
	return n.obj
}

// asArray opens n as an array (null counts as an empty array); ok is false for anything else.
func (n *node) asArray() bool {
	if n.isArr {
		return true
	}
	if n.obj != nil || n.isStr {
		return false
	}
	switch {
	case jsonscan.IsArray(n.raw):
		jsonscan.EachElement(n.raw, func(v []byte) bool { n.arr = append(n.arr, &node{raw: v}); return true })
		n.raw, n.isArr = nil, true
		return true
	case n.raw != nil && jsonscan.IsNull(n.raw):
		n.raw, n.isArr = nil, true
		return true
	}
	return false
}

// appendText appends s to n as a string (null counts as ""); ok is false when n holds a
// non-string, which is then left alone. A long string moves to sp's spill file.
func (n *node) appendText(s []byte, sp *spill) bool {
	if !n.isStr {
		if n.obj != nil || n.isArr {
			return false
		}
		switch {
		case jsonscan.IsString(n.raw):
			b, _ := jsonscan.AppendText(nil, n.raw)
			n.str = newText(b)
		case n.raw != nil && jsonscan.IsNull(n.raw):
			n.str = newText(nil)
		default:
			return false
		}
		n.raw, n.isStr = nil, true
	}
	n.str.append(s, sp)
	return true
}

// text returns n's string value; ok is false for any other kind.
func (n *node) text() (string, bool) {
	if n == nil {
		return "", false
	}
	if n.isStr {
		return string(n.str.bytes()), true
	}
	if n.obj != nil || n.isArr {
		return "", false
	}
	return jsonscan.String(n.raw)
}

// truthy is Python's truth value of n.
func (n *node) truthy() bool {
	switch {
	case n == nil:
		return false
	case n.isStr:
		return n.str.size() > 0
	case n.isArr:
		return len(n.arr) > 0
	case n.obj != nil:
		return len(n.obj.keys) > 0
	}
	return jsonscan.Truthy(n.raw)
}

// appendJSON appends n as compact JSON.
func (n *node) appendJSON(dst []byte) []byte {
	e := enc{b: dst}
	n.encode(&e)
	return e.b
}

// encode writes n as compact JSON.
func (n *node) encode(e *enc) {
	switch {
	case n == nil:
		e.raw("null")
	case n.isStr:
		e.text(n.str)
	case n.isArr:
		e.raw("[")
		for i, el := range n.arr {
			e.comma(i)
			el.encode(e)
		}
		e.raw("]")
	case n.obj != nil:
		n.obj.encode(e)
	case len(n.raw) == 0:
		e.raw("null")
	default:
		e.bytes(n.raw)
	}
}

// encode writes o as a compact JSON object.
func (o *object) encode(e *enc) {
	e.raw("{")
	for i, k := range o.keys {
		e.comma(i)
		e.str(k)
		e.raw(":")
		o.vals[i].encode(e)
	}
	e.raw("}")
}
