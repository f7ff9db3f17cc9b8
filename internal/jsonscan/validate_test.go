package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls/internal/jsonscan/orjsonrules"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		in    string
		valid bool
	}{
		{`{}`, true}, {` {"a":[1,-2.5e+3,true,false,null,"x\u00e9\n"]} `, true}, {`"s"`, true}, {`0`, true},
		{``, false}, {`{`, false}, {`{"a":NaN}`, false}, {`Infinity`, false}, {`01`, false}, {`1.`, false},
		{`{"a":1,}`, false}, {`[1 2]`, false}, {`"\x"`, false}, {"\"\x01\"", false}, {"\"\xff\"", false},
		{`{} {}`, false}, {`tru`, false}, {strings.Repeat("[", 20000) + strings.Repeat("]", 20000), false},
		// Numbers must be finite doubles (orjson: "number is infinity when parsed as double").
		{`1e400`, false}, {`-1e400`, false}, {`1e999`, false}, {`1E+400`, false}, {`[1,{"t":1e400}]`, false},
		{`1.79769313486231581e308`, false}, {`1.797693134862315807e308`, true}, {`1.7976931348623157e308`, true},
		{"1" + strings.Repeat("0", 309), false}, {"-1" + strings.Repeat("0", 308), true}, {`1e308`, true},
		{`1e-400`, true}, {`-1e-400`, true}, {`0e999999999999999999999`, true}, {`1e-999999999999999999999`, true},
		{"0." + strings.Repeat("0", 500) + "1e400", true}, {"1" + strings.Repeat("0", 400) + "e-400", true},
		{`1e99999999999999999999`, false}, {`18446744073709551616`, true},
		// Escaped surrogates must come in pairs (orjson: "no matched low surrogate").
		{`"\ud800"`, false}, {`"\udc00"`, false}, {`"a\uDBFFb"`, false}, {`"\ud800\u0041"`, false},
		{`"\ud800\ud800\udc00"`, false}, {`"\ud800\n"`, false}, {`"\ud800\`, false}, {`{"\udfff":1}`, false},
		{`"\ud800\udc00"`, true}, {`"\uDBFF\uDFFF"`, true}, {`"\ud83d\ude00\u00e9"`, true}, {`"\uffff\u0000"`, true},
		{"\"\xed\xa0\x80\"", false}, // a surrogate written as raw UTF-8 is invalid UTF-8
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

// FuzzValidate checks the validator against orjsonrules.Check, an independent reader of what NeMo
// Gym's reader (orjson) accepts (encoding/json, utf8, strconv and a surrogate scan), short of
// nesting depth.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":null}]}`, `[1e5,-0.0]`, "\"\xe2\x82\"", `{"a":"\u2028"}`,
		`[1e308,1.8e308]`, `{"x":"\ud800\udc00","y":"\udc00"}`, `"\ud800\u"`, `-0.5E-400`} {
		f.Add([]byte(s))
	}
	// Long strings, so that the 64-byte blocks of the string loop meet escapes at every offset.
	f.Add([]byte(`{"x":"` + strings.Repeat(`data: {\"a\":\"b\\\"c\"}\n\n`, 12) + `é\u00e9"}`))
	f.Add([]byte(`["` + strings.Repeat(`0123456789\\`, 9) + `\"` + "\x01" + `"]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		want := orjsonrules.Check(b)
		if got := Validate(b); (got == nil) != (want == nil) {
			t.Fatalf("Validate(%q) = %v, orjson rules say %v", b, got, want)
		}
		if _, got := validNested(b); (got == nil) != (want == nil) {
			t.Fatalf("Scanner.Members(%q) = %v, orjson rules say %v", b, got, want)
		}
		if err := checkFastPath(b, "n"); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
	})
}

// TestValidateAgreesWithOrjson runs the cases of TestValidate's kind that sit on a rule's edge
// through Validate, orjsonrules.Check and, when python3 has the orjson module, orjson itself: all
// must agree.
func TestValidateAgreesWithOrjson(t *testing.T) {
	var texts [][]byte
	for _, s := range []string{
		`1e400`, `-1e400`, `1e999`, `1e308`, `2e308`, `1.7976931348623158e308`, `1.7976931348623159e308`,
		`1.797693134862315807e308`, `1.797693134862315808e308`, `1.79769313486231581e308`, `-1.79769313486231581e308`,
		`179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792`,
		`179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497791`,
		`1e-400`, `4.9e-324`, `2e-324`, `0e99999`, "1" + strings.Repeat("0", 309), "1" + strings.Repeat("0", 308),
		"0." + strings.Repeat("0", 400) + "1e700", "0." + strings.Repeat("0", 400) + "1e800",
		`"\ud800"`, `"\udc00"`, `"\ud800\udc00"`, `"\ud800\u0041"`, `"\ud800x"`, `"\ud800\\udc00"`,
		`"\udbff\udfff"`, `"\ud800\ud800\udc00"`, `{"\ud800":1}`, `"\u0000"`, "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
		"\"\xef\xbf\xbf\"", `NaN`, `[Infinity]`, `-Infinity`, `{"a":1,}`, `"\u12"`,
	} {
		texts = append(texts, []byte(s))
	}
	orj, err := orjsonrules.Orjson(texts)
	if errors.Is(err, orjsonrules.ErrNoOrjson) {
		t.Log("python3 has no orjson module: checking against orjsonrules only")
	} else if err != nil {
		t.Fatal(err)
	}
	for i, b := range texts {
		got, rules := Validate(b), orjsonrules.Check(b)
		if (got == nil) != (rules == nil) {
			t.Errorf("Validate(%.60q) = %v, orjsonrules.Check = %v", b, got, rules)
		}
		if orj != nil && (got == nil) != (orj[i] == nil) {
			t.Errorf("Validate(%.60q) = %v, orjson.loads: %v", b, got, orj[i])
		}
	}
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

// BenchmarkValidateCaptureLines validates every line of the Gym-written capture fixture: real
// provider payloads, number- and escape-heavy, unlike BenchmarkValidate's long text.
func BenchmarkValidateCaptureLines(b *testing.B) {
	lines := captureLines(b)
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range lines {
			Validate(l) // a few fixture lines are damaged on purpose
		}
	}
}

func TestDeeperThan(t *testing.T) {
	tests := []struct {
		in    string
		limit int
		want  bool
	}{
		{`1`, 0, false},
		{`{}`, 0, true},
		{`{}`, 1, false},
		{`[[1],{"a":[2]}]`, 2, true},
		{`[[1],{"a":[2]}]`, 3, false},
		{`["[[[[","]]]]"]`, 1, false}, // brackets inside strings do not count
		{`{"a":"\"[[["}`, 1, false},
	}
	for _, tt := range tests {
		if got := DeeperThan([]byte(tt.in), tt.limit); got != tt.want {
			t.Errorf("DeeperThan(%s, %d) = %v, want %v", tt.in, tt.limit, got, tt.want)
		}
	}
}

// TestValidateRandomStrings validates long random strings made of the pieces JSON held in a string
// is made of and of invalid ones (a control byte, a bad escape, a lone surrogate, a broken UTF-8
// sequence), so that the 64-byte blocks, the words and the byte-wise path all meet every kind of
// byte at every offset, and compares the verdict and the end with orjsonrules.
func TestValidateRandomStrings(t *testing.T) {
	defer restoreClassify()
	for _, form := range classifyForms { // the block loop of each form: assembly with AVX2
		form.use()
		t.Run(form.name, testValidateRandomStrings)
	}
}

func testValidateRandomStrings(t *testing.T) {
	good := []string{`\"`, `\n`, `\\`, `a`, `bc`, `defghij`, `\u00e9`, `\ud83d\ude00`, "é", `\t`, `\/`, "漢字", " ", `{`, `\\\"`, "😀", strings.Repeat("x", 40),
		strings.Repeat(`\\`, 33), strings.Repeat(`\"`, 40), strings.Repeat(`\n`, 20)}
	bad := []string{"\x01", `\x`, `\ud800`, `\udc00x`, "\xff", "\xe2\x82", `\u12`, "\x7f\x1f"}
	r := rand.New(rand.NewPCG(7, 8))
	for n := range 30000 {
		var sb strings.Builder
		sb.WriteString(`{"k":"`)
		for range r.IntN(120) {
			sb.WriteString(good[r.IntN(len(good))])
		}
		if n%3 == 0 {
			sb.WriteString(bad[r.IntN(len(bad))])
			for range r.IntN(40) {
				sb.WriteString(good[r.IntN(len(good))])
			}
		}
		sb.WriteString(`","z":[1]}`)
		b := []byte(sb.String())
		got, want := Validate(b), orjsonrules.Check(b)
		if (got == nil) != (want == nil) {
			t.Fatalf("Validate(%q) = %v, orjson rules say %v", b, got, want)
		}
		if err := checkFastPath(b, "k"); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		if got == nil {
			if end, err := validString(b, 5); err != nil || end != bytes.Index(b, []byte(`","z"`))+1 {
				t.Fatalf("validString(%q) = %d, %v", b, end, err)
			}
		}
	}
}

// BenchmarkScannerCaptureLines is BenchmarkValidateCaptureLines through a Scanner that maps the
// top-level members and the response's (with its Tree), as the record reader does.
func BenchmarkScannerCaptureLines(b *testing.B) {
	lines := captureLines(b)
	b.ReportAllocs()
	sc := Scanner{Nested: "response"}
	var members []Member
	for b.Loop() {
		for _, l := range lines {
			members, _ = sc.Members(l, members[:0]) // a few fixture lines are damaged on purpose
		}
	}
}

// captureLines returns the non-empty lines of the Gym-written capture fixture (a few are damaged on
// purpose) and sets b's bytes per op to their total length.
func captureLines(b *testing.B) [][]byte {
	b.Helper()
	files, err := filepath.Glob("../../testdata/gym-capture/capture/*.capture.jsonl")
	if err != nil || len(files) == 0 {
		b.Fatal("no capture fixture", err)
	}
	var lines [][]byte
	var size int64
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(l) > 0 {
				lines = append(lines, l)
				size += int64(len(l))
			}
		}
	}
	b.SetBytes(size)
	return lines
}

// BenchmarkScannerValidLines is BenchmarkScannerCaptureLines over the fixture's valid lines only:
// the lines the merge benchmark reads, none of them refused.
func BenchmarkScannerValidLines(b *testing.B) {
	var lines [][]byte
	var size int64
	for _, l := range captureLines(b) {
		if Validate(l) == nil {
			lines = append(lines, l)
			size += int64(len(l))
		}
	}
	b.SetBytes(size)
	b.ReportAllocs()
	sc := Scanner{Nested: "response"}
	var members []Member
	for b.Loop() {
		for _, l := range lines {
			if members, _ = sc.Members(l, members[:0]); members == nil {
				b.Fatal("refused")
			}
		}
	}
}
