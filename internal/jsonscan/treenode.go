package jsonscan

// Node-level access to a Tree, for a reader that walks one indexed object several times or keeps
// where its children are (the record builder's usage and its detail groups): the node is found
// once, and its children are visited by index, without a search or a callback per visit.
//
//	if n := t.Node(obj); n >= 0 {
//		for c, end := t.Children(n); c < end; c = t.Next(c) {
//			key, val := t.Member(c)
//			...
//		}
//	}

// Node returns the index of the node whose raw value is v (a value the walkers handed out of the
// indexed text), or -1 when v is not indexed: another text, a nil Tree, or an index that outgrew
// its bound. A reader then walks v as text.
func (t *Tree) Node(v []byte) int { return t.find(v) }

// Children returns the range of node n's children (its members or elements), in text order: the
// first child and the index past the last; visit them with Next.
func (t *Tree) Children(n int) (first, end int) { return n + 1, int(t.nodes[n].next) }

// Next returns the index of the sibling after child c (or its parent's end).
func (t *Tree) Next(c int) int { return int(t.nodes[c].next) }

// Member returns the key token (quotes included; nil for an array element) and the raw value of
// node c.
func (t *Tree) Member(c int) (key, val []byte) {
	nd := &t.nodes[c]
	if nd.key >= 0 {
		key = t.text[nd.key:nd.keyEnd]
	}
	return key, t.text[nd.start:nd.end]
}
