package jsonscan

import (
	"math"
	"unsafe"
)

// A Tree is the structural index of one JSON value, built by a Scanner while it validates the value
// (Scanner.Nested): the offsets of every value inside it, of its key when it is an object member,
// and where its subtree ends, in text order. A reader that looks into the value several times (a
// capture line's response: its usage, its output items, their tool calls) walks the index instead
// of the text, so the text is read once, by the validating pass.
//
// The methods take raw values that alias the indexed text (as the walkers hand them out) and answer
// as the walkers of the same name do; a value that is not in the index (another text, a Tree that
// indexed nothing, or an index that outgrew maxTreeNodes) is walked as text, so a nil *Tree is a
// valid Tree that walks everything.
type Tree struct {
	text  []byte
	nodes []treeNode
	full  bool // the index stopped growing at maxTreeNodes: it is not used
	// hint is the node last handed to a callback of EachMember or EachElement: readers most
	// often look into the value they were just given, which find then settles without a search.
	hint int
}

// treeNode is one indexed value: its raw value text[start:end], its key token text[key:keyEnd]
// when it is an object member (key < 0 otherwise), and next, the index of the node that follows its
// subtree (its next sibling, or the end of its parent's children).
// Offsets are 32-bit (20 bytes a node, half the stores of machine words while the index is
// built); a text of 2 GiB or more is not indexed.
type treeNode struct {
	start, end, key, keyEnd, next int32
}

// maxTreeNodes bounds the index of one value (20 bytes a node): a payload with more values than
// this is walked as text, so the index never costs more memory than a few MiB.
const maxTreeNodes = 1 << 16

func (t *Tree) reset(text []byte) {
	t.text, t.nodes, t.full, t.hint = text, t.nodes[:0], len(text) > math.MaxInt32, 0
}

// open adds the node of the value at start (with its key token, or -1, -1) and returns its index,
// or -1 when the index is full or t is nil.
func (t *Tree) open(start, key, keyEnd int) int {
	if t == nil || t.full {
		return -1
	}
	n := len(t.nodes)
	if n >= maxTreeNodes {
		t.full = true
		return -1
	}
	// The fields are stored one by one into the slot: a composite literal is built on the stack
	// and copied in 16-byte moves that wait for its 4-byte stores (a store-forwarding stall), the
	// costliest step of indexing a value. close writes the other two fields.
	if n == cap(t.nodes) {
		t.nodes = append(t.nodes, treeNode{})
	} else {
		t.nodes = t.nodes[:n+1]
	}
	nd := &t.nodes[n]
	nd.start, nd.key, nd.keyEnd = int32(start), int32(key), int32(keyEnd)
	return n
}

// close records the end of node n's value and of its subtree.
func (t *Tree) close(n, end int) {
	if n >= 0 && !t.full {
		t.nodes[n].end, t.nodes[n].next = int32(end), int32(len(t.nodes))
	}
}

// find returns the index of the node whose raw value is v, or -1.
func (t *Tree) find(v []byte) int {
	if t == nil || t.full || len(v) == 0 || len(t.text) == 0 || len(t.nodes) == 0 {
		return -1
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(v))) - uintptr(unsafe.Pointer(unsafe.SliceData(t.text))))
	if off < 0 || off >= len(t.text) {
		return -1
	}
	if h := t.hint; h < len(t.nodes) && int(t.nodes[h].start) == off {
		if int(t.nodes[h].end) != off+len(v) {
			return -1
		}
		return h
	}
	// The first node that starts at or after off (nodes are in text order).
	lo, hi := 0, len(t.nodes)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int(t.nodes[m].start) < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(t.nodes) || int(t.nodes[lo].start) != off || int(t.nodes[lo].end) != off+len(v) {
		return -1
	}
	return lo
}

// EachMember is EachMember through the index.
func (t *Tree) EachMember(obj []byte, fn func(key, val []byte) bool) bool {
	n := t.find(obj)
	if n < 0 {
		return EachMember(obj, fn)
	}
	if obj[0] != '{' {
		return false
	}
	for c, end := n+1, int(t.nodes[n].next); c < end; c = int(t.nodes[c].next) {
		m := &t.nodes[c]
		t.hint = c
		if !fn(t.text[m.key:m.keyEnd], t.text[m.start:m.end]) {
			break
		}
	}
	return true
}

// EachElement is EachElement through the index.
func (t *Tree) EachElement(arr []byte, fn func(v []byte) bool) bool {
	n := t.find(arr)
	if n < 0 {
		return EachElement(arr, fn)
	}
	if arr[0] != '[' {
		return false
	}
	for c, end := n+1, int(t.nodes[n].next); c < end; c = int(t.nodes[c].next) {
		t.hint = c
		if !fn(t.text[t.nodes[c].start:t.nodes[c].end]) {
			break
		}
	}
	return true
}

// Lookup is Lookup through the index.
func (t *Tree) Lookup(obj []byte, name string) []byte {
	n := t.find(obj)
	if n < 0 {
		return Lookup(obj, name)
	}
	if obj[0] != '{' {
		return nil
	}
	var v []byte
	for c, end := n+1, int(t.nodes[n].next); c < end; c = int(t.nodes[c].next) {
		m := &t.nodes[c]
		if KeyIs(t.text[m.key:m.keyEnd], name) {
			v = t.text[m.start:m.end]
		}
	}
	return v
}
