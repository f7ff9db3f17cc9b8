package record

import (
	"bytes"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// The package reads JSON through internal/jsonscan: a strict validator (NeMo Gym's reader's rules:
// RFC 8259 syntax, valid UTF-8, every number finite as a double, every escaped surrogate paired, no
// NaN or Infinity) and allocation-free walkers over the validated text by byte offsets. Records are
// built with them instead of decoding into map[string]any (as the root package splices rollout
// lines with them), so payload bytes are never re-encoded, and a capture line read for a record is walked once: the validating
// pass maps its top-level members (jsonscan.ValidateMembers). The semantics of the walkers
// (duplicate keys, absent values, non-objects) are written down in jsonscan.

// text is jsonscan.String; with alias set, a string without escapes shares v's memory
// (jsonscan.StringAlias) instead of being copied: for text the record owns and nobody modifies,
// the read buffer of ReadAvailableRecords, whose records alias it anyway.
func text(v []byte, alias bool) (string, bool) {
	if alias {
		return jsonscan.StringAlias(v)
	}
	return jsonscan.String(v)
}

// decodedKey returns, for a key token k that holds escapes, the token of its decoded name ("\u0069d"
// gives "id", quotes included), so that a switch on quoted names (`"id"`) compares compact keys as
// they stand and decodes only a key that needs it. ok is false when k holds no escape (k itself is
// the token to compare) or when the decoded name holds a quote or a backslash, which no name the
// package looks for does.
func decodedKey(k []byte) ([]byte, bool) {
	if !jsonscan.HasBackslash(k) {
		return nil, false
	}
	name := jsonscan.KeyName(k)
	if bytes.IndexByte(name, '\\') >= 0 || bytes.IndexByte(name, '"') >= 0 {
		return nil, false
	}
	d := make([]byte, 0, len(name)+2)
	return append(append(append(d, '"'), name...), '"'), true
}
