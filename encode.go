package modelcalls

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

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

func appendOptFloat(dst []byte, f *float64) []byte { return appendOpt(dst, f, capture.AppendFloat) }

func appendOptInt64(dst []byte, n *int64) []byte { return appendOpt(dst, n, appendInt64) }

func appendOptInt(dst []byte, n *int) []byte {
	return appendOpt(dst, n, func(dst []byte, n int) []byte { return strconv.AppendInt(dst, int64(n), 10) })
}

func appendOptString(dst []byte, s *string) []byte { return appendOpt(dst, s, jsonscan.AppendString) }

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
