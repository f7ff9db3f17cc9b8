package dialect

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// The conversation readers decode requests and responses member by member. These helpers are
// json.Unmarshal into the few shapes they use (an object's members, a list of raw values, a list
// of objects) with the same results, read with jsonscan's walkers when the text passes
// jsonscan.Validate (the capture store's strict rules, which every stored body meets): one fast
// check and a walk that keeps the values as they are, instead of encoding/json's check, reflection
// and a copy of every value. Text the strict rules refuse (a number too large for a double, an
// unpaired surrogate escape, invalid UTF-8), or a shape the walk does not build, goes to
// json.Unmarshal, so malformed input gets exactly what it got before.

// decodeMembers is json.Unmarshal(raw, m) for a nil *m.
func decodeMembers(raw []byte, m *members) error {
	if v := jsonscan.TrimWS(raw); jsonscan.IsObject(v) && jsonscan.Validate(v) == nil {
		out := members{}
		jsonscan.EachMember(v, func(k, val []byte) bool {
			out[string(jsonscan.KeyName(k))] = val
			return true
		})
		*m = out
		return nil
	}
	return json.Unmarshal(raw, m)
}

// decodeList is json.Unmarshal(raw, list) for a nil *list.
func decodeList(raw []byte, list *[]json.RawMessage) error {
	if v := jsonscan.TrimWS(raw); jsonscan.IsArray(v) && jsonscan.Validate(v) == nil {
		out := []json.RawMessage{}
		jsonscan.EachElement(v, func(e []byte) bool {
			out = append(out, e)
			return true
		})
		*list = out
		return nil
	}
	return json.Unmarshal(raw, list)
}

// decodeMemberList is json.Unmarshal(raw, list) for a nil *list: each object element its members,
// each null element a nil map. A list with another kind of element goes to json.Unmarshal, which
// fails it.
func decodeMemberList(raw []byte, list *[]members) error {
	v := jsonscan.TrimWS(raw)
	if !jsonscan.IsArray(v) || jsonscan.Validate(v) != nil {
		return json.Unmarshal(raw, list)
	}
	out := []members{}
	objects := true
	jsonscan.EachElement(v, func(e []byte) bool {
		switch {
		case jsonscan.IsObject(e):
			m := members{}
			jsonscan.EachMember(e, func(k, val []byte) bool {
				m[string(jsonscan.KeyName(k))] = val
				return true
			})
			out = append(out, m)
		case jsonscan.IsNull(e):
			out = append(out, nil)
		default:
			objects = false
		}
		return objects
	})
	if !objects {
		return json.Unmarshal(raw, list)
	}
	*list = out
	return nil
}

// plainString reports whether a string token's inner bytes decode to themselves: valid UTF-8
// without quotes, backslashes or control bytes.
func plainString(inner []byte) bool {
	for _, c := range inner {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.Valid(inner)
}
