package jsonscan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// walkCases are valid and invalid texts whose verdict encoding/json plus utf8.Valid shares (no
// number overflow, no lone surrogate, no deep nesting: the rules where orjson is stricter).
var walkCases = []struct {
	in    string
	valid bool
}{
	{`{}`, true}, {` { "a" : [ 1 , -2.5e+3 , true , false , null , "x" ] } `, true}, {`[]`, true}, {`"\u00e9\ud83d\ude00"`, true},
	{`0`, true}, {`-0`, true}, {`1E-2`, true}, {`"\"\\\/\b\f\n\r\t"`, true}, {"\"h\u00e9\"", true},
	{``, false}, {` `, false}, {`{`, false}, {`{"a"}`, false}, {`{"a":}`, false}, {`{"a":1,}`, false}, {`[1,]`, false},
	{`{a:1}`, false}, {`{'a':1}`, false}, {`NaN`, false}, {`-Infinity`, false}, {`Infinity`, false}, {`01`, false},
	{`1.`, false}, {`.5`, false}, {`1e`, false}, {`+1`, false}, {`-`, false}, {`tru`, false}, {`nul`, false},
	{`"abc`, false}, {`"\x"`, false}, {`"\u12"`, false}, {"\"a\tb\"", false}, {"\"\xff\"", false},
	{"\"\xed\xa0\x80\"", false}, {`{} {}`, false}, {`{}x`, false}, {`[1 2]`, false}, {`{"a":1 "b":2}`, false},
	// Plain runs longer than a word and than a block, with the byte that ends them at every lane.
	{`"` + strings.Repeat("abcdefgh", 9) + `"`, true}, {`"` + strings.Repeat("a", 70) + `\n"`, true},
	{`"abcdefg` + "\x1f" + `"`, false}, {`"abcdefgh` + "\x7f" + `"`, true}, {`"abcdefgh` + "\xc3\xa9" + `xyz"`, true},
	{`"abcdefgh` + "\xc3" + `xyz"`, false}, {`"abcdefghijklmno\"p\\"`, true}, {`"abcdefghijklmno\q"`, false},
	{`"` + strings.Repeat(`ab\"cd\\`, 20) + `"`, true}, {`"` + strings.Repeat(`ab\"cd\\`, 20) + `\`, false},
	{`"` + strings.Repeat(`a`, 63) + `\"` + strings.Repeat(`b`, 70) + `"`, true},
	{`"` + strings.Repeat(`a`, 62) + `\u00e9` + strings.Repeat(`b`, 70) + `"`, true},
	{`"` + strings.Repeat(`a`, 100) + "\x01" + `"`, false}, {`"` + strings.Repeat(`a`, 100) + `\z"`, false},
	{`["` + strings.Repeat(`a`, 30) + `","\x"]`, false}, {`["` + strings.Repeat(`a`, 30) + `","\n"]`, true},
}

func TestValidateCases(t *testing.T) {
	for _, c := range walkCases {
		err := Validate([]byte(c.in))
		if (err == nil) != c.valid {
			t.Errorf("Validate(%q) = %v, want valid=%v", c.in, err, c.valid)
		}
		if agree := json.Valid([]byte(c.in)) && utf8.ValidString(c.in); agree != c.valid {
			t.Errorf("case %q disagrees with encoding/json + utf8", c.in)
		}
	}
	deep := strings.Repeat("[", MaxNesting+1) + strings.Repeat("]", MaxNesting+1)
	if Validate([]byte(deep)) == nil {
		t.Error("nesting beyond MaxNesting accepted")
	}
	ok := strings.Repeat("[", MaxNesting) + strings.Repeat("]", MaxNesting)
	if err := Validate([]byte(ok)); err != nil {
		t.Errorf("nesting of MaxNesting rejected: %v", err)
	}
}

func TestValidateMembers(t *testing.T) {
	in := []byte(` {"a" : 1, "b":{"c":[2]} ,"a":"x\"y"} `)
	got, err := ValidateMembers(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names, vals []string
	for _, m := range got {
		names = append(names, string(in[m.KeyStart:m.KeyEnd]))
		vals = append(vals, string(in[m.ValStart:m.ValEnd]))
	}
	if strings.Join(names, " ") != `"a" "b" "a"` || strings.Join(vals, " ") != `1 {"c":[2]} "x\"y"` {
		t.Errorf("members %v = %v", names, vals)
	}
	prefix := []Member{{KeyStart: 1, KeyEnd: 2, ValStart: 3, ValEnd: 4}}
	for _, bad := range []string{`{"a":1,`, `{"a":1} x`, `[1]`, `"s"`} {
		got, err := ValidateMembers([]byte(bad), prefix)
		if len(got) != 1 || (err == nil) != (bad == `[1]` || bad == `"s"`) {
			t.Errorf("ValidateMembers(%s) = %v, %v; want the prefix back", bad, got, err)
		}
	}
}

func TestTruthy(t *testing.T) {
	cases := []struct {
		in   string
		want bool
	}{
		{``, false}, {`null`, false}, {`false`, false}, {`true`, true}, {`""`, false}, {`"0"`, true}, {`" "`, true},
		{`{}`, false}, {`{ }`, false}, {`{"a":0}`, true}, {`[]`, false}, {`[ ]`, false}, {`[0]`, true},
		{`0`, false}, {`-0`, false}, {`0.0`, false}, {`0e5`, false}, {`-0.000E-3`, false}, {`1`, true}, {`0.01`, true},
		{`-2`, true}, {`10e0`, true}, {`1e400`, true},
		// Python's value: json.loads("1e-400") is 0.0, which is false.
		{`1e-400`, false}, {`-5E-999`, false}, {`4.9e-324`, true},
	}
	for _, c := range cases {
		if got := Truthy([]byte(c.in)); got != c.want {
			t.Errorf("Truthy(%s) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestString(t *testing.T) {
	cases := []string{`"plain"`, `"a\"b"`, `"\\"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, `"\udc00x"`, `"\ud800\u0041"`,
		`"tab\tnl\n\/"`, `""`, `"` + strings.Repeat(`abc\"de`, 30) + `"`, `"` + strings.Repeat("x", 100) + `\u0041"`}
	for _, c := range cases {
		var want string
		if err := json.Unmarshal([]byte(c), &want); err != nil {
			t.Fatal(err)
		}
		if got := Unquote([]byte(c)); got != want {
			t.Errorf("Unquote(%s) = %q, want %q", c, got, want)
		}
		if got, ok := Text([]byte(c)); !ok || string(got) != want {
			t.Errorf("Text(%s) = %q, %v, want %q", c, got, ok, want)
		}
		if got, ok := AppendText([]byte("<"), []byte(c)); !ok || string(got) != "<"+want {
			t.Errorf("AppendText(%s) = %q, %v, want %q", c, got, ok, want)
		}
	}
	if _, ok := String([]byte(`1`)); ok {
		t.Error("String(1) is ok")
	}
}

func TestSkipStringBackslashes(t *testing.T) {
	cases := map[string]int{
		`"a"rest`:         3,
		`"a\"b"rest`:      6,
		`"a\\"rest`:       5,
		`"a\\\"b"rest`:    8,
		`"\\\\"rest`:      6,
		`"unterminated\"`: 15,
		`"` + strings.Repeat(`ab\"`, 40) + `"rest`:      1 + 160 + 1,
		`"` + strings.Repeat("a", 100) + `\\"rest`:      1 + 100 + 2 + 1,
		`"` + strings.Repeat("a", 100) + `\"` + `"rest`: 1 + 100 + 2 + 1,
		`"` + strings.Repeat("a", 100) + `\"` + "bbb":   1 + 100 + 2 + 3,
		`"` + strings.Repeat("abcdefg", 20) + `\`:       1 + 140 + 1,
	}
	for in, want := range cases {
		if got := SkipString([]byte(in), 0); got != want {
			t.Errorf("SkipString(%.60s) = %d, want %d", in, got, want)
		}
	}
}

func TestLookupAndKeys(t *testing.T) {
	obj := []byte(`{"a":1,"b":[true],"\u0061":"last","c":{"a":2}}`)
	for _, c := range []struct{ name, want string }{{"a", `"last"`}, {"b", `[true]`}, {"c", `{"a":2}`}, {"z", ``}} {
		if got := Lookup(obj, c.name); string(got) != c.want {
			t.Errorf("Lookup(%q) = %s, want %s", c.name, got, c.want)
		}
	}
	for _, v := range []string{`[1]`, `"a"`, `null`, ``, `1`} {
		if got := Lookup([]byte(v), "a"); got != nil {
			t.Errorf("Lookup(%s, a) = %s, want nil", v, got)
		}
		if EachMember([]byte(v), func(_, _ []byte) bool { t.Error("called"); return true }) {
			t.Errorf("EachMember(%s) reports an object", v)
		}
	}
	if EachElement([]byte(`{}`), func([]byte) bool { return true }) {
		t.Error("EachElement({}) reports an array")
	}
	if !KeyIs([]byte(`"\u0061b"`), "ab") || KeyIs([]byte(`"ab"`), "a") || KeyIs([]byte(`"\u0061"`), "ab") {
		t.Error("KeyIs")
	}
}

// FuzzWalk checks the validator and every walker and accessor against encoding/json (which accepts
// invalid UTF-8 inside strings, hence the utf8 check): on any input the walkers do not panic; on
// valid input members, elements, Lookup (last duplicate wins), String, Int, Float, Truthy and
// KindName give what decoding the text gives, and ValidateMembers maps what EachMember walks.
func FuzzWalk(f *testing.F) {
	for _, c := range walkCases {
		f.Add([]byte(c.in))
	}
	f.Add([]byte(`{"n":{"a":1,"b":[2]},"x":0,"n":{"c":"d"},"n":null}`))
	f.Add([]byte(`{"a":"x\u00e9\ud83d\ude00\n\"","d":"` + strings.Repeat(`ab\"c`, 10) + `","a":1,"":"\ud800"}`))
	f.Add([]byte(`abcdefgh\"ijklmn\u00e9opqrstu\ud83d\ude00vwxyz\ud800\u0041\x`))
	f.Add([]byte(`{"a\\"b":"c\\\\","d":{"e":[1,{"f":"\\""}]},"a\\"b":0.0,"n":-12,"x":1e-400}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if a, b := unescape(data), appendUnescaped(nil, data); !bytes.Equal(a, b) {
			t.Fatalf("unescape(%q) = %q, the general decoder gives %q", data, a, b)
		}
		err := Validate(data)
		members, merr := ValidateMembers(data, nil)
		if (err == nil) != (merr == nil) {
			t.Fatalf("Validate = %v, ValidateMembers = %v", err, merr)
		}
		if err := checkFastPath(data, "n"); err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		decoded, derr := validNested(data)
		if (err == nil) != (derr == nil) {
			t.Fatalf("Validate(%q) = %v, Scanner.Members: %v", data, err, derr)
		}
		if err == nil && len(decoded) != len(members) {
			t.Fatalf("Scanner.Members gave %d members, ValidateMembers %d", len(decoded), len(members))
		}
		for i := range decoded {
			if m, d := members[i], decoded[i]; m.KeyStart != d.KeyStart || m.KeyEnd != d.KeyEnd || m.ValStart != d.ValStart || m.ValEnd != d.ValEnd {
				t.Fatalf("member %d: %+v, decoding %+v", i, m, d)
			}
		}
		strict := json.Valid(data) && utf8.Valid(data)
		if err != nil {
			// Where orjson is stricter than encoding/json (escaped surrogates, overflowing numbers,
			// nesting), FuzzValidate checks the verdict.
			if strict && !bytes.Contains(data, []byte(`\u`)) && !bytes.ContainsAny(data, "eE") && !longDigits(data) &&
				!bytes.Contains(data, bytes.Repeat([]byte("["), MaxNesting)) && !bytes.Contains(data, bytes.Repeat([]byte("{"), MaxNesting)) {
				t.Fatalf("Validate(%q) = %v, encoding/json accepts it", data, err)
			}
			// Trusted walkers must not panic on anything.
			EachMember(data, func(k, v []byte) bool { _ = KeyName(k); _ = Truthy(v); return true })
			EachElement(data, func(v []byte) bool { _, _ = String(v); return true })
			_ = Truthy(data)
			_ = SkipValue(data, 0)
			return
		}
		if !strict {
			t.Fatalf("Validate(%q) accepts what encoding/json refuses", data)
		}
		v := TrimWS(data)
		if end := SkipValue(v, 0); end != len(v) {
			t.Fatalf("SkipValue(%q) = %d, want %d", v, end, len(v))
		}
		checkValue(t, v)
		if IsObject(v) {
			off := SkipWS(data, 0)
			i := 0
			EachMember(v, func(k, val []byte) bool {
				m := members[i]
				if !bytes.Equal(data[m.KeyStart:m.KeyEnd], k) || !bytes.Equal(data[m.ValStart:m.ValEnd], val) || m.KeyStart < off {
					t.Fatalf("member %d: ValidateMembers %+v, EachMember %s:%s", i, m, k, val)
				}
				i++
				return true
			})
			if i != len(members) {
				t.Fatalf("EachMember saw %d members, ValidateMembers %d", i, len(members))
			}
		} else if len(members) != 0 {
			t.Fatalf("ValidateMembers of a non-object gave %v", members)
		}
	})
}

// checkValue compares the accessors on the valid raw value v with its decoded form, then recurses.
func checkValue(t *testing.T, v []byte) {
	var dec any
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	if err := d.Decode(&dec); err != nil {
		t.Fatal(err)
	}
	switch x := dec.(type) {
	case map[string]any:
		var want map[string]json.RawMessage
		if err := json.Unmarshal(v, &want); err != nil {
			t.Fatal(err)
		}
		got := map[string][]byte{}
		EachMember(v, func(k, val []byte) bool {
			got[string(KeyName(k))] = val
			checkValue(t, val)
			return true
		})
		if len(got) != len(want) {
			t.Fatalf("members of %q: got %d names, want %d", v, len(got), len(want))
		}
		for k, w := range want {
			if !bytes.Equal(got[k], w) || !bytes.Equal(Lookup(v, k), w) {
				t.Fatalf("member %q of %q: got %q, Lookup %q, want %q", k, v, got[k], Lookup(v, k), w)
			}
		}
		if Truthy(v) != (len(x) > 0) || KindName(v) != "object" || !IsObject(v) {
			t.Fatalf("object %q: Truthy %v, KindName %s", v, Truthy(v), KindName(v))
		}
	case []any:
		n := 0
		EachElement(v, func(e []byte) bool { n++; checkValue(t, e); return true })
		if n != len(x) || Truthy(v) != (n > 0) || KindName(v) != "array" || !IsArray(v) {
			t.Fatalf("array %q: %d elements, want %d; Truthy %v", v, n, len(x), Truthy(v))
		}
	case string:
		if s, ok := String(v); !ok || s != x || Truthy(v) != (x != "") || KindName(v) != "string" {
			t.Fatalf("String(%q) = %q, %v, want %q", v, s, ok, x)
		}
	case bool:
		if Truthy(v) != x || KindName(v) != "boolean" || !IsBool(v) {
			t.Fatalf("bool %q: Truthy %v", v, Truthy(v))
		}
	case nil:
		if Truthy(v) || KindName(v) != "null" || !IsNull(v) {
			t.Fatalf("null %q: Truthy %v", v, Truthy(v))
		}
	case json.Number:
		f, ferr := x.Float64()
		if !IsNumber(v) {
			t.Fatalf("number %q not IsNumber", v)
		}
		if got, ok := Float(v); ok != (ferr == nil && !math.IsInf(f, 0)) || (ok && got != f) {
			t.Fatalf("Float(%q) = %v, %v; strconv says %v, %v", v, got, ok, f, ferr)
		}
		if Truthy(v) != (f != 0) {
			t.Fatalf("Truthy(%q) = %v, value %v", v, Truthy(v), f)
		}
		n, nerr := x.Int64()
		isInt := !strings.ContainsAny(string(v), ".eE")
		if got, ok := Int(v); ok != (isInt && nerr == nil) || (ok && got != n) {
			t.Fatalf("Int(%q) = %v, %v; strconv says %v, %v", v, got, ok, n, nerr)
		}
		if want := map[bool]string{true: "integer", false: "number"}[isInt]; KindName(v) != want {
			t.Fatalf("KindName(%q) = %s, want %s", v, KindName(v), want)
		}
	}
}

// longDigits reports a run of more than 300 digits: a number that may overflow a double.
func longDigits(b []byte) bool {
	n := 0
	for _, c := range b {
		if c >= '0' && c <= '9' {
			if n++; n > 300 {
				return true
			}
		} else {
			n = 0
		}
	}
	return false
}

// validNested is Scanner.Members mapping member "n", also checking that the nested map is what
// EachMember walks and that its index walks it as the walkers do.
func validNested(data []byte) ([]Member, error) {
	sc := Scanner{Nested: "n"}
	members, err := sc.Members(data, nil)
	if err != nil {
		return nil, err
	}
	// The nested map is the members of the last "n" object, as EachMember walks them.
	nested, start := []string(nil), -1
	for _, m := range members {
		if v := data[m.ValStart:m.ValEnd]; KeyIs(data[m.KeyStart:m.KeyEnd], "n") && IsObject(v) {
			nested, start = nil, m.ValStart
			EachMember(v, func(k, val []byte) bool { nested = append(nested, string(k)+":"+string(val)); return true })
		}
	}
	var got []string
	for _, m := range sc.NestedMembers {
		got = append(got, string(data[m.KeyStart:m.KeyEnd])+":"+string(data[m.ValStart:m.ValEnd]))
	}
	if sc.NestedStart != start || strings.Join(got, ",") != strings.Join(nested, ",") {
		return nil, fmt.Errorf("nested members at %d %q, EachMember at %d %q", sc.NestedStart, got, start, nested)
	}
	if start >= 0 {
		if err := checkTree(&sc.Tree, data[start:start+SkipValue(data[start:], 0)]); err != nil {
			return nil, err
		}
	}
	return members, nil
}

// TestScannerRefuses: a Scanner accepts long escape-dense texts and refuses what Validate refuses.
func TestScannerRefuses(t *testing.T) {
	d := Scanner{Nested: "n"}
	long := strings.Repeat(`data: {\"type\":\"x\"}\n\n\u00e9\ud83d\ude00 `, 400)
	for _, c := range []struct{ line, err string }{
		{`{"raw":"` + long + `","n":{"a":1},"raw":"short\\"}`, ""},
		{`{"raw":"a","other":"` + long + `"}`, ""},
		{`{"raw":"` + long + `\ud800"}`, "unpaired"},
		{`{"raw":"` + long + "\x01" + `"}`, "control"},
		{`{"raw":"` + long, "unterminated"},
		{`{"raw":"ok"`, "unterminated object"},
		{`{"raw":7,"x":"\q"}`, "invalid escape"},
		{`{"n":{"a":"\q"}}`, "invalid escape"},
	} {
		_, err := d.Members([]byte(c.line), nil)
		verr := Validate([]byte(c.line))
		if c.err == "" {
			if err != nil || verr != nil {
				t.Errorf("%.50s: Members %v, Validate %v", c.line, err, verr)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) || verr == nil || verr.Error() != err.Error() {
			t.Errorf("%.50s: err %v, want %q (Validate: %v)", c.line, err, c.err, verr)
		}
	}
}

// checkTree checks that the index walks the valid value v, and every value inside it, as the
// walkers walk the text: the same members (the same slices), elements and Lookup results.
func checkTree(tr *Tree, v []byte) error {
	n := tr.find(v)
	if n < 0 {
		return fmt.Errorf("value %.40q is not in the index", v)
	}
	// A slice that starts where the value does but ends elsewhere is not the value, whether find
	// meets it through its hint (the node last handed out) or its search.
	for _, hint := range []int{n, 0} {
		tr.hint = hint
		if len(v) > 1 && tr.find(v[:len(v)-1]) >= 0 {
			return fmt.Errorf("a prefix of %.40q is found in the index (hint %d)", v, hint)
		}
		if tr.find(v) != n {
			return fmt.Errorf("value %.40q found at another node (hint %d)", v, hint)
		}
	}
	var want, got [][]byte
	switch {
	case IsObject(v):
		EachMember(v, func(k, val []byte) bool { want = append(want, k, val); return true })
		tr.EachMember(v, func(k, val []byte) bool { got = append(got, k, val); return true })
		for i := 0; i < len(want); i += 2 {
			name := string(KeyName(want[i]))
			if a, b := Lookup(v, name), tr.Lookup(v, name); !sameSlice(a, b) {
				return fmt.Errorf("Lookup(%.40q, %q): walker %q, index %q", v, name, a, b)
			}
		}
		if tr.Lookup(v, "\x00absent") != nil {
			return fmt.Errorf("index Lookup of an absent name")
		}
	case IsArray(v):
		EachElement(v, func(e []byte) bool { want = append(want, e); return true })
		tr.EachElement(v, func(e []byte) bool { got = append(got, e); return true })
	default:
		if tr.EachMember(v, func(_, _ []byte) bool { return true }) || tr.EachElement(v, func([]byte) bool { return true }) {
			return fmt.Errorf("index walks the scalar %q", v)
		}
		return nil
	}
	if len(got) != len(want) {
		return fmt.Errorf("%.40q: index gives %d parts, walkers %d", v, len(got), len(want))
	}
	for i := range want {
		if !sameSlice(want[i], got[i]) {
			return fmt.Errorf("%.40q part %d: index %q, walkers %q", v, i, got[i], want[i])
		}
	}
	for i := len(want) - 1; i >= 0; i-- {
		if IsObject(v) && i%2 == 0 {
			continue // a key
		}
		if err := checkTree(tr, want[i]); err != nil {
			return err
		}
	}
	return nil
}

// sameSlice reports whether a and b are the same bytes of the same text.
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// FuzzFloat: Float's fast path gives exactly strconv.ParseFloat's double (bits compared, so -0
// and 0 differ) wherever it applies.
func FuzzFloat(f *testing.F) {
	for _, s := range []string{"0", "-0", "-0.0", "0.02", "1795968571.513956", "1795968571.5139756",
		"9007199254740992", "9007199254740993", "9007199254740995", "18014398509481989", "0.9007199254740993",
		"1234567890123456789", "9999999999999999999", "0.0000000000000000001", "4503599627370496.5", "0.1", "123.4567890123456789", "1e5", "01", "1.", "-", "2.2250738585072014"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := exactFloat([]byte(s))
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(s, 64)
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("exactFloat(%q) = %v, ParseFloat = %v, %v", s, got, want, err)
		}
	})
}

// TestIndexBackslash compares indexBackslash with bytes.IndexByte for every length up to 80 and
// every position of one or two backslashes (the word loop, the overlapping tail word, the byte
// loop of short runs and the vectorised search of long ones).
func TestIndexBackslash(t *testing.T) {
	for n := range 81 {
		base := bytes.Repeat([]byte{'a'}, n)
		check := func(s []byte) {
			if got, want := indexBackslash(s), bytes.IndexByte(s, '\\'); got != want {
				t.Fatalf("indexBackslash(%q) = %d, want %d", s, got, want)
			}
		}
		check(base)
		for i := range n {
			for j := i; j < n; j++ {
				s := bytes.Clone(base)
				s[i], s[j] = '\\', '\\'
				check(s)
			}
		}
	}
}

// TestExactFloatRandom compares Float's fast paths with strconv.ParseFloat bit for bit on random
// plain decimals of 1 to 19 digits with every fraction length, and on the decimals just around
// the midpoints between neighbouring doubles of a timestamp's range.
func TestExactFloatRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	// The capture line's timestamps take the fast path, not only the fallback.
	for _, s := range []string{"1795968571.5139756", "1795968571.513956", "0.02"} {
		if _, ok := exactFloat([]byte(s)); !ok {
			t.Errorf("exactFloat(%q) fell back to strconv", s)
		}
	}
	check := func(s string) {
		got, ok := exactFloat([]byte(s))
		want, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if ok && math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("exactFloat(%q) = %v (%x), ParseFloat = %v (%x)", s, got, math.Float64bits(got), want, math.Float64bits(want))
		}
	}
	for range 300000 {
		digits := 1 + r.IntN(19)
		b := make([]byte, 0, 21)
		for range digits {
			b = append(b, byte('0'+r.IntN(10)))
		}
		if frac := r.IntN(digits + 1); frac > 0 {
			b = append(b[:digits-frac:digits-frac], append([]byte{'.'}, b[digits-frac:digits]...)...)
			if len(b) > 0 && b[0] == '.' {
				b = append([]byte{'0'}, b...)
			}
		}
		check(string(b))
	}
	// Near-ties: the exact midpoint between a double near 1.8e9 and the next one, truncated to 19
	// digits (9 after the point), and the decimals one unit in the last place around it.
	for range 20000 {
		f := 1e9 + r.Float64()*1e9
		_, e := math.Frexp(f)
		mid := new(big.Float).SetPrec(200).SetFloat64(f)
		mid.Add(mid, new(big.Float).SetMantExp(big.NewFloat(1), e-54)) // half an ulp: 2^(e-53-1)
		s := mid.Text('f', 9)
		n, _ := strconv.ParseUint(strings.Replace(s, ".", "", 1), 10, 64)
		for _, d := range []uint64{n - 1, n, n + 1} {
			u := strconv.FormatUint(d, 10)
			check(u[:len(u)-9] + "." + u[len(u)-9:])
		}
	}
}

// TestKeyName decodes key tokens (and HasBackslash finds their escapes) of every length up to 20 bytes with an escape at every position
// (the word-wise test of short tokens must find each one) and without.
func TestKeyName(t *testing.T) {
	for n := 0; n <= 18; n++ {
		plainName := strings.Repeat("k", n)
		if got := KeyName([]byte(`"` + plainName + `"`)); string(got) != plainName {
			t.Fatalf("KeyName(%q) = %q", plainName, got)
		}
		if HasBackslash([]byte(`"` + plainName + `"`)) {
			t.Fatalf("HasBackslash(%q) = true", plainName)
		}
		for pos := 0; pos+2 <= n; pos++ {
			tok := `"` + plainName[:pos] + `\n` + plainName[pos+2:] + `"`
			want := plainName[:pos] + "\n" + plainName[pos+2:]
			if got := KeyName([]byte(tok)); string(got) != want {
				t.Fatalf("KeyName(%s) = %q, want %q", tok, got, want)
			}
			if !HasBackslash([]byte(tok)) {
				t.Fatalf("HasBackslash(%s) = false", tok)
			}
		}
	}
}

// skipValueBytes is SkipValue's container rule read one byte at a time: the reference the
// word-at-a-time SkipValue must agree with on any input, malformed included.
func skipValueBytes(data []byte, i int) int {
	if i >= len(data) || (data[i] != '{' && data[i] != '[') {
		return SkipValue(data, i)
	}
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
		}
		i++
	}
	return len(data)
}

// FuzzSkipValue: SkipValue ends every value where the byte-at-a-time rule ends it, from every
// offset of the input.
func FuzzSkipValue(f *testing.F) {
	f.Add([]byte(`[1,2,3,{"a":[4,5]},"]}",-6e7,true,null] x`))
	f.Add([]byte(`{"ids":[151000,12,9,77777,3,4,5,6,7,8,9],"k":{"n":[[],{}]}}`))
	f.Add([]byte(`[[[[[[[[[[1234567890123]]]]]]]]]]]`))
	f.Add([]byte("[1 ,\t2\n,3\r,YyDEL_\x7f{}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for i := range data {
			if got, want := SkipValue(data, i), skipValueBytes(data, i); got != want {
				t.Fatalf("SkipValue(%q, %d) = %d, byte at a time %d", data, i, got, want)
			}
		}
	})
}
