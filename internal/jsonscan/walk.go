package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// The walkers and accessors below move over JSON that Validate accepted (or that a trusted writer
// produced) by byte offsets, without decoding. They are the one raw-JSON toolkit of the module: the
// record builder, the splice and the stream reassemblers all read payloads through them.
//
// Their semantics, decided once:
//   - A raw value is a slice that starts at the value's first byte and ends after its last one (no
//     surrounding whitespace), as the walkers hand them out; nil (or empty) means absent. Use TrimWS
//     on text that may carry whitespace.
//   - An object's members are visited in text order, duplicates included. Lookup returns the value
//     of the last member with the name, as Python's json, orjson and encoding/json keep the last
//     one. Names compare after their escapes are decoded ("\u0061" names "a").
//   - Asking a non-object for a member, or a non-array for its elements, gives nothing (nil, no
//     calls); it is not an error. The kind tests look only at the first byte.
//   - Strings are decoded as encoding/json decodes them; an unpaired surrogate escape (which
//     Validate refuses) becomes U+FFFD.
//   - On malformed input the walkers stop early or return partial results, but never panic and
//     never read out of bounds.

// SkipValue returns the end offset of the value starting at data[i] (trusted input; i must not
// point at whitespace). Malformed input yields some offset in (i, len(data)].
func SkipValue(data []byte, i int) int {
	if i >= len(data) {
		return len(data)
	}
	switch data[i] {
	case '"':
		return SkipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = SkipString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			default:
				// A byte between tokens: step over the rest of the run 8 bytes at a time while
				// none can open a string or open or close a container (the numbers, literals,
				// commas, colons and whitespace of an array of token ids). Clearing bit 5 of each
				// lane maps '{' and '}' onto '[' and ']' and no other byte onto them. A run of one
				// byte before a string (the colon or comma of an object) is left to the switch.
				for j := i + 1; j+8 <= len(data) && data[j] != '"'; j += 8 {
					x := load64(data, j)
					y := x &^ (lanes1 * 0x20)
					if m := hasByte(x, '"') | hasByte(y, '[') | hasByte(y, ']'); m != 0 {
						i = j + firstByte(m) - 1
						break
					}
					i = j + 7
				}
			}
			i++
		}
		return len(data)
	default:
		// Literal or number: runs until a delimiter.
		j := i + 1
		for j < len(data) {
			switch data[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r', ':', '"', '{', '[':
				return j
			}
			j++
		}
		return j
	}
}

// SkipString returns the offset just past the closing quote of the string starting at data[i]
// (trusted input), or len(data) when it is not closed.
//
// The text is read 8 bytes at a time; within a word, escapes are stepped over lane by lane
// without reloading it (escape-dense text, such as JSON held in a string, is mostly \" and \n).
// After a few words without a quote or backslash the rest of a long plain run goes to the
// vectorised bytes.IndexByte, a window at a time so that the cost stays linear when escapes are
// sparse and the closing quote far away.
func SkipString(data []byte, i int) int {
	i++
	plainWords := 0
	for i+8 <= len(data) {
		m := quoteOrBackslash(load64(data, i))
		if m == 0 {
			i += 8
			if plainWords++; plainWords >= 4 && i+64 <= len(data) {
				w := data[i:min(len(data), i+512)]
				k := bytes.IndexByte(w, '"')
				if k < 0 {
					k = len(w)
				}
				if b := bytes.IndexByte(w[:k], '\\'); b >= 0 {
					k = b
				}
				i += k // at the next quote or backslash, or past the window
			}
			continue
		}
		plainWords = 0
		next := i + 8
		for m != 0 {
			k := firstByte(m)
			switch data[i+k] {
			case '"':
				return i + k + 1
			case '\\':
				if k == 7 {
					next = i + 9 // the escaped byte is the first of the next word
					m = 0
					continue
				}
				m &^= 0xFFFF << (8 * k) // the backslash and the byte it escapes
			default: // a lane flagged only by a borrow
				m &^= 0xFF << (8 * k)
			}
		}
		i = next
	}
	for i < len(data) {
		switch data[i] {
		case '"':
			return i + 1
		case '\\':
			i += 2
		default:
			i++
		}
	}
	return len(data)
}

// TrimWS removes leading and trailing JSON whitespace.
func TrimWS(data []byte) []byte {
	i := SkipWS(data, 0)
	j := len(data)
	for j > i {
		switch data[j-1] {
		case ' ', '\t', '\n', '\r':
			j--
			continue
		}
		break
	}
	return data[i:j]
}

// EachMember calls fn with the raw key token (quotes included) and the raw value of every member
// of the object obj, in order, until fn returns false. It returns false when obj is not an object
// (then fn is never called).
func EachMember(obj []byte, fn func(key, val []byte) bool) bool {
	if len(obj) == 0 || obj[0] != '{' {
		return false
	}
	i := SkipWS(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		ke := SkipString(obj, i)
		key := obj[i:ke]
		i = SkipWS(obj, ke)
		if i >= len(obj) || obj[i] != ':' {
			break
		}
		i = SkipWS(obj, i+1)
		ve := SkipValue(obj, i)
		if ve <= i || !fn(key, obj[i:ve]) {
			break
		}
		i = SkipWS(obj, ve)
		if i >= len(obj) || obj[i] != ',' {
			break
		}
		i = SkipWS(obj, i+1)
	}
	return true
}

// EachElement calls fn with every raw element of the array arr, in order, until fn returns false.
// It returns false when arr is not an array (then fn is never called).
func EachElement(arr []byte, fn func(v []byte) bool) bool {
	if len(arr) == 0 || arr[0] != '[' {
		return false
	}
	i := SkipWS(arr, 1)
	for i < len(arr) && arr[i] != ']' {
		ve := SkipValue(arr, i)
		if ve <= i || !fn(arr[i:ve]) {
			break
		}
		i = SkipWS(arr, ve)
		if i >= len(arr) || arr[i] != ',' {
			break
		}
		i = SkipWS(arr, i+1)
	}
	return true
}

// Lookup returns the raw value of the last member of obj named name, or nil when there is none or
// obj is not an object.
func Lookup(obj []byte, name string) []byte {
	var v []byte
	EachMember(obj, func(k, val []byte) bool {
		if KeyIs(k, name) {
			v = val
		}
		return true
	})
	return v
}

// KeyName returns the decoded name of a key token (quotes included). It aliases tok unless the
// name holds escapes.
func KeyName(tok []byte) []byte {
	if len(tok) < 2 {
		return nil
	}
	inner := tok[1 : len(tok)-1]
	if n := len(tok); n >= 8 && n <= 16 {
		// Most keys: two words that overlap cover the token (its quotes are no backslashes), and
		// hasByte flags a lane of a word exactly when the word holds a backslash (HasBackslash,
		// written out here: KeyName runs for every key a reader looks at).
		if hasByte(load64(tok, 0), '\\')|hasByte(load64(tok, n-8), '\\') == 0 {
			return inner
		}
	} else if indexBackslash(inner) < 0 {
		return inner
	}
	return unescape(inner)
}

// HasBackslash reports whether b holds a backslash: for a key token (quotes included), whether
// its name holds escapes. Tokens of 8 to 16 bytes, most keys, are tested in two overlapping words.
func HasBackslash(b []byte) bool {
	if n := len(b); n >= 8 && n <= 16 {
		return hasByte(load64(b, 0), '\\')|hasByte(load64(b, n-8), '\\') != 0
	}
	return indexBackslash(b) >= 0
}

// KeyIs reports whether the key token tok (quotes included) names name, without allocating unless
// the key holds escapes.
func KeyIs(tok []byte, name string) bool {
	if len(tok) < 2 {
		return false
	}
	inner := tok[1 : len(tok)-1]
	if len(inner) == len(name) && string(inner) == name {
		return true
	}
	// An escaped name is at least as long as its decoded form.
	if len(inner) <= len(name) || bytes.IndexByte(inner, '\\') < 0 {
		return false
	}
	return string(unescape(inner)) == name
}

// Kind tests on a raw value: they look at its first byte only.

// IsObject reports whether v is an object.
func IsObject(v []byte) bool { return len(v) > 0 && v[0] == '{' }

// IsArray reports whether v is an array.
func IsArray(v []byte) bool { return len(v) > 0 && v[0] == '[' }

// IsString reports whether v is a string.
func IsString(v []byte) bool { return len(v) > 0 && v[0] == '"' }

// IsBool reports whether v is true or false.
func IsBool(v []byte) bool { return len(v) > 0 && (v[0] == 't' || v[0] == 'f') }

// IsNull reports whether v is null or absent (nil): readers treat a missing member as null.
func IsNull(v []byte) bool { return len(v) == 0 || v[0] == 'n' }

// IsNumber reports whether v is a number.
func IsNumber(v []byte) bool { return len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) }

// IsInt reports whether v is a number written without fraction or exponent: exactly the literals
// Python's json decodes to int (10 is one; 10.0 and 1e3 are not).
func IsInt(v []byte) bool { return IsNumber(v) && bytes.IndexAny(v, ".eE") < 0 }

// KindName names the JSON type of a raw value for messages: object, array, string, boolean, null,
// integer (IsInt), number, or nothing for an absent value.
func KindName(v []byte) string {
	switch {
	case len(v) == 0:
		return "nothing"
	case v[0] == '{':
		return "object"
	case v[0] == '[':
		return "array"
	case v[0] == '"':
		return "string"
	case IsBool(v):
		return "boolean"
	case v[0] == 'n':
		return "null"
	case IsInt(v):
		return "integer"
	default:
		return "number"
	}
}

// Truthy reports Python's truth value of the decoded value v: null, false, 0, 0.0, "", [] and {}
// are false, as is an absent value (nil); everything else is true. A number is false when its
// value as a double is zero, so 1e-400 (which NeMo Gym's reader decodes to 0.0) is false.
func Truthy(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	switch v[0] {
	case 'n', 'f':
		return false
	case 't':
		return true
	case '"':
		return len(v) > 2
	case '{', '[':
		i := SkipWS(v, 1)
		return i < len(v) && v[i] != '}' && v[i] != ']'
	}
	nonzero := false
	for _, c := range v {
		switch {
		case c >= '1' && c <= '9':
			nonzero = true
		case c == 'e' || c == 'E':
			if !nonzero {
				return false
			}
			// A non-zero mantissa with an exponent may still underflow to zero.
			f, err := strconv.ParseFloat(string(v), 64)
			return err != nil || f != 0 // a range error past the top means huge: not zero
		}
	}
	return nonzero
}

// Int returns the value of v when it is an integer literal (IsInt) that fits in int64.
func Int(v []byte) (int64, bool) {
	if n, ok := smallInt(v); ok {
		return n, true
	}
	if !IsInt(v) {
		return 0, false
	}
	n, err := strconv.ParseInt(bytesString(v), 10, 64)
	return n, err == nil
}

// smallInt is Int for the common case, an optional '-' and 1 to 18 digits (which cannot overflow);
// ok is false for anything else, which Int then reads the general way.
func smallInt(v []byte) (int64, bool) {
	d := v
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if len(d) < len(v) {
		n = -n
	}
	return n, true
}

// Float returns the value of v when it is a number whose value as a double is finite.
func Float(v []byte) (float64, bool) {
	if !IsNumber(v) {
		return 0, false
	}
	if f, ok := exactFloat(v); ok {
		return f, true
	}
	f, err := strconv.ParseFloat(bytesString(v), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// exactFloat is Float's fast path for a plain decimal (-?digits(.digits)?, no exponent) of at most
// 19 digits, read as an integer m, with at most 22 of them in the fraction: when m is at most 2^53,
// m and 10^fraction are exact doubles, so m / 10^fraction, one IEEE division, is the correctly
// rounded value strconv.ParseFloat gives (Clinger's fast path); a larger m (a 17-digit Unix
// timestamp with microseconds) is settled by nearestQuotient. ok is false for anything else.
func exactFloat(v []byte) (float64, bool) {
	i, neg := 0, false
	if len(v) > 0 && v[0] == '-' {
		i, neg = 1, true
	}
	var m uint64
	digits, frac := 0, 0
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
		m = m*10 + uint64(v[i]-'0')
		digits++
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(v) && v[i] == '.' {
		i++
		for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
			m = m*10 + uint64(v[i]-'0')
			frac++
		}
		if frac == 0 {
			return 0, false
		}
		digits += frac
	}
	if i != len(v) || digits > 19 || frac >= len(exactPow10) {
		return 0, false
	}
	f := float64(m) / exactPow10[frac]
	if m > 1<<53 {
		// Two roundings (m to a double, then the division): f is within an ulp or two of the
		// value. The neighbour whose rounding interval holds m / 10^frac is found by exact
		// integer comparisons (nearestQuotient); a value past their 128-bit range falls back.
		var ok bool
		if f, ok = nearestQuotient(m, frac, f); !ok {
			return 0, false
		}
	}
	if neg {
		f = -f
	}
	return f, true
}

// nearestQuotient returns the double nearest to q = m / 10^frac (ties to even), starting from an
// approximation f (a positive normal double within a few ulps of q), or ok false when the exact
// comparisons would not fit in 128 bits. f = M * 2^E with M the 53-bit significand; q lies in
// f's rounding interval when (2M-1) * 2^(E-1) <= q <= (2M+1) * 2^(E-1), compared as
// m * 2^(1-E) against (2M±1) * 10^frac.
func nearestQuotient(m uint64, frac int, f float64) (float64, bool) {
	p10 := uint64(1)
	for range frac {
		p10 *= 10
	}
	for range 4 {
		b := math.Float64bits(f)
		exp := int(b>>52) & 0x7FF
		if exp == 0 || exp == 0x7FF {
			return 0, false
		}
		M := b&(1<<52-1) | 1<<52
		shift := 1 - (exp - 1075) // 1 - E
		if shift < 1 || shift > 64 || bits.Len64(m)+shift > 128 {
			return 0, false
		}
		// m * 2^shift as a 128-bit number.
		var qh, ql uint64
		if shift == 64 {
			qh, ql = m, 0
		} else {
			qh, ql = m>>(64-shift), m<<shift
		}
		hh, hl := bits.Mul64(2*M+1, p10) // the upper edge of f's interval, times 10^frac * 2^(1-E)
		if c := cmp128(qh, ql, hh, hl); c > 0 || (c == 0 && M&1 == 1) {
			f = math.Nextafter(f, math.Inf(1))
			continue
		}
		// The lower edge: (2M-1) * 2^(E-1), except at a power of two, where the double below is
		// half as far: (4M-1) * 2^(E-2).
		var lh, ll uint64
		if b&(1<<52-1) == 0 {
			if shift == 64 {
				return 0, false
			}
			lh, ll = bits.Mul64(4*M-1, p10)
			qh, ql = m>>(63-shift), m<<(shift+1)
			if shift+1 == 64 {
				qh, ql = m, 0
			}
		} else {
			lh, ll = bits.Mul64(2*M-1, p10)
		}
		if c := cmp128(qh, ql, lh, ll); c < 0 || (c == 0 && M&1 == 1) {
			f = math.Nextafter(f, 0)
			continue
		}
		return f, true
	}
	return 0, false
}

// cmp128 compares the 128-bit numbers ah:al and bh:bl.
func cmp128(ah, al, bh, bl uint64) int {
	switch {
	case ah != bh:
		if ah < bh {
			return -1
		}
		return 1
	case al != bl:
		if al < bl {
			return -1
		}
		return 1
	}
	return 0
}

// exactPow10 are the powers of ten that are exact doubles.
var exactPow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
	1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// bytesString views b as a string without copying it, for a parser that does not keep its input
// (strconv keeps it only in an error, which is dropped).
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// String returns the decoded text of v when it is a string; ok is false for any other kind.
func String(v []byte) (s string, ok bool) {
	if !IsString(v) || len(v) < 2 {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if indexBackslash(inner) < 0 {
		return string(inner), true
	}
	b := unescape(inner)
	// b is fresh and never written again: the string may share its memory.
	return unsafe.String(unsafe.SliceData(b), len(b)), true
}

// StringAlias is String that, for a string without escapes, returns a string sharing v's memory
// instead of a copy: for text that is never modified afterwards (a read buffer the caller owns).
func StringAlias(v []byte) (s string, ok bool) {
	if !IsString(v) || len(v) < 2 {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if indexBackslash(inner) < 0 {
		return bytesString(inner), true
	}
	return String(v)
}

// Unquote is String for a value known to be a string: the decoded text, or "" for anything else.
func Unquote(v []byte) string {
	s, _ := String(v)
	return s
}

// Text returns the decoded text of the string v as bytes, aliasing v when the string has no
// escapes; ok is false for any other kind.
func Text(v []byte) ([]byte, bool) {
	if !IsString(v) || len(v) < 2 {
		return nil, false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner, true
	}
	return unescape(inner), true
}

// AppendText appends the decoded text of the string v to dst; ok is false (and dst unchanged) for
// any other kind.
func AppendText(dst, v []byte) ([]byte, bool) {
	if !IsString(v) || len(v) < 2 {
		return dst, false
	}
	return appendUnescaped(dst, v[1:len(v)-1]), true
}

// unescape decodes the body of a JSON string (between its quotes) into a new slice. The text is
// copied 8 bytes at a time: every word is stored whole at the output position, then the output
// position moves past the bytes before the word's first backslash only, so bytes after it are
// overwritten by what follows. The output is never longer than the input (every escape is longer
// than what it stands for), so a buffer of len(s) holds every such store.
func unescape(s []byte) []byte {
	out := make([]byte, len(s))
	i, j := 0, 0
	for i+8 <= len(s) {
		x := load64(s, i)
		binary.LittleEndian.PutUint64(out[j:j+8], x)
		m := hasByte(x, '\\')
		if m == 0 {
			i += 8
			j += 8
			continue
		}
		k := firstByte(m)
		i += k
		j += k
		if i+1 < len(s) {
			if c := unescaped[s[i+1]]; c != 0 {
				out[j] = c
				i += 2
				j++
				continue
			}
			if r, n := unescapeU(s[i:]); n > 0 {
				j += utf8.EncodeRune(out[j:], r) // at most 4 bytes for at least 6 read
				i += n
				continue
			}
		}
		// A malformed escape (not in valid input): the general decoder ends the text as it does.
		return appendUnescaped(out[:j], s[i:])
	}
	return appendUnescaped(out[:j], s[i:])
}

// unescaped maps the letter of a one-letter escape to the byte it stands for (0: not one).
var unescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// appendUnescaped appends the decoded body of a JSON string (between its quotes). Unpaired UTF-16
// surrogates become U+FFFD, as in encoding/json; a malformed escape (not in valid input) ends the
// text.
func appendUnescaped(out, s []byte) []byte {
	for {
		i := indexBackslash(s)
		if i < 0 || i+1 >= len(s) {
			return append(out, s...)
		}
		out = append(out, s[:i]...)
		s = s[i:]
		switch s[1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, n := unescapeU(s)
			if n == 0 {
				return out
			}
			out = utf8.AppendRune(out, r)
			s = s[n:]
			continue
		default: // '"', '\\', '/'
			out = append(out, s[1])
		}
		s = s[2:]
	}
}

// unescapeU decodes the \u escape at the start of s: the character and the bytes it took (6, or
// 12 for a surrogate pair); n = 0 when s does not start with \u and four hex digits. An unpaired
// surrogate becomes U+FFFD and takes 6 bytes, as in encoding/json.
func unescapeU(s []byte) (r rune, n int) {
	if len(s) < 2 || s[1] != 'u' {
		return 0, 0
	}
	r, ok := Hex4(s, 2)
	if !ok {
		return 0, 0
	}
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
		if r2, ok := Hex4(s, 8); ok {
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				return dec, 12
			}
		}
	}
	return utf8.RuneError, 6
}

// indexBackslash is bytes.IndexByte(s, '\\') tuned for the short runs between escapes of
// escape-dense text: 8 bytes at a time, and the vectorised search only for long runs.
func indexBackslash(s []byte) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if m := hasByte(load64(s, i), '\\'); m != 0 {
			return i + firstByte(m)
		}
		if i >= 64 {
			if k := bytes.IndexByte(s[i+8:], '\\'); k >= 0 {
				return i + 8 + k
			}
			return -1
		}
	}
	if i == len(s) {
		return -1
	}
	if len(s) >= 8 {
		// The tail in one word: the last eight bytes, overlapping bytes already found plain (the
		// lowest flag of hasByte is exact, so an overlapped byte is never reported).
		if m := hasByte(load64(s, len(s)-8), '\\'); m != 0 {
			return len(s) - 8 + firstByte(m)
		}
		return -1
	}
	for ; i < len(s); i++ {
		if s[i] == '\\' {
			return i
		}
	}
	return -1
}

// Hex4 decodes the four hex digits at s[i:i+4] (of a \u escape); ok is false when there are not
// four hex digits there.
func Hex4(s []byte, i int) (rune, bool) {
	if i < 0 || len(s)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
