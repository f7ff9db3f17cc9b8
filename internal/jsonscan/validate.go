// Package jsonscan owns the strict JSON validator shared by the capture store and the record
// builder. It accepts exactly what NeMo Gym's reader (orjson) decodes: RFC 8259 syntax, valid UTF-8
// inside strings, no NaN or Infinity, every number finite as a double (1e400 is refused: orjson
// fails with "number is infinity when parsed as double"; 1e-400 reads as 0.0 and is accepted),
// every \u escape of a surrogate paired (a high half \uD800-\uDBFF followed at once by an escaped
// low half \uDC00-\uDFFF; a lone half of either kind is refused, as orjson refuses it), and bounded
// nesting. It allocates nothing on valid input and runs several times faster than
// encoding/json.Valid followed by utf8.Valid, which matters because every capture line is validated
// on every read.
//
// Strings, most of a capture line's bytes, are read 64 bytes at a time: classify64 (assembly on
// amd64: AVX2 where the processor has it, else SSE2, which every amd64 processor has; plain Go
// elsewhere, and the reference the assembly is tested against) gives the masks of quotes,
// backslashes and control or non-ASCII bytes, and escapedBits tells escaping backslashes from
// escaped ones for all runs at once, so escape-dense text (JSON held in a string, a streamed
// response_raw) is validated at nearly the speed of plain text. With AVX2 the whole block loop
// runs in assembly (stringBlocks) while blocks hold only plain bytes and the escapes \" \\ and \n
// (a streamed body is almost only those), about 7 GB/s on such text against 3 GB/s for the loop
// in Go; any other block is handed back to the Go loop. A Scanner can also index a chosen member's
// value in the same pass (Tree) for readers that look into it several times.
//
// Every text is first read by a fast path (fastValidate, validate_fast.go): one loop with an
// explicit stack of open containers instead of a call per value, and short strings (keys, most
// values) ended off the stop mask of the 64 bytes from their first byte (classify64), which serves
// every string that starts in it, so a short string costs a shift and a count of trailing zeros.
// It only accepts: on anything it refuses (and on nesting past 64 levels, or an index that
// outgrew maxTreeNodes) the reference path, recursive descent over the same string and number
// readers, reads the text again and gives the verdict and the error. The two agree on every
// verdict, member offset and index node (the fuzz targets compare them); a refused text is read
// twice up to where it fails (a text nested too deep for the fast path, twice whole).
package jsonscan

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxNesting bounds container nesting during validation so hostile input
// cannot exhaust the stack. Python's json module stops near 1000 levels.
const MaxNesting = 10000

// SyntaxError reports where a JSON text stopped being valid.
type SyntaxError struct {
	Offset int // byte offset of the offending byte
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

// Unrepresentable reports whether the text was refused only for a value a lenient reader (Python's
// json, Go's encoding/json with UseNumber) still accepts but the store cannot hold: a number that
// overflows a double or an unpaired surrogate escape. Such text was meant as JSON; a reader that
// must not silently drop it (a stream event) can tell it apart from text that is not JSON at all.
func (e *SyntaxError) Unrepresentable() bool {
	switch e.Msg {
	case msgOverflow, msgLoneLow, msgLoneHigh:
		return true
	}
	return false
}

const (
	msgOverflow = "number overflows a double"
	msgLoneLow  = "unpaired low surrogate \\u escape"
	msgLoneHigh = "unpaired high surrogate \\u escape"
)

// Validate reports whether data holds exactly one JSON value, optionally surrounded by JSON
// whitespace, under the package's strict rules (orjson's). The error is a *SyntaxError.
func Validate(data []byte) error {
	_, err := validate(data, nil, false, nil)
	return err
}

// Member locates one object member by byte offsets into the text it was found in.
type Member struct {
	KeyStart, KeyEnd int // the key token, quotes included
	ValStart, ValEnd int // the raw value
}

// ValidateMembers is Validate that also maps the value when it is an object: it appends the
// offsets (into data) of the object's top-level members to dst, in text order, duplicates
// included, and returns it. Nothing is appended when the value is not an object or not valid. A
// reader that checks a line and then reads its top-level members walks the line once this way.
func ValidateMembers(data []byte, dst []Member) ([]Member, error) {
	return validate(data, dst, true, nil)
}

// A Scanner validates lines as ValidateMembers does and does more in the same pass, so that a
// reader walks each line once: it maps the members of the object value of the top-level member
// named Nested into NestedMembers (offsets into the same text). With a repeated key the last
// occurrence whose value is an object is mapped; NestedStart is the offset of that value (-1 when
// none was mapped), so that a reader can tell whether it is the occurrence it uses. A capture
// line's reader maps response. The scanner keeps scratch memory between lines. It is not safe for
// concurrent use.
type Scanner struct {
	Nested string

	NestedMembers []Member
	NestedStart   int
	// Tree indexes every value inside the mapped Nested value (see Tree), valid until the next
	// call of Members.
	Tree Tree
}

// Members validates data and returns its top-level members appended to dst, as ValidateMembers,
// with the scanner's additions (see Scanner). NestedMembers is reset on every call.
func (sc *Scanner) Members(data []byte, dst []Member) ([]Member, error) {
	sc.NestedMembers, sc.NestedStart = sc.NestedMembers[:0], -1
	sc.Tree.reset(nil)
	members, err := validate(data, dst, true, sc)
	if err != nil {
		sc.NestedMembers, sc.NestedStart = sc.NestedMembers[:0], -1
		sc.Tree.reset(nil)
	}
	return members, err
}

// Reset drops the scanner's references to the last text it scanned (its index, its nested map),
// keeping its configuration and scratch memory: a pooled scanner then keeps no buffer alive.
func (sc *Scanner) Reset() {
	sc.Tree.reset(nil)
	sc.NestedMembers, sc.NestedStart = sc.NestedMembers[:0], -1
}

// validate runs the fast path (fastValidate) and, when it gives up (a refused text, or one it does
// not follow), the reference path, which decides and says why.
func validate(data []byte, members []Member, collect bool, sc *Scanner) ([]Member, error) {
	n := len(members)
	if out, ok := fastValidate(data, members, collect, sc); ok {
		return out, nil
	}
	if sc != nil {
		sc.NestedMembers, sc.NestedStart = sc.NestedMembers[:0], -1
		sc.Tree.reset(nil)
	}
	return validateRef(data, members[:n], collect, sc)
}

// validateRef is the reference path: recursive descent, one call per value.
func validateRef(data []byte, members []Member, collect bool, sc *Scanner) ([]Member, error) {
	i := SkipWS(data, 0)
	if i >= len(data) {
		return members, &SyntaxError{i, "no JSON value"}
	}
	n := len(members)
	var end int
	var err error
	if data[i] == '{' {
		end, members, err = validObject(data, i, 0, members, collect, sc, nil)
	} else {
		end, err = validValue(data, i, 0, nil)
	}
	if err != nil {
		return members[:n], err
	}
	if j := SkipWS(data, end); j != len(data) {
		return members[:n], &SyntaxError{j, "data after the JSON value"}
	}
	return members, nil
}

// validValue validates the value at data[i]; with t not nil the values inside it are indexed in t
// (the caller indexes the value itself).
func validValue(data []byte, i, depth int, t *Tree) (int, error) {
	if i >= len(data) {
		return i, &SyntaxError{i, "unexpected end of input"}
	}
	switch c := data[i]; c {
	case '{':
		end, _, err := validObject(data, i, depth, nil, false, nil, t)
		return end, err
	case '[':
		return validArray(data, i, depth, t)
	case '"':
		return validString(data, i)
	case 't':
		return validLiteral(data, i, "true")
	case 'f':
		return validLiteral(data, i, "false")
	case 'n':
		return validLiteral(data, i, "null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return validNumber(data, i)
		}
		return i, &SyntaxError{i, fmt.Sprintf("unexpected byte %q", c)}
	}
}

// validObject validates the object at data[i] (a '{'); with collect it appends each member's
// offsets to members, does sc's additions (nil: none) and indexes its members in t (nil: none).
func validObject(data []byte, i, depth int, members []Member, collect bool, sc *Scanner, t *Tree) (int, []Member, error) {
	if depth >= MaxNesting {
		return i, members, &SyntaxError{i, "nesting too deep"}
	}
	i = SkipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1, members, nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return i, members, &SyntaxError{i, "expected object key"}
		}
		keyStart := i
		keyEnd, next := stringHead(data, i)
		var err error
		if keyEnd < 0 {
			if keyEnd, err = validStringRest(data, i, next); err != nil {
				return keyEnd, members, err
			}
		}
		i = keyEnd
		if i >= len(data) || data[i] != ':' {
			if i = SkipWS(data, keyEnd); i >= len(data) || data[i] != ':' {
				return i, members, &SyntaxError{i, "expected ':' after object key"}
			}
		}
		valStart := i + 1
		if valStart < len(data) && data[valStart] <= ' ' {
			valStart = SkipWS(data, valStart)
		}
		switch {
		case sc != nil && sc.Nested != "" && valStart < len(data) && data[valStart] == '{' && KeyIs(data[keyStart:keyEnd], sc.Nested):
			tr := &sc.Tree
			tr.reset(data)
			root := tr.open(valStart, -1, -1)
			if i, sc.NestedMembers, err = validObject(data, valStart, depth+1, sc.NestedMembers[:0], true, nil, tr); err != nil {
				return i, members, err
			}
			tr.close(root, i)
			sc.NestedStart = valStart
		case t != nil:
			n := t.open(valStart, keyStart, keyEnd)
			if i, err = validValue(data, valStart, depth+1, t); err != nil {
				return i, members, err
			}
			t.close(n, i)
		case valStart < len(data) && data[valStart] == '"': // most values: no dispatch through validValue
			if i, next = stringHead(data, valStart); i < 0 {
				if i, err = validStringRest(data, valStart, next); err != nil {
					return i, members, err
				}
			}
		default:
			if i, err = validValue(data, valStart, depth+1, nil); err != nil {
				return i, members, err
			}
		}
		if collect {
			members = append(members, Member{keyStart, keyEnd, valStart, i})
		}
		i = SkipWS(data, i)
		if i >= len(data) {
			return i, members, &SyntaxError{i, "unterminated object"}
		}
		if data[i] == '}' {
			return i + 1, members, nil
		}
		if data[i] != ',' {
			return i, members, &SyntaxError{i, "expected ',' or '}' in object"}
		}
		i = SkipWS(data, i+1)
	}
}

func validArray(data []byte, i, depth int, t *Tree) (int, error) {
	if depth >= MaxNesting {
		return i, &SyntaxError{i, "nesting too deep"}
	}
	i = SkipWS(data, i+1)
	if i < len(data) && data[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		n := t.open(i, -1, -1)
		if i, err = validValue(data, i, depth+1, t); err != nil {
			return i, err
		}
		t.close(n, i)
		i = SkipWS(data, i)
		if i >= len(data) {
			return i, &SyntaxError{i, "unterminated array"}
		}
		if data[i] == ']' {
			return i + 1, nil
		}
		if data[i] != ',' {
			return i, &SyntaxError{i, "expected ',' or ']' in array"}
		}
		i = SkipWS(data, i+1)
	}
}

func validLiteral(data []byte, i int, lit string) (int, error) {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return i, &SyntaxError{i, "invalid literal"}
	}
	return i + len(lit), nil
}

// validString validates the string at data[i] (a '"') and returns the offset past its closing
// quote. The text is read 64 bytes at a time (classify64, escapedBits) while it holds plain bytes
// and one-letter escapes only; where it does not (a \\u escape, a control byte, a UTF-8 sequence)
// the next 64 bytes or so are read 8 at a time (the escapes \" \\ \n and UTF-8 starts are settled
// word by word), and only the bytes neither path settles are looked at one by one (stringSpecial).
func validString(data []byte, i int) (int, error) {
	end, next := stringHead(data, i)
	if end >= 0 {
		return end, nil
	}
	return validStringRest(data, i, next)
}

// stringHead settles the string at data[i] (a '"') when its body is plain bytes (printable ASCII
// but '"' and '\\') up to a closing quote in its first eight words: a key, most values, response
// and item ids (50 to 60 bytes), read word by word with no block machinery. end is the offset past
// the closing quote, or -1 when the string is not settled; then the bytes before next are plain,
// and validStringRest goes on from there.
func stringHead(data []byte, i int) (end, next int) {
	start := i
	i++
	if i+8 <= len(data) {
		m := notPlain(load64(data, i))
		for m == 0 && i+16 <= len(data) && i-start < 57 {
			i += 8
			m = notPlain(load64(data, i))
		}
		if m != 0 {
			if k := i + firstByte(m); data[k] == '"' {
				return k + 1, k
			}
		}
	}
	return -1, i
}

// validStringRest is validString for the string that starts at data[start] once its bytes before
// i are known to be plain (stringHead).
func validStringRest(data []byte, start, i int) (int, error) {
	for {
		var carry uint64
		window := 64
		for i+64 <= len(data) {
			if useAVX2 {
				// Blocks of plain bytes and \" \\ \n escapes are read by the assembly loop; the
				// block it stops at (anything else before its closing quote) is read below.
				off, kind, c := stringBlocks(&data[i], len(data)-i, carry)
				if kind == blocksQuote {
					return i + off, nil
				}
				if i, carry = i+off, c; kind == blocksLeft {
					break
				}
			}
			q, b, sp := classify64(&data[i])
			esc := escapedBits(b, &carry)
			end := q &^ esc
			live := (end & -end) - 1 // the bytes before the closing quote (all, without one)
			stop := sp
			// Escape letters other than '"' and '\\' (about one in a hundred bytes of JSON held
			// in a string) are checked one by one; a \\u escape is left to stringSpecial.
			for odd := esc &^ (q | b) & live; odd != 0; odd &= odd - 1 {
				k := bits.TrailingZeros64(odd)
				if unescaped[data[i+k]] == 0 {
					stop |= 1 << k
				}
			}
			if stop &= live; stop != 0 {
				k := bits.TrailingZeros64(stop)
				if data[i+k] >= 0x80 {
					window = 256 // text in most languages but English: words suit it better
				}
				if esc>>k&1 == 1 {
					k-- // start at the escape's backslash (k = -1: the previous block's last byte)
				}
				i += k
				carry = 0
				break
			}
			if end != 0 {
				return i + bits.TrailingZeros64(end) + 1, nil
			}
			i += 64
		}
		i -= int(carry) // the last backslash read escapes data[i]: the words start at it
		for limit := i + window; i < limit; {
			for i+8 <= len(data) && i < limit {
				x := load64(data, i)
				m := notPlain(x)
				if m == 0 {
					i += 8
					continue
				}
				if k := firstByte(m); data[i+k] >= 0x80 {
					// A UTF-8 sequence (text in most languages but English): checked where it starts.
					n := runeLen(data, i+k)
					if n == 0 {
						return i + k, &SyntaxError{i + k, "invalid UTF-8 in string"}
					}
					i += k + n
					continue
				}
				// stringWord, inlined by hand.
				q := eqLanes(x, '"')
				b := eqLanes(x, '\\')
				esc := b << 8
				if b&esc != 0 {
					break
				}
				end := q &^ esc
				bad := ctlOrHigh(x) | esc&^(q|b|eqLanes(x, 'n'))
				if bad&lowerLanes(end) != 0 {
					break
				}
				if end != 0 {
					return i + firstByte(end) + 1, nil
				}
				i += 8 - int(b>>63)
			}
			if i+8 <= len(data) {
				i += firstByte(notPlain(load64(data, i))) // the lowest flag is exact
			} else {
				for i < len(data) && plain[data[i]] {
					i++
				}
			}
			if i >= len(data) {
				return start, &SyntaxError{start, "unterminated string"}
			}
			switch c := data[i]; {
			case c == '"':
				return i + 1, nil
			case c >= 0x80:
				n := runeLen(data, i)
				if n == 0 {
					return i, &SyntaxError{i, "invalid UTF-8 in string"}
				}
				i += n
			default:
				var err error
				if i, err = stringSpecial(data, i, nil, nil); err != nil {
					return i, err
				}
			}
		}
	}
}

// The kinds of stop of stringBlocks.
const (
	blocksLeft  = 0 // fewer than 64 bytes left
	blocksQuote = 1 // the string's closing quote
	blocksOther = 2 // a block that validStringRest reads itself
)

// stringWord settles one word x of a string body (starting at an escape boundary) when its lanes
// are plain, the escapes \" \\ and \n whose backslashes are not adjacent, and the closing quote.
// It returns the flag of the closing quote (0 when the string goes on), the flags of the
// backslashes that start an escape among the lanes consumed, and n, the number of lanes consumed:
// 8, or 7 when lane 7 is a backslash (its escape is read with the next word). n < 0 means the
// word needs stringSpecial before the first byte that is not plain.
func stringWord(x uint64) (end, backslashes uint64, n int) {
	q := eqLanes(x, '"')
	b := eqLanes(x, '\\')
	esc := b << 8 // the lanes an escape's backslash applies to
	if b&esc != 0 {
		return 0, 0, -1 // \\: left to the byte-wise path, which pairs the backslashes
	}
	end = q &^ esc
	bad := ctlOrHigh(x) | esc&^(q|b|eqLanes(x, 'n'))
	live := lowerLanes(end)
	if bad&live != 0 {
		return 0, 0, -1
	}
	if end != 0 {
		return end, b & live, 0
	}
	n = 8 - int(b>>63)
	return 0, b &^ (1 << 63), n
}

// stringSpecial handles the unit of a string body at data[i] that the word-wise path leaves to
// it: an escape, a control byte or a UTF-8 sequence. When out is not nil the decoded bytes are
// written at out[*j:] and *j advanced; it returns the offset past the unit.
func stringSpecial(data []byte, i int, out []byte, j *int) (int, error) {
	switch c := data[i]; {
	case c == '\\':
		if i+1 >= len(data) {
			return i, &SyntaxError{i, "unterminated escape"}
		}
		if e := unescaped[data[i+1]]; e != 0 {
			if out != nil {
				out[*j] = e
				*j++
			}
			return i + 2, nil
		}
		if data[i+1] != 'u' {
			return i, &SyntaxError{i, "invalid escape"}
		}
		r, ok := Hex4(data, i+2)
		if !ok {
			return i, &SyntaxError{i, "invalid \\u escape"}
		}
		n := 6
		if r >= 0xD800 && r <= 0xDFFF {
			// UTF-16 surrogate: only a high half directly followed by an escaped low half
			// encodes a character.
			if r >= 0xDC00 {
				return i, &SyntaxError{i, msgLoneLow}
			}
			lo, ok := rune(0), len(data)-i >= 12 && data[i+6] == '\\' && data[i+7] == 'u'
			if ok {
				lo, ok = Hex4(data, i+8)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return i, &SyntaxError{i, msgLoneHigh}
			}
			r, n = utf16.DecodeRune(r, lo), 12
		}
		if out != nil {
			*j += utf8.EncodeRune(out[*j:], r) // at most 4 bytes for at least 6 read
		}
		return i + n, nil
	case c < 0x20:
		return i, &SyntaxError{i, "control character in string"}
	case c < 0x80: // plain
		if out != nil {
			out[*j] = c
			*j++
		}
		return i + 1, nil
	default:
		n := runeLen(data, i)
		if n == 0 {
			return i, &SyntaxError{i, "invalid UTF-8 in string"}
		}
		if out != nil {
			*j += copy(out[*j:], data[i:i+n])
		}
		return i + n, nil
	}
}

// oneLetterEscape marks the letters that follow a backslash in a two-byte escape.
var oneLetterEscape = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// plain marks the bytes a string body holds as they are: printable ASCII other than '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func validNumber(data []byte, i int) (int, error) {
	start := i
	if data[i] == '-' {
		i++
	}
	intStart := i
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		i = digitsEnd(data, i+1)
	default:
		return i, &SyntaxError{start, "invalid number"}
	}
	// The value is below 10^(intDigits+exp): when that bound is at most 10^308 the number is a
	// finite double, and only larger candidates are parsed.
	intDigits := i - intStart
	exp := 0
	if i < len(data) && data[i] == '.' {
		j := digitsEnd(data, i+1)
		if j == i+1 {
			return j, &SyntaxError{start, "invalid number"}
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		neg := data[i-1] == '-'
		j := skipDigits(data, i)
		if j == i {
			return j, &SyntaxError{start, "invalid number"}
		}
		for _, c := range data[i:j] {
			if exp = exp*10 + int(c-'0'); exp > expCap {
				exp = expCap // past any double; capping keeps the bound sound either way
				break
			}
		}
		if neg {
			exp = -exp
		}
		i = j
	}
	if intDigits+exp > maxFiniteDigits && !finite(data[start:i]) {
		return i, &SyntaxError{start, msgOverflow}
	}
	return i, nil
}

const (
	maxFiniteDigits = 308     // 10^308 < math.MaxFloat64
	expCap          = 1 << 30 // exponents are clamped here while being read
)

// finite reports whether the JSON number num, rounded to the nearest double as orjson (and
// strconv) round it, is finite. Values that underflow round to zero and are finite.
func finite(num []byte) bool {
	f, err := strconv.ParseFloat(string(num), 64)
	return err == nil || !math.IsInf(f, 0)
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}

// SkipWS returns the first index at or after i that is not JSON whitespace.
func SkipWS(data []byte, i int) int {
	// Compact JSON has no whitespace between tokens: one comparison settles the common case.
	for i < len(data) && data[i] <= ' ' {
		if c := data[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return i
		}
		i++
	}
	return i
}

// DeeperThan reports whether the valid JSON text b nests containers more than limit levels deep
// (a scalar is 0 levels, {} is 1). Text shorter than 2*limit bytes cannot, and is not scanned.
func DeeperThan(b []byte, limit int) bool {
	if len(b) < 2*limit {
		return false // each level takes an opening and a closing byte
	}
	depth := 0
	for i := 0; i < len(b); {
		switch b[i] {
		case '"':
			i = SkipString(b, i)
			continue
		case '{', '[':
			if depth++; depth > limit {
				return true
			}
		case '}', ']':
			depth--
		}
		i++
	}
	return false
}
