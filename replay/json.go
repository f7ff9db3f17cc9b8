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
	fields []*value       // object members, parallel to keys
	byName map[string]int // index of each key, for an object of more than indexedKeys members
	elems  []*value       // array elements
	text   string         // string content, number literal, "true"/"false"
}

// indexedKeys is the member count above which an object keeps a map from name to member, so that
// looking up the members of a live request stays linear in its size.
const indexedKeys = 16

// index returns the position of member name in an object value, -1 when absent.
func (v *value) index(name []byte) int {
	if v.byName != nil {
		if i, ok := v.byName[string(name)]; ok {
			return i
		}
		return -1
	}
	for i, k := range v.keys {
		if k == string(name) {
			return i
		}
	}
	return -1
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
			if len(v.keys) > indexedKeys {
				v.byName = index
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
		if dropped(rules, k) {
			continue
		}
		f := v.fields[i]
		if d := deeper(rules, k); len(d) > 0 {
			f = f.without(d)
		}
		for _, re := range masks(rules, k) {
			f = f.masked(re)
		}
		out.keys = append(out.keys, k)
		out.fields = append(out.fields, f)
	}
	if len(out.keys) > indexedKeys {
		out.byName = make(map[string]int, len(out.keys))
		for i, k := range out.keys {
			out.byName[k] = i
		}
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

// compare walks a recorded request (ignored members already dropped) and a live request, the raw
// text of a valid JSON object, in the recorded request's key order, and returns the first
// difference (nil when they are equal) and how many leaf differences there are (up to maxCount).
// The live request's members named by ignore are skipped, and its strings under a masking rule are
// compared with the rule's matches removed (as value.without treats the recorded one). Object key
// order does not matter, the last of duplicate members counts; numbers are equal when their values
// are (1 and 1.0).
//
// The live request is walked as text, never decoded into a tree: matching a request costs no
// memory beyond its own bytes but a scratch buffer for the longest string with escapes and, per
// object, a slot per recorded member.
func compare(recorded *value, got []byte, ignore []ignoreRule) (*difference, int) {
	c := &comparer{}
	c.path = append(c.path, '$')
	c.walk(recorded, got, ignore, nil)
	return c.first, c.n
}

// comparer is the state of one compare.
type comparer struct {
	first   *difference
	n       int
	path    []byte // the path of the value being walked, grown and cut back as the walk goes
	scratch []byte // decoded text of a string with escapes
}

// note counts a difference at the current path; the first one is kept with both values rendered.
func (c *comparer) note(a *value, b []byte) {
	c.n++
	if c.first != nil {
		return
	}
	c.first = &difference{path: string(c.path), recorded: render(a), got: renderRaw(b)}
	if a != nil && a.kind == 's' && kindOf(b) == 's' {
		c.first.recorded, c.first.got = renderStrings(a.text, jsonscan.Unquote(b))
	}
}

// walk compares a with b; masks are the patterns whose matches are removed from b's string (or
// from each string of its array) before comparing.
func (c *comparer) walk(a *value, b []byte, ignore []ignoreRule, masks []*regexp.Regexp) {
	if c.n >= maxCount {
		return
	}
	if a == nil || b == nil || a.kind != kindOf(b) {
		c.note(a, b)
		return
	}
	switch a.kind {
	case 'o':
		c.object(a, b, ignore)
	case 'a':
		i := 0
		jsonscan.EachElement(b, func(e []byte) bool {
			var x *value
			if i < len(a.elems) {
				x = a.elems[i]
			}
			c.step(i, "", func() { c.walk(x, e, ignore, masks) })
			i++
			return c.n < maxCount
		})
		for ; i < len(a.elems) && c.n < maxCount; i++ {
			c.step(i, "", func() { c.note(a.elems[i], nil) })
		}
	case 'n':
		if a.text != string(b) && !sameNumber(a.text, string(b)) {
			c.note(a, b)
		}
	case 's':
		text := c.decoded(b)
		if len(masks) > 0 {
			t := string(text)
			for _, re := range masks {
				t = re.ReplaceAllString(t, "")
			}
			if t != a.text {
				c.note(a, b)
			}
			return
		}
		if string(text) != a.text {
			c.note(a, b)
		}
	case 'b':
		if a.text != string(b) {
			c.note(a, b)
		}
	}
}

// decoded is the text of the raw string b: b's own bytes when it has no escapes, else decoded into
// the scratch buffer (valid until the next call).
func (c *comparer) decoded(b []byte) []byte {
	inner := b[1 : len(b)-1]
	if !jsonscan.HasBackslash(inner) {
		return inner
	}
	c.scratch, _ = jsonscan.AppendText(c.scratch[:0], b)
	return c.scratch
}

// object compares a recorded object with a raw one: the raw members are first sorted into a slot
// per recorded member (the last of duplicates wins), then the recorded members are walked in their
// order, then the raw members the recording lacks are counted.
func (c *comparer) object(a *value, b []byte, ignore []ignoreRule) {
	var small [16][]byte
	slots := small[:0]
	if len(a.keys) > len(small) {
		slots = make([][]byte, len(a.keys))
	} else {
		slots = small[:len(a.keys)]
	}
	extra := false
	jsonscan.EachMember(b, func(k, v []byte) bool {
		name := jsonscan.KeyName(k)
		if dropped(ignore, string(name)) {
			return true
		}
		if i := a.index(name); i >= 0 {
			slots[i] = v
		} else {
			extra = true
		}
		return true
	})
	for i, k := range a.keys {
		if c.n >= maxCount {
			return
		}
		c.step(-1, k, func() { c.walk(a.fields[i], slots[i], deeper(ignore, k), masks(ignore, k)) })
	}
	if !extra {
		return
	}
	jsonscan.EachMember(b, func(k, v []byte) bool {
		name := jsonscan.KeyName(k)
		if !dropped(ignore, string(name)) && a.index(name) < 0 {
			c.step(-1, string(name), func() { c.note(nil, v) })
		}
		return c.n < maxCount
	})
}

// step runs fn with the path extended by an array index (i >= 0) or the member k.
func (c *comparer) step(i int, k string, fn func()) {
	n := len(c.path)
	if i >= 0 {
		c.path = append(c.path, '[')
		c.path = strconv.AppendInt(c.path, int64(i), 10)
		c.path = append(c.path, ']')
	} else {
		c.path = appendMemberPath(c.path, k)
	}
	fn()
	c.path = c.path[:n]
}

// dropped reports whether an ignore rule drops the member name here.
func dropped(ignore []ignoreRule, name string) bool {
	for _, r := range ignore {
		if len(r.path) == 1 && r.mask == nil && r.path[0] == name {
			return true
		}
	}
	return false
}

// deeper is the ignore rules that continue below the member k.
func deeper(ignore []ignoreRule, k string) []ignoreRule {
	var out []ignoreRule
	for _, r := range ignore {
		if len(r.path) > 1 && r.path[0] == k {
			out = append(out, ignoreRule{path: r.path[1:], mask: r.mask})
		}
	}
	return out
}

// masks is the patterns of the masking rules that end at the member k.
func masks(ignore []ignoreRule, k string) []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, r := range ignore {
		if len(r.path) == 1 && r.mask != nil && r.path[0] == k {
			out = append(out, r.mask)
		}
	}
	return out
}

// kindOf is the kind of a raw value, as value.kind names it; 0 for none.
func kindOf(b []byte) byte {
	switch {
	case len(b) == 0:
		return 0
	case jsonscan.IsObject(b):
		return 'o'
	case jsonscan.IsArray(b):
		return 'a'
	case jsonscan.IsString(b):
		return 's'
	case jsonscan.IsBool(b):
		return 'b'
	case b[0] == 'n':
		return 'z'
	}
	return 'n'
}

// renderRaw is render for a raw value.
func renderRaw(b []byte) string {
	switch kindOf(b) {
	case 0:
		return "absent"
	case 'o':
		n := 0
		jsonscan.EachMember(b, func(_, _ []byte) bool { n++; return true })
		return fmt.Sprintf("an object with %d members", n)
	case 'a':
		n := 0
		jsonscan.EachElement(b, func([]byte) bool { n++; return true })
		return fmt.Sprintf("an array of %d", n)
	case 's':
		return render(&value{kind: 's', text: jsonscan.Unquote(b)})
	case 'z':
		return "null"
	}
	return string(b)
}

// appendMemberPath appends an object member step: .name for identifier-like names, ["..."]
// otherwise.
func appendMemberPath(dst []byte, k string) []byte {
	ident := k != ""
	for i, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			ident = false
			break
		}
	}
	if ident {
		return append(append(dst, '.'), k...)
	}
	return append(jsonscan.AppendString(append(dst, '['), k), ']')
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
