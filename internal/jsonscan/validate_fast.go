package jsonscan

import "math/bits"

// The fast path: validate's first attempt at every text. It decides exactly what the reference
// path (validateRef: recursive descent, one call per value) decides on every text it accepts, and
// gives the same members, nested map and index, but it walks the text in one loop with an explicit
// stack, so that the token boundaries of compact JSON (a capture line has no whitespace between
// tokens) cost a few comparisons each with the loop's state kept in registers; and it ends most
// strings with no loop: the stops (quotes, backslashes, control bytes and bytes of UTF-8 sequences)
// of the 64 bytes from a string's first byte are read at once (classify64) and serve every string
// that starts in them, so a short string costs a shift and a count of trailing zeros, whatever its
// length. It does not say why a text is refused: on any refusal, and on nesting deeper than
// fastDepth or an index that outgrew maxTreeNodes, it gives up and validate runs the reference
// path, which gives the error (its offset and message) or the verdict. A refused text is thus read
// twice; a capture line almost never is.

// fastDepth is the nesting the fast path follows (a capture line nests about ten levels); deeper
// text is left to the reference path.
const fastDepth = 64

// fastValidate is validate's fast path: the members of the top-level object appended to members
// (when collect) and sc's additions (sc nil: none), as validateRef gives them for a valid text; ok
// is false when the reference path must decide.
func fastValidate(data []byte, members []Member, collect bool, sc *Scanner) (_ []Member, ok bool) {
	i := SkipWS(data, 0)
	if i >= len(data) {
		return members, false
	}
	if data[i] != '{' {
		if i, ok = fastValue(data, i, nil, -1); !ok {
			return members, false
		}
		return members, SkipWS(data, i) == len(data)
	}
	nested := ""
	if sc != nil {
		nested = sc.Nested
	}
	i = SkipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return members, SkipWS(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return members, false
		}
		keyStart := i
		keyEnd, next := stringHead(data, i)
		if keyEnd < 0 {
			var err error
			if keyEnd, err = validStringRest(data, i, next); err != nil {
				return members, false
			}
		}
		i = keyEnd
		if i >= len(data) || data[i] != ':' {
			if i = SkipWS(data, keyEnd); i >= len(data) || data[i] != ':' {
				return members, false
			}
		}
		valStart := i + 1
		if valStart < len(data) && data[valStart] <= ' ' {
			valStart = SkipWS(data, valStart)
		}
		if valStart >= len(data) {
			return members, false
		}
		switch {
		case data[valStart] == '"':
			end, next := stringHead(data, valStart)
			if end < 0 {
				var err error
				if end, err = validStringRest(data, valStart, next); err != nil {
					return members, false
				}
			}
			i = end
		case nested != "" && data[valStart] == '{' && KeyIs(data[keyStart:keyEnd], nested):
			// The nested value: indexed, its members read off the index (each occurrence
			// afresh: the last one is kept).
			tr := &sc.Tree
			tr.reset(data)
			root := tr.open(valStart, -1, -1)
			if i, ok = fastValue(data, valStart, tr, root); !ok || tr.full {
				return members, false // a full index is left to the reference path
			}
			nm, nodes := sc.NestedMembers[:0], tr.nodes
			for c, end := root+1, int(nodes[root].next); c < end; c = int(nodes[c].next) {
				m := &nodes[c]
				nm = append(nm, Member{int(m.key), int(m.keyEnd), int(m.start), int(m.end)})
			}
			sc.NestedMembers, sc.NestedStart = nm, valStart
		default:
			if i, ok = fastValue(data, valStart, nil, -1); !ok {
				return members, false
			}
		}
		if collect {
			members = append(members, Member{keyStart, keyEnd, valStart, i})
		}
		if i < len(data) && data[i] <= ' ' {
			i = SkipWS(data, i)
		}
		if i >= len(data) {
			return members, false
		}
		if data[i] == '}' {
			return members, SkipWS(data, i+1) == len(data)
		}
		if data[i] != ',' {
			return members, false
		}
		i = SkipWS(data, i+1)
	}
}

// fastValue validates the value at data[i] and returns the offset past it; ok is false when the
// reference path must decide. With t not nil the values inside it are indexed in t as validValue
// indexes them, and node (the index of the value's own node, opened by the caller; -1: none) is
// closed at its end.
func fastValue(data []byte, i int, t *Tree, node int) (int, bool) {
	var (
		open     [fastDepth]int32 // the nodes of the open containers
		objects  uint64           // bit d set: the container d levels out from the innermost open one is an object
		depth    int              // open containers
		keyStart int
		keyEnd   int
		isKey    bool
		blk      = -64 // stops: the bytes of data[blk:blk+64] that are '"', '\\', control or non-ASCII
		stops    uint64
		err      error
	)
	n := len(data)
value:
	if i >= n {
		return i, false
	}
	switch c := data[i]; c {
	case '"':
		isKey = false
		goto str
	case '{', '[':
		if depth == fastDepth {
			return i, false
		}
		open[depth] = int32(node)
		depth++
		objects <<= 1
		i++
		if i < n && data[i] <= ' ' {
			i = SkipWS(data, i)
		}
		if c == '{' {
			objects |= 1
			if i < n && data[i] == '}' {
				i++
				goto closed
			}
			goto key
		}
		if i < n && data[i] == ']' {
			i++
			goto closed
		}
		if t != nil {
			node = t.open(i, -1, -1)
		}
		goto value
	case 't':
		if n-i < 4 || string(data[i:i+4]) != "true" {
			return i, false
		}
		i += 4
	case 'f':
		if n-i < 5 || string(data[i:i+5]) != "false" {
			return i, false
		}
		i += 5
	case 'n':
		if n-i < 4 || string(data[i:i+4]) != "null" {
			return i, false
		}
		i += 4
	default:
		// A number without an exponent whose integer part has at most maxFiniteDigits digits is a
		// finite double: its digits are counted 8 at a time here, and only the others (an
		// exponent, a malformed number) are left to validNumber.
		j := i
		if c == '-' {
			j++
		} else if c-'0' >= 10 {
			return i, false
		}
		if j >= n || data[j]-'0' >= 10 {
			return i, false
		}
		e := j + 1
		if data[j] != '0' { // a leading zero is the whole integer part
			for e+8 <= n {
				d := digitLanes(load64(data, e))
				if e += d; d < 8 {
					break
				}
			}
			for e < n && data[e]-'0' < 10 {
				e++
			}
		}
		intDigits := e - j
		if e < n && data[e] == '.' {
			f := e + 1
			for f+8 <= n {
				d := digitLanes(load64(data, f))
				if f += d; d < 8 {
					break
				}
			}
			for f < n && data[f]-'0' < 10 {
				f++
			}
			if f == e+1 {
				return i, false // no digit after the point
			}
			e = f
		}
		if (e >= n || data[e]|0x20 != 'e') && intDigits <= maxFiniteDigits {
			i = e
			break
		}
		if i, err = validNumber(data, i); err != nil {
			return i, false
		}
	}
	// A scalar ends at i.
scalar:
	if t != nil {
		t.close(node, i)
	}
after:
	// A value ends at i, in a container depth levels deep.
	if depth == 0 {
		return i, true
	}
	if i < n && data[i] <= ' ' {
		i = SkipWS(data, i)
	}
	if i >= n {
		return i, false
	}
	switch data[i] {
	case ',':
		i++
		if i < n && data[i] <= ' ' {
			i = SkipWS(data, i)
		}
		if objects&1 != 0 {
			goto key
		}
		if t != nil {
			node = t.open(i, -1, -1)
		}
		goto value
	case '}':
		if objects&1 == 0 {
			return i, false
		}
	case ']':
		if objects&1 != 0 {
			return i, false
		}
	default:
		return i, false
	}
	i++
closed:
	// A container closes at i.
	depth--
	objects >>= 1
	if t != nil {
		t.close(int(open[depth]), i)
	}
	goto after
key:
	if i >= n || data[i] != '"' {
		return i, false
	}
	keyStart = i
	isKey = true
	goto str
colon:
	keyEnd = i
	if i >= n || data[i] != ':' {
		if i < n && data[i] <= ' ' {
			i = SkipWS(data, i)
		}
		if i >= n || data[i] != ':' {
			return i, false
		}
	}
	i++
	if i < n && data[i] <= ' ' {
		i = SkipWS(data, i)
	}
	if t != nil {
		node = t.open(i, keyStart, keyEnd)
	}
	goto value
str:
	// The string at data[i]: most strings are short and plain and end at the first stop of the
	// block of stops that holds their first byte.
	if i+1-blk >= 64 {
		if i+65 > n {
			goto strSlow
		}
		blk = i + 1
		q, b, sp := classify64(&data[blk]) // i+65 <= n: 64 bytes are there
		stops = q | b | sp
	}
	if m := stops >> uint(i+1-blk); m != 0 {
		k := i + 1 + bits.TrailingZeros64(m)
		if data[k] == '"' {
			i = k + 1
			goto strEnd
		}
		if i, err = validStringRest(data, i, k); err != nil {
			return i, false
		}
		goto strEnd
	}
	if blk != i+1 && i+65 <= n {
		// The block began before the string: the string gets a block of its own.
		blk = i + 1
		q, b, sp := classify64(&data[blk])
		stops = q | b | sp
		goto str
	}
	if i, err = validStringRest(data, i, blk+64); err != nil {
		return i, false
	}
	goto strEnd
strSlow:
	{
		end, next := stringHead(data, i)
		if end < 0 {
			if end, err = validStringRest(data, i, next); err != nil {
				return i, false
			}
		}
		i = end
	}
strEnd:
	if isKey {
		goto colon
	}
	goto scalar
}
