package record

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// Output helpers: every JSON this package writes is compact, UTF-8, without
// HTML escaping (as Python's json module and orjson), with float fields
// always written as floats ("10.0", not "10", via capture.AppendFloat).

// appendOpt appends null for a nil p, else *p written by appendValue.
func appendOpt[T any](dst []byte, p *T, appendValue func([]byte, T) []byte) []byte {
	if p == nil {
		return append(dst, "null"...)
	}
	return appendValue(dst, *p)
}

func appendOptFloat(dst []byte, f *float64) []byte { return appendOpt(dst, f, appendFloat) }

// appendFloat is capture.AppendFloat (Python's repr of a float: the shortest digits that read
// back as f) with a fast path for the floats of a record, timestamps with microseconds and
// latencies with two decimals, which takes a tenth of the time of the general shortest-digits
// search.
//
// The fast path: let d be the most decimals whose spacing 10^-d is wider than the spacing of
// doubles at f (ulp). Then at most one decimal with d decimals reads back as f, so when
// n = round(f*10^d) does (n/10^d, one correctly rounded division of two exact doubles, is what
// reading the decimal gives) no decimal with fewer digits can read back as f unless it is n with
// trailing zeros dropped (a shorter decimal is also a d-decimal): the shortest digits are n's
// without its trailing zeros. Anything else (no such n, |f| outside [1e-4, 2^52), zero) is left
// to capture.AppendFloat.
func appendFloat(dst []byte, f float64) []byte {
	a := math.Abs(f)
	if !(a >= 1e-4 && a < 1<<52) {
		return capture.AppendFloat(dst, f)
	}
	exp := int(math.Float64bits(a)>>52&0x7FF) - 1023 // a = 1.m * 2^exp: ulp = 2^(exp-52); -14 <= exp < 52
	d := floatDecimals[exp+14]
	n := float64(uint64(a*pow10[d] + 0.5)) // below 2^53 + 1: a wrong rounding only fails the test below
	if n >= 1<<53 || n/pow10[d] != a {
		return capture.AppendFloat(dst, f)
	}
	m := uint64(n)
	for _, z := range [...]struct {
		n int
		p uint64
	}{{8, 1e8}, {8, 1e8}, {4, 1e4}, {2, 100}, {1, 10}} { // trailing zeros off, in halving steps
		if d >= z.n && m%z.p == 0 {
			m /= z.p
			d -= z.n
		}
	}
	fraction := d > 0
	if f < 0 {
		dst = append(dst, '-')
	}
	var digits [24]byte // at most 16 digits of n, 19 decimals of a small one, a point and a 0
	k := len(digits)
	for ; d >= 2; d -= 2 { // two digits a step: the divisions by 100 form the longest chain
		k -= 2
		copy(digits[k:], twoDigits[2*(m%100):][:2])
		m /= 100
	}
	if d == 1 {
		k--
		digits[k] = byte('0' + m%10)
		m /= 10
	}
	if fraction {
		k--
		digits[k] = '.'
	}
	for ; m >= 10; m /= 100 {
		k -= 2
		copy(digits[k:], twoDigits[2*(m%100):][:2])
	}
	if m > 0 || digits[k] == '.' || k == len(digits) {
		k--
		digits[k] = byte('0' + m)
	}
	dst = append(dst, digits[k:]...)
	if !fraction {
		dst = append(dst, '.', '0')
	}
	return dst
}

// twoDigits holds "00" to "99".
const twoDigits = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

// floatDecimals[exp+14] is appendFloat's d for a double 1.m * 2^exp, -14 <= exp < 52: the most
// decimals d with 10^d < 2^(52-exp), the inverse of the spacing of doubles there.
var floatDecimals = func() (t [66]int) {
	for i := range t {
		inv := math.Ldexp(1, 52-(i-14))
		for t[i]+1 < len(pow10) && pow10[t[i]+1] < inv {
			t[i]++
		}
	}
	return t
}()

// pow10 holds the powers of ten a double represents exactly (10^0 to 10^22).
var pow10 = func() (p [23]float64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

func appendOptInt64(dst []byte, n *int64) []byte { return appendOpt(dst, n, appendInt64) }

func appendOptInt(dst []byte, n *int) []byte {
	return appendOpt(dst, n, func(dst []byte, n int) []byte { return strconv.AppendInt(dst, int64(n), 10) })
}

func appendOptString(dst []byte, s *string) []byte { return appendOpt(dst, s, jsonscan.AppendString) }

// appendOptText is appendOptString for a string that may lie in line (appendText).
func appendOptText(dst []byte, s *string, line []byte) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return appendText(dst, *s, line)
}

// appendText is jsonscan.AppendString, copying s without looking at it when its bytes lie in line:
// then s is the body of a validated string token without escapes (see
// ModelCallRecord.appendJSON), which AppendString writes unchanged.
func appendText(dst []byte, s string, line []byte) []byte {
	if len(s) > 0 && len(line) > 0 {
		p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.SliceData(line)))
		if p >= lo && p-lo <= uintptr(len(line)) && uintptr(len(s)) <= uintptr(len(line))-(p-lo) {
			dst = append(dst, '"')
			dst = append(dst, s...)
			return append(dst, '"')
		}
	}
	return jsonscan.AppendString(dst, s)
}

func appendOptBool(dst []byte, b *bool) []byte { return appendOpt(dst, b, strconv.AppendBool) }

func appendInt64(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

// appendRaw appends a valid JSON value as it is. Values are written
// byte-for-byte; only a value that spans lines (possible for decoded tool-call
// argument strings) is compacted so that JSONL output stays one line.
func appendRaw(dst []byte, v []byte) []byte {
	if len(v) == 0 {
		return append(dst, "null"...)
	}
	if bytes.IndexByte(v, '\n') < 0 && bytes.IndexByte(v, '\r') < 0 {
		return append(dst, v...)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return append(dst, "null"...)
	}
	return append(dst, b.Bytes()...)
}

// appendKey appends `"name":` (name must need no escaping), preceded by a
// comma unless dst ends with '{'.
func appendKey(dst []byte, name string) []byte {
	if n := len(dst); n > 0 && dst[n-1] != '{' && dst[n-1] != '[' {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

// appendStringToken appends the JSON string token tok (quotes included) exactly as
// jsonscan.AppendString(dst, jsonscan.Unquote(tok)) would, without decoding it into a string first: a run
// without escapes is copied as it is, and each escape is written in AppendString's form (\/ becomes
// /, \u00e9 é, a surrogate pair its character, \u000a \n, \u001B \u001b; an unpaired surrogate
// U+FFFD, as unescape does). The output is never longer than tok, so a caller can size a buffer by
// it.
//
// tok must come from a line that passed capture.CheckLine (valid UTF-8, strict JSON): such a run
// holds no control character, quote or invalid UTF-8, so AppendString would copy it unchanged.
func appendStringToken(dst, tok []byte) []byte {
	if len(tok) < 2 {
		return append(dst, `""`...)
	}
	dst = append(dst, '"')
	dst = appendTokenBody(dst, tok[1:len(tok)-1])
	return append(dst, '"')
}

// appendTokenBody is appendStringToken for the body s of a token (no quotes), or a piece of it
// that ends where an escape starts (or at the body's end) and does not split a surrogate pair.
func appendTokenBody(dst, s []byte) []byte {
	for {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			dst = append(dst, s...)
			break
		}
		dst = append(dst, s[:i]...)
		s = s[i:]
		if len(s) < 2 { // a lone trailing backslash (not in a valid line): as unquote keeps it
			dst = jsonscan.AppendEscaped(dst, s)
			break
		}
		switch s[1] {
		case 'u':
			r, ok := jsonscan.Hex4(s, 2)
			if !ok { // not in a valid line: unescape drops the rest
				return dst
			}
			s = s[6:]
			if utf16.IsSurrogate(r) {
				dec := utf8.RuneError
				if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
					if r2, ok := jsonscan.Hex4(s, 2); ok {
						if dec = utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							s = s[6:]
						}
					}
				}
				r = dec
			}
			var b [utf8.UTFMax]byte
			dst = jsonscan.AppendEscaped(dst, utf8.AppendRune(b[:0], r))
			continue
		case '"', '\\', 'b', 'f', 'n', 'r', 't': // AppendString writes these two bytes too
			dst = append(dst, s[:2]...)
		default: // '/'
			dst = jsonscan.AppendEscaped(dst, s[1:2])
		}
		s = s[2:]
	}
	return dst
}
