package dialect

import (
	"github.com/modelcalls/modelcalls/internal/jsonscan"

	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// This file holds the small raw-JSON toolkit the reassemblers use. Event payloads are validated
// once with the capture store's validator (strict JSON: no NaN or Infinity, which a capture line cannot hold); every helper below then
// works on slices of that validated text, so numbers keep their literal form (10 stays 10, 10.0
// stays 10.0) and values we never touch are copied, not re-encoded. The helpers stay defensive
// (no index beyond the slice) so a caller handing them unvalidated bytes gets nonsense, not a panic.

// payload returns an event's data as a JSON object ready for the raw helpers, or nil when the
// data is absent, the chat "[DONE]" sentinel, not strict JSON, or not an object (reference §7.2).
// Invalid UTF-8 is replaced with U+FFFD first: NeMo Gym decodes the body with replacement, and a
// capture line must be valid UTF-8. The data is checked once, with the capture store's own rules
// (jsonscan.Validate: strict JSON, as a capture line must be) and a nesting bound that leaves
// room for the levels the reconstruction adds, so the reconstruction never needs checking again.
// The result may alias data.
func payload(hasData bool, data []byte) []byte {
	if !hasData || len(data) == 0 || string(data) == "[DONE]" {
		return nil
	}
	b := data
	if !utf8.Valid(b) {
		b = replaceInvalidUTF8(b)
	}
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' || jsonscan.Validate(b) != nil || jsonscan.DeeperThan(b, maxPayloadNesting) {
		return nil
	}
	return b[i:jsonscan.SkipValue(b, i)]
}

// maxPayloadNesting is the deepest event payload (or decoded tool input) reassembled: the
// reconstruction puts a value at most 4 levels below where it was, and the capture line adds one
// more; the store reads lines nested less than jsonscan.MaxNesting deep.
const maxPayloadNesting = jsonscan.MaxNesting - 8

// replaceInvalidUTF8 returns b with every byte that does not start a valid UTF-8 sequence
// replaced by U+FFFD.
func replaceInvalidUTF8(b []byte) []byte {
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:size]...)
		}
		b = b[size:]
	}
	return out
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// eachMember calls fn with the raw key literal (quotes included) and the raw value of every
// member of the object obj, in order, until fn returns false. Non-objects have no members.
func eachMember(obj []byte, fn func(key, val []byte) bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return
		}
		ke := jsonscan.SkipString(obj, i)
		key := obj[i:ke]
		i = skipSpace(obj, ke)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = skipSpace(obj, i+1)
		ve := jsonscan.SkipValue(obj, i)
		if ve <= i || !fn(key, obj[i:ve]) {
			return
		}
		i = skipSpace(obj, ve)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

// eachElem calls fn with every raw element of the array arr, in order. Non-arrays have none.
func eachElem(arr []byte, fn func(val []byte)) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i++
	for {
		i = skipSpace(arr, i)
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		ve := jsonscan.SkipValue(arr, i)
		if ve <= i {
			return
		}
		fn(arr[i:ve])
		i = skipSpace(arr, ve)
		if i >= len(arr) || arr[i] != ',' {
			return
		}
		i++
	}
}

// keyString returns the decoded text of a raw key literal.
func keyString(lit []byte) string {
	if s, ok := stringValue(lit); ok {
		return s
	}
	return ""
}

// keyIs reports whether the raw key literal lit decodes to key, without allocating for the
// common unescaped case.
func keyIs(lit []byte, key string) bool {
	if len(lit) < 2 {
		return false
	}
	inner := lit[1 : len(lit)-1]
	for _, c := range inner {
		if c == '\\' {
			return keyString(lit) == key
		}
	}
	return string(inner) == key
}

// field returns the raw value of obj's member key, nil when absent. With duplicate keys the last
// one wins, as in Python's json module.
func field(obj []byte, key string) []byte {
	var v []byte
	eachMember(obj, func(k, val []byte) bool {
		if keyIs(k, key) {
			v = val
		}
		return true
	})
	return v
}

// kindOf classifies a raw value by its first byte: '{', '[', '"', 't', 'f', 'n', or '0' for a
// number; 0 for nothing.
func kindOf(v []byte) byte {
	if len(v) == 0 {
		return 0
	}
	switch c := v[0]; c {
	case '{', '[', '"', 't', 'f', 'n':
		return c
	}
	return '0'
}

func isNull(v []byte) bool { return kindOf(v) == 'n' }

// truthy is Python's truth value of a decoded JSON value: null, false, 0, "", [] and {} are
// false; absent (nil) is false too.
func truthy(v []byte) bool {
	switch kindOf(v) {
	case 0, 'n', 'f':
		return false
	case 't':
		return true
	case '"':
		return len(v) > 2
	case '{', '[':
		i := skipSpace(v, 1)
		return i < len(v) && v[i] != '}' && v[i] != ']'
	default:
		f, err := strconv.ParseFloat(string(v), 64)
		return err != nil || f != 0 // out of range means huge: not zero
	}
}

// stringValue decodes a raw JSON string; ok is false for any other kind.
func stringValue(v []byte) (string, bool) {
	if kindOf(v) != '"' || len(v) < 2 {
		return "", false
	}
	inner := v[1 : len(v)-1]
	simple := true
	for _, c := range inner {
		if c == '\\' || c < 0x20 {
			simple = false
			break
		}
	}
	if simple {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// textOf returns the text of the raw JSON string v without allocating when it has no escapes
// (the returned bytes then alias v); ok is false for any other kind.
func textOf(v []byte) ([]byte, bool) {
	if kindOf(v) != '"' || len(v) < 2 {
		return nil, false
	}
	inner := v[1 : len(v)-1]
	for _, c := range inner {
		if c == '\\' {
			s, ok := stringValue(v)
			return []byte(s), ok
		}
	}
	return inner, true
}

// keep returns old when it already holds the compact form of v, else a compact copy of v: values
// repeated in every chunk (model, id) are not copied again.
func keep(old, v []byte) []byte {
	if bytes.Equal(old, v) {
		return old
	}
	return compact(v)
}

// appendStringValue appends the decoded content of the raw JSON string v to dst.
func appendStringValue(dst, v []byte) ([]byte, bool) {
	if kindOf(v) != '"' || len(v) < 2 {
		return dst, false
	}
	inner := v[1 : len(v)-1]
	for _, c := range inner {
		if c == '\\' {
			s, ok := stringValue(v)
			return append(dst, s...), ok
		}
	}
	return append(dst, inner...), true
}

// intValue decodes a raw JSON integer literal (no fraction, no exponent).
func intValue(v []byte) (int64, bool) {
	if kindOf(v) != '0' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

// appendCompact appends the validated raw value v without insignificant white space.
func appendCompact(dst, v []byte) []byte {
	for i := 0; i < len(v); {
		c := v[i]
		switch {
		case c == '"':
			e := jsonscan.SkipString(v, i)
			dst = append(dst, v[i:e]...)
			i = e
		case isSpace(c):
			i++
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst
}

// compact returns a compact copy of the raw value v that shares no memory with it.
func compact(v []byte) []byte {
	if v == nil {
		return nil
	}
	return appendCompact(make([]byte, 0, len(v)), v)
}
