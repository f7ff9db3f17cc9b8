package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// value is a decoded JSON value that keeps the key order of its objects, so that "the first JSON
// path where two requests differ" follows the order the recorded request was written in.
type value struct {
	kind   byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' true/false, 'z' null
	keys   []string
	fields []*value // object members, parallel to keys
	elems  []*value // array elements
	text   string   // string content, number literal, "true"/"false"
}

// parseValue decodes one JSON text. Duplicate object keys keep the last value (at the position of
// the first), as JSON decoders in Python and Go do.
func parseValue(b []byte) (*value, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (*value, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			v := &value{kind: 'o'}
			index := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				f, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				if i, dup := index[k]; dup {
					v.fields[i] = f
					continue
				}
				index[k] = len(v.keys)
				v.keys = append(v.keys, k)
				v.fields = append(v.fields, f)
			}
			_, err := dec.Token() // '}'
			return v, err
		case '[':
			v := &value{kind: 'a'}
			for dec.More() {
				e, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				v.elems = append(v.elems, e)
			}
			_, err := dec.Token() // ']'
			return v, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return &value{kind: 's', text: t}, nil
	case json.Number:
		return &value{kind: 'n', text: t.String()}, nil
	case bool:
		return &value{kind: 'b', text: strconv.FormatBool(t)}, nil
	case nil:
		return &value{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// field returns the member k of an object value, or nil.
func (v *value) field(k string) *value {
	if v == nil || v.kind != 'o' {
		return nil
	}
	for i, key := range v.keys {
		if key == k {
			return v.fields[i]
		}
	}
	return nil
}

// ignoreRule is one part of a request strict matching leaves out: path is a member name at the top
// level or a dotted path into nested values; a step into an array applies to each of its elements.
// With mask nil the member is dropped; with mask set, the member stays and every match of mask in
// its string value (or in each string of its array) is removed, so that a volatile part of a text
// (a chunk id, a wall time) does not decide the match while the rest of the text still does.
type ignoreRule struct {
	path []string
	mask *regexp.Regexp
}

// parseIgnoreRule parses "PATH" or "PATH~REGEXP" (Go regexp syntax, RE2).
func parseIgnoreRule(s string) (ignoreRule, error) {
	path, expr, masked := strings.Cut(s, "~")
	path = strings.TrimSpace(path)
	if path == "" || slices.Contains(strings.Split(path, "."), "") {
		return ignoreRule{}, fmt.Errorf("ignore %q: want a dotted JSON path (input.output), optionally with ~REGEXP", s)
	}
	r := ignoreRule{path: strings.Split(path, ".")}
	if masked {
		re, err := regexp.Compile(expr)
		if err != nil {
			return ignoreRule{}, fmt.Errorf("ignore %q: %w", s, err)
		}
		if expr == "" {
			return ignoreRule{}, fmt.Errorf("ignore %q: empty pattern after ~", s)
		}
		r.mask = re
	}
	return r, nil
}

// CheckIgnoreKeys reports the first rule of keys (Server.IgnoreKeys) that does not parse.
func CheckIgnoreKeys(keys []string) error {
	for _, k := range keys {
		if strings.TrimSpace(k) == "" {
			continue
		}
		if _, err := parseIgnoreRule(k); err != nil {
			return err
		}
	}
	return nil
}

// without returns v with the parts named by rules left out (ignoreRule). v is not modified.
func (v *value) without(rules []ignoreRule) *value {
	if v == nil || len(rules) == 0 {
		return v
	}
	switch v.kind {
	case 'a':
		out := &value{kind: 'a', elems: make([]*value, len(v.elems))}
		for i, e := range v.elems {
			out.elems[i] = e.without(rules)
		}
		return out
	case 'o':
	default:
		return v
	}
	out := &value{kind: 'o'}
	for i, k := range v.keys {
		var deeper []ignoreRule
		var masks []*regexp.Regexp
		drop := false
		for _, r := range rules {
			if r.path[0] != k {
				continue
			}
			switch {
			case len(r.path) > 1:
				deeper = append(deeper, ignoreRule{path: r.path[1:], mask: r.mask})
			case r.mask != nil:
				masks = append(masks, r.mask)
			default:
				drop = true
			}
		}
		if drop {
			continue
		}
		f := v.fields[i]
		if len(deeper) > 0 {
			f = f.without(deeper)
		}
		for _, re := range masks {
			f = f.masked(re)
		}
		out.keys = append(out.keys, k)
		out.fields = append(out.fields, f)
	}
	return out
}

// masked returns v with every match of re removed from its string, or from each string of its
// array; other values are returned as they are.
func (v *value) masked(re *regexp.Regexp) *value {
	switch v.kind {
	case 's':
		return &value{kind: 's', text: re.ReplaceAllString(v.text, "")}
	case 'a':
		out := &value{kind: 'a', elems: make([]*value, len(v.elems))}
		for i, e := range v.elems {
			out.elems[i] = e.masked(re)
		}
		return out
	}
	return v
}

// difference is the first place where a recorded request and a live one differ.
type difference struct {
	path     string // JSONPath-like: $.messages[0].content
	recorded string // short rendering of the recorded value, "absent" when missing
	got      string // short rendering of the request's value, "absent" when missing
}

// maxCount bounds how many differences compare counts: enough to rank candidates, bounded work.
const maxCount = 10000

// compare walks recorded and got in the recorded request's key order and returns the first
// difference (nil when they are equal) and how many leaf differences there are (up to maxCount).
// Object key order does not matter; numbers are equal when their values are (1 and 1.0).
func compare(recorded, got *value) (*difference, int) {
	var first *difference
	n := 0
	var walk func(path string, a, b *value)
	note := func(path string, a, b *value) {
		n++
		if first == nil {
			first = &difference{path: path, recorded: render(a), got: render(b)}
			if a != nil && b != nil && a.kind == 's' && b.kind == 's' {
				first.recorded, first.got = renderStrings(a.text, b.text)
			}
		}
	}
	walk = func(path string, a, b *value) {
		if n >= maxCount {
			return
		}
		if a == nil || b == nil || a.kind != b.kind {
			note(path, a, b)
			return
		}
		switch a.kind {
		case 'o':
			for i, k := range a.keys {
				walk(path+memberPath(k), a.fields[i], b.field(k))
			}
			for i, k := range b.keys {
				if a.field(k) == nil {
					note(path+memberPath(k), nil, b.fields[i])
				}
			}
		case 'a':
			for i := 0; i < max(len(a.elems), len(b.elems)); i++ {
				var x, y *value
				if i < len(a.elems) {
					x = a.elems[i]
				}
				if i < len(b.elems) {
					y = b.elems[i]
				}
				walk(fmt.Sprintf("%s[%d]", path, i), x, y)
			}
		case 'n':
			if a.text != b.text && !sameNumber(a.text, b.text) {
				note(path, a, b)
			}
		default:
			if a.text != b.text {
				note(path, a, b)
			}
		}
	}
	walk("$", recorded, got)
	return first, n
}

// memberPath renders an object member step: .name for identifier-like names, ["..."] otherwise.
func memberPath(k string) string {
	ident := k != ""
	for i, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			ident = false
			break
		}
	}
	if ident {
		return "." + k
	}
	return "[" + string(jsonscan.AppendString(nil, k)) + "]"
}

func sameNumber(a, b string) bool {
	x, _, err1 := big.ParseFloat(a, 10, 256, big.ToNearestEven)
	y, _, err2 := big.ParseFloat(b, 10, 256, big.ToNearestEven)
	return err1 == nil && err2 == nil && x.Cmp(y) == 0
}

// render is a short description of a value for a miss message: strings quoted and cut at 80
// characters, containers summarised.
func render(v *value) string {
	if v == nil {
		return "absent"
	}
	switch v.kind {
	case 'o':
		return fmt.Sprintf("an object with %d members", len(v.keys))
	case 'a':
		return fmt.Sprintf("an array of %d", len(v.elems))
	case 's':
		s := v.text
		if r := []rune(s); len(r) > 80 {
			s = string(r[:80]) + "..."
		}
		return string(jsonscan.AppendString(nil, s))
	case 'z':
		return "null"
	}
	return v.text
}

// renderStrings shows two different strings whole when both are short (80 characters at most),
// else around where they first differ: from 30 characters before that point, up to 80
// characters, with the offset.
func renderStrings(a, b string) (string, string) {
	ra, rb := []rune(a), []rune(b)
	p := 0
	for p < len(ra) && p < len(rb) && ra[p] == rb[p] {
		p++
	}
	if p <= 30 || (len(ra) <= 80 && len(rb) <= 80) {
		return render(&value{kind: 's', text: a}), render(&value{kind: 's', text: b})
	}
	cut := func(r []rune) string {
		from := p - 30
		to := min(len(r), from+80)
		s := "..." + string(jsonscan.AppendString(nil, string(r[from:to])))
		if to < len(r) {
			s += "..."
		}
		return s
	}
	return fmt.Sprintf("%s (from character %d)", cut(ra), p-30), cut(rb)
}
