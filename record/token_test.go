package record

import (
	"bytes"
	"testing"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// rawEscapes are JSON string tokens of request_raw/response_raw values as writers other than ours
// may put them in a line: escapes our writer never produces next to the ones it does, and the
// characters it writes as they are (é, U+2028, a U+FFFD that replaced invalid UTF-8).
var rawEscapes = []struct{ tok, want string }{
	{`""`, `""`},
	{`"plain text"`, `"plain text"`},
	{`"data: {\"a\":1}\n\n"`, `"data: {\"a\":1}\n\n"`},
	{`"a\/b"`, `"a/b"`},
	{`"caf\u00e9 caf\u00E9 café"`, `"café café café"`},
	{`"\ud83d\ude00 \uD83D\uDE00 😀"`, `"😀 😀 😀"`},
	{`"\u0001\u001f\u001F\u0000\u007f"`, `"\u0001\u001f\u001f\u0000` + "\x7f" + `"`},
	{`"\u0008\u0009\u000a\u000c\u000d\b\t\n\f\r"`, `"\b\t\n\f\r\b\t\n\f\r"`},
	{`"\u0022\u005c\"\\"`, `"\"\\\"\\"`},
	{`"\u2028\u2029` + "\u2028" + `"`, `"` + "\u2028\u2029\u2028" + `"`},
	{`"bad \ufffd byte ` + "\ufffd" + `"`, `"bad ` + "\ufffd" + ` byte ` + "\ufffd" + `"`},
	{`"\\\/\\"`, `"\\/\\"`},
	{`"\u0041\u00e9\u4e2d\ud800\udc00"`, `"Aé中` + "\U00010000" + `"`},
	{`"ends in escape \n"`, `"ends in escape \n"`},
}

// TestAppendStringToken: a raw text token is written as our writer writes the decoded text,
// checked against hand-written output and against AppendString(jsonscan.Unquote(tok)), and never longer
// than the token (Merge sizes its output line by that).
func TestAppendStringToken(t *testing.T) {
	for _, c := range rawEscapes {
		if err := jsonscan.Validate([]byte(c.tok)); err != nil {
			t.Fatalf("%s: not valid JSON: %v", c.tok, err)
		}
		got := appendStringToken([]byte("x"), []byte(c.tok))
		if string(got) != "x"+c.want {
			t.Errorf("appendStringToken(%s) = %s, want %s", c.tok, got[1:], c.want)
		}
		if old := jsonscan.AppendString(nil, jsonscan.Unquote([]byte(c.tok))); !bytes.Equal(got[1:], old) {
			t.Errorf("appendStringToken(%s) = %s, AppendString(unquote) = %s", c.tok, got[1:], old)
		}
		if len(got)-1 > len(c.tok) {
			t.Errorf("appendStringToken(%s) wrote %d bytes, more than the token's %d", c.tok, len(got)-1, len(c.tok))
		}
	}
}

// FuzzAppendStringToken: for every valid JSON string token, appendStringToken writes what
// AppendString writes for its decoded text, and no more bytes than the token.
func FuzzAppendStringToken(f *testing.F) {
	for _, c := range rawEscapes {
		f.Add(c.tok[1 : len(c.tok)-1])
	}
	f.Fuzz(func(t *testing.T, body string) {
		tok := []byte(`"` + body + `"`)
		if jsonscan.Validate(tok) != nil {
			return
		}
		got := appendStringToken(nil, tok)
		if want := jsonscan.AppendString(nil, jsonscan.Unquote(tok)); !bytes.Equal(got, want) {
			t.Fatalf("appendStringToken(%s) = %s, want %s", tok, got, want)
		}
		if len(got) > len(tok) {
			t.Fatalf("appendStringToken(%s) wrote %d bytes, more than %d", tok, len(got), len(tok))
		}
	})
}
