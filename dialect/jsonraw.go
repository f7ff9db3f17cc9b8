package dialect

import (
	"bytes"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// This file holds what the reassemblers add to internal/jsonscan's raw-JSON toolkit (walkers,
// lookups and typed accessors, whose semantics jsonscan documents): the check an event payload
// passes once, and compact copies of the values a reconstruction keeps. Every helper works on
// slices of validated text, so numbers keep their literal form (10 stays 10, 10.0 stays 10.0) and
// values never touched are copied, not re-encoded.

// payload returns an event's data as a JSON object ready for the raw helpers, or nil when the data
// is absent, the chat "[DONE]" sentinel, not strict JSON, or not an object: NeMo Gym's rebuild
// skips the same events (those without data, the sentinel, data that does not decode, data that
// decodes to something other than an object). Invalid UTF-8 is replaced with U+FFFD first: NeMo
// Gym decodes the body with replacement, and a capture line must be valid UTF-8. The data is
// checked once, with the capture store's own rules (jsonscan.Validate: strict JSON, as a capture
// line must be) and a nesting bound that leaves room for the levels the reconstruction adds, so
// the reconstruction never needs checking again. The result may alias data.
func payload(hasData bool, data []byte) []byte {
	if !hasData || len(data) == 0 || string(data) == "[DONE]" {
		return nil
	}
	b := data
	if !utf8.Valid(b) {
		b = replaceInvalidUTF8(b)
	}
	i := jsonscan.SkipWS(b, 0)
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

// keep returns old when it already holds the compact form of v, else a compact copy of v: values
// repeated in every chunk (model, id) are not copied again.
func keep(old, v []byte) []byte {
	if bytes.Equal(old, v) {
		return old
	}
	return compact(v)
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
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
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
