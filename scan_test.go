package modelcalls

import (
	"bytes"
	"encoding/json"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"strings"
	"testing"
	"unicode/utf8"
)

var validateCases = []struct {
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
}

func TestValidateJSON(t *testing.T) {
	for _, c := range validateCases {
		err := validateJSON([]byte(c.in))
		if (err == nil) != c.valid {
			t.Errorf("validateJSON(%q) = %v, want valid=%v", c.in, err, c.valid)
		}
		if agree := json.Valid([]byte(c.in)) && utf8.ValidString(c.in); agree != c.valid {
			t.Errorf("case %q disagrees with encoding/json + utf8", c.in)
		}
	}
	deep := strings.Repeat("[", jsonscan.MaxNesting+1) + strings.Repeat("]", jsonscan.MaxNesting+1)
	if validateJSON([]byte(deep)) == nil {
		t.Error("nesting beyond jsonscan.MaxNesting accepted")
	}
	ok := strings.Repeat("[", jsonscan.MaxNesting) + strings.Repeat("]", jsonscan.MaxNesting)
	if err := validateJSON([]byte(ok)); err != nil {
		t.Errorf("nesting of jsonscan.MaxNesting rejected: %v", err)
	}
}

// FuzzValidateJSON checks the validator against encoding/json (which accepts invalid UTF-8 inside
// strings, hence the utf8 check) and runs the trusted walkers over what it accepts.
func FuzzValidateJSON(f *testing.F) {
	for _, c := range validateCases {
		f.Add([]byte(c.in))
	}
	f.Add([]byte(`{"a\\"b":"c\\\\","d":{"e":[1,{"f":"\\""}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := validateJSON(data)
		want := json.Valid(data) && utf8.Valid(data)
		if (err == nil) != want && !bytes.Contains(data, bytes.Repeat([]byte("["), jsonscan.MaxNesting)) &&
			!bytes.Contains(data, bytes.Repeat([]byte("{"), jsonscan.MaxNesting)) {
			t.Fatalf("validateJSON(%q) = %v, encoding/json says valid=%v", data, err, want)
		}
		if err != nil {
			// Trusted walkers must not panic on anything.
			forEachMember(data, func(m member) bool { _ = keyName(data[m.keyStart:m.keyEnd]); return true })
			forEachElement(data, func([]byte) bool { return true })
			_ = truthy(data)
			return
		}
		v := trimWS(data)
		if end := jsonscan.SkipValue(v, 0); end != len(v) {
			t.Fatalf("jsonscan.SkipValue(%q) = %d, want %d", v, end, len(v))
		}
		if isObject(v) {
			var want map[string]json.RawMessage
			if err := json.Unmarshal(v, &want); err != nil {
				t.Fatal(err)
			}
			got := map[string]json.RawMessage{}
			forEachMember(v, func(m member) bool {
				got[string(keyName(v[m.keyStart:m.keyEnd]))] = v[m.valStart:m.valEnd]
				return true
			})
			if len(got) != len(want) {
				t.Fatalf("members of %q: got %d keys, want %d", v, len(got), len(want))
			}
			for k, w := range want {
				if !bytes.Equal(got[k], w) {
					t.Fatalf("member %q of %q: got %q, want %q", k, v, got[k], w)
				}
			}
		}
		if isString(v) {
			var want string
			if err := json.Unmarshal(v, &want); err != nil {
				t.Fatal(err)
			}
			if got := unquote(v); got != want {
				t.Fatalf("unquote(%q) = %q, want %q", v, got, want)
			}
		}
	})
}

func TestTruthy(t *testing.T) {
	cases := []struct {
		in   string
		want bool
	}{
		{``, false}, {`null`, false}, {`false`, false}, {`true`, true}, {`""`, false}, {`"0"`, true}, {`" "`, true},
		{`{}`, false}, {`{ }`, false}, {`{"a":0}`, true}, {`[]`, false}, {`[ ]`, false}, {`[0]`, true},
		{`0`, false}, {`-0`, false}, {`0.0`, false}, {`0e5`, false}, {`-0.000E-3`, false}, {`1`, true}, {`0.01`, true},
		{`-2`, true}, {`1e-400`, true}, {`10e0`, true},
	}
	for _, c := range cases {
		if got := truthy([]byte(c.in)); got != c.want {
			t.Errorf("truthy(%s) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestUnquote(t *testing.T) {
	cases := []string{`"plain"`, `"a\"b"`, `"\\"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, `"\udc00x"`, `"\ud800\u0041"`, `"tab\tnl\n\/"`, `""`}
	for _, c := range cases {
		var want string
		if err := json.Unmarshal([]byte(c), &want); err != nil {
			t.Fatal(err)
		}
		if got := unquote([]byte(c)); got != want {
			t.Errorf("unquote(%s) = %q, want %q", c, got, want)
		}
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
	}
	for in, want := range cases {
		if got := jsonscan.SkipString([]byte(in), 0); got != want {
			t.Errorf("jsonscan.SkipString(%s) = %d, want %d", in, got, want)
		}
	}
}
