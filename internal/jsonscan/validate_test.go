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
