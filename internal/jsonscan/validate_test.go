package jsonscan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		in    string
		valid bool
	}{
		{`{}`, true}, {` {"a":[1,-2.5e+3,true,false,null,"x\u00e9\n"]} `, true}, {`"s"`, true}, {`0`, true},
		{``, false}, {`{`, false}, {`{"a":NaN}`, false}, {`Infinity`, false}, {`01`, false}, {`1.`, false},
		{`{"a":1,}`, false}, {`[1 2]`, false}, {`"\x"`, false}, {"\"\x01\"", false}, {"\"\xff\"", false},
		{`{} {}`, false}, {`tru`, false}, {`"\ud800"`, true}, {strings.Repeat("[", 20000) + strings.Repeat("]", 20000), false},
	} {
		err := Validate([]byte(tc.in))
		if (err == nil) != tc.valid {
			t.Errorf("Validate(%.40q) = %v, want valid=%v", tc.in, err, tc.valid)
		}
		var se *SyntaxError
		if err != nil && !errors.As(err, &se) {
			t.Errorf("Validate(%.40q) error %T is not a *SyntaxError", tc.in, err)
		}
	}
}

// FuzzValidate checks the validator against encoding/json plus utf8.Valid, which together define
// what NeMo Gym's reader (orjson) accepts, short of nesting depth.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":null}]}`, `[1e5,-0.0]`, "\"\xe2\x82\"", `{"a":"\u2028"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := json.Valid(b) && utf8.Valid(b)
		if got := Validate(b) == nil; got != want {
			t.Fatalf("Validate(%q) valid=%v, encoding/json+utf8 say %v", b, got, want)
		}
	})
}

func BenchmarkValidate(b *testing.B) {
	line := []byte(`{"model_call_id":"4c5ba90cd72e4127a448b4a0442f1c95","dialect":"responses","request":{"input":[{"role":"user","content":"` + strings.Repeat("héllo wörld ", 300) + `"}]},"response":{"usage":{"input_tokens":10}}}`)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if Validate(line) != nil {
			b.Fatal("invalid")
		}
	}
}

func TestAppendString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", `"plain"`},
		{"a\"b\\c", `"a\"b\\c"`},
		{"line\nbreak\r\t\b\f", `"line\nbreak\r\t\b\f"`},
		{"\x00\x1f", `"\u0000\u001f"`},
		{"<html>&", `"<html>&"`},
		{"héllo ☃ 😀 \u2028", "\"héllo ☃ 😀 \u2028\""},
		{"bad\xffbyte", "\"bad\uFFFDbyte\""},
		{"cut\xe2\x82", "\"cut\uFFFD\uFFFD\""},
		{"surrogate\xed\xa0\x80", "\"surrogate\uFFFD\uFFFD\uFFFD\""},
		{"overlong\xc0\xaf", "\"overlong\uFFFD\uFFFD\""},
	} {
		got := string(AppendString(nil, tc.in))
		if got != tc.want {
			t.Errorf("AppendString(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if b := string(AppendString(nil, []byte(tc.in))); b != got {
			t.Errorf("AppendString([]byte(%q)) = %s, string form gives %s", tc.in, b, got)
		}
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil || (utf8.ValidString(tc.in) && back != tc.in) {
			t.Errorf("AppendString(%q) does not round-trip: %q, %v", tc.in, back, err)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add([]byte("h\xe9llo \"x\"\n\xf0\x9f\x98"))
	f.Fuzz(func(t *testing.T, b []byte) {
		out := AppendString(nil, b)
		if Validate(out) != nil {
			t.Fatalf("AppendString(%q) = %q is not valid JSON", b, out)
		}
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatal(err)
		}
		if utf8.Valid(b) && back != string(b) {
			t.Fatalf("round trip of valid UTF-8 %q gave %q", b, back)
		}
	})
}
