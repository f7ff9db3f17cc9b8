package modelcalls

import (
	"bytes"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is the package's JSON core: a strict validator and a set of
// allocation-free helpers that walk an already validated JSON text by byte
// offsets. Records are built and rollout lines are spliced with these helpers
// instead of decoding into map[string]any, so payload bytes are never
// re-encoded and a record costs a few passes over its line.
//
// Two modes:
//   - validateJSON checks RFC 8259 syntax, strict UTF-8 inside strings (as
//     Python's orjson and Go's utf8.Valid), and rejects NaN/Infinity, which
//     NeMo Gym's reader (orjson) rejects too.
//   - Everything else ("trusted" walkers) assumes input that validateJSON
//     accepted. On malformed input they stop early or return partial results,
//     but never panic and never read out of bounds.

// validateJSON reports whether data holds exactly one strict JSON value (see jsonscan.Validate).
func validateJSON(data []byte) error { return jsonscan.Validate(data) }

// skipWS returns the first index at or after i that is not JSON whitespace.
func skipWS(data []byte, i int) int { return jsonscan.SkipWS(data, i) }

// trimWS removes leading and trailing JSON whitespace.
func trimWS(data []byte) []byte {
	i := skipWS(data, 0)
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

// member locates one object member by offsets into the object's bytes.
type member struct {
	keyStart, keyEnd int // the key token, quotes included
	valStart, valEnd int // the value
}

// forEachMember calls fn for each member of the object obj (trusted input)
// until fn returns false. It returns false when obj is not an object.
func forEachMember(obj []byte, fn func(m member) bool) bool {
	if len(obj) == 0 || obj[0] != '{' {
		return false
	}
	i := skipWS(obj, 1)
	if i < len(obj) && obj[i] == '}' {
		return true
	}
	for i < len(obj) && obj[i] == '"' {
		var m member
		m.keyStart = i
		m.keyEnd = jsonscan.SkipString(obj, i)
		i = skipWS(obj, m.keyEnd)
		if i >= len(obj) || obj[i] != ':' {
			return true
		}
		m.valStart = skipWS(obj, i+1)
		m.valEnd = jsonscan.SkipValue(obj, m.valStart)
		if m.valStart >= len(obj) || !fn(m) {
			return true
		}
		i = skipWS(obj, m.valEnd)
		if i >= len(obj) || obj[i] != ',' {
			return true
		}
		i = skipWS(obj, i+1)
	}
	return true
}

// forEachElement calls fn for each element of the array arr (trusted input)
// until fn returns false. It returns false when arr is not an array.
func forEachElement(arr []byte, fn func(v []byte) bool) bool {
	if len(arr) == 0 || arr[0] != '[' {
		return false
	}
	i := skipWS(arr, 1)
	if i < len(arr) && arr[i] == ']' {
		return true
	}
	for i < len(arr) {
		end := jsonscan.SkipValue(arr, i)
		if !fn(arr[i:end]) {
			return true
		}
		i = skipWS(arr, end)
		if i >= len(arr) || arr[i] != ',' {
			return true
		}
		i = skipWS(arr, i+1)
	}
	return true
}

// keyName returns the decoded name of a key token (quotes included). It only
// allocates when the key contains escapes.
func keyName(tok []byte) []byte {
	if len(tok) < 2 {
		return nil
	}
	inner := tok[1 : len(tok)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	return unescape(inner)
}

// lookup returns the value of the last member named name in obj (JSON object
// semantics of Python and Go: a repeated key's last value wins), or nil.
func lookup(obj []byte, name string) []byte {
	var v []byte
	forEachMember(obj, func(m member) bool {
		if string(keyName(obj[m.keyStart:m.keyEnd])) == name {
			v = obj[m.valStart:m.valEnd]
		}
		return true
	})
	return v
}

// unquote decodes a JSON string token (quotes included, trusted input).
func unquote(tok []byte) string {
	if len(tok) < 2 {
		return ""
	}
	inner := tok[1 : len(tok)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner)
	}
	return string(unescape(inner))
}

// unescape decodes the escapes of a JSON string body. Unpaired UTF-16
// surrogates become U+FFFD, as in encoding/json.
func unescape(s []byte) []byte {
	out := make([]byte, 0, len(s))
	for {
		i := bytes.IndexByte(s, '\\')
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
			r, ok := hex4(s, 2)
			if !ok {
				return out
			}
			s = s[6:]
			if utf16.IsSurrogate(r) {
				if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
					if r2, ok := hex4(s, 2); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							s = s[6:]
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, s[1])
		}
		s = s[2:]
	}
}

func hex4(s []byte, i int) (rune, bool) {
	if i < 0 || len(s)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// Kind tests on a trusted raw value (no leading whitespace).

func isObject(v []byte) bool { return len(v) > 0 && v[0] == '{' }
func isArray(v []byte) bool  { return len(v) > 0 && v[0] == '[' }
func isString(v []byte) bool { return len(v) > 0 && v[0] == '"' }
func isNull(v []byte) bool   { return len(v) == 0 || v[0] == 'n' } // absent counts as null
func isNumber(v []byte) bool { return len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) }

// stringValue returns the decoded string when v is a JSON string.
func stringValue(v []byte) (string, bool) {
	if !isString(v) {
		return "", false
	}
	return unquote(v), true
}

// stringPtr returns a pointer to the decoded string when v is a JSON string,
// else nil.
func stringPtr(v []byte) *string {
	if !isString(v) {
		return nil
	}
	return new(unquote(v))
}

// truthy reports Python truthiness of a JSON value: null, false, 0, 0.0,
// "", [] and {} are false; an absent value (nil) is false.
func truthy(v []byte) bool {
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
		i := skipWS(v, 1)
		return i < len(v) && v[i] != '}' && v[i] != ']'
	default:
		// A number is zero when every mantissa digit is zero.
		for _, c := range v {
			switch {
			case c == 'e' || c == 'E':
				return false
			case c >= '1' && c <= '9':
				return true
			}
		}
		return false
	}
}

// isIntLiteral reports whether v is a JSON number written without fraction
// or exponent (Python's json decodes exactly these to int).
func isIntLiteral(v []byte) bool {
	if !isNumber(v) {
		return false
	}
	return bytes.IndexAny(v, ".eE") < 0
}

// intValue parses v when it is an integer literal that fits in int64.
func intValue(v []byte) (int64, bool) {
	if !isIntLiteral(v) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// floatValue parses v when it is any JSON number with a finite float64 value.
func floatValue(v []byte) (float64, bool) {
	if !isNumber(v) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// kindName names the JSON type of a raw value for error messages.
func kindName(v []byte) string {
	switch {
	case len(v) == 0:
		return "nothing"
	case v[0] == '{':
		return "object"
	case v[0] == '[':
		return "array"
	case v[0] == '"':
		return "string"
	case v[0] == 't' || v[0] == 'f':
		return "boolean"
	case v[0] == 'n':
		return "null"
	case isIntLiteral(v):
		return "integer"
	default:
		return "number"
	}
}
