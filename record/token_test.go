package record

import (
	"bytes"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// TestAppendStringToken: a raw text token is written as our writer writes the decoded text,
// checked against hand-written output and against AppendString(jsonscan.Unquote(tok)), and never longer
// than the token (Merge sizes its output line by that).
func TestAppendStringToken(t *testing.T) {
	for _, c := range capturefile.RawEscapes {
		if err := jsonscan.Validate([]byte(c.Tok)); err != nil {
			t.Fatalf("%s: not valid JSON: %v", c.Tok, err)
		}
		got := appendStringToken([]byte("x"), []byte(c.Tok))
		if string(got) != "x"+c.Want {
			t.Errorf("appendStringToken(%s) = %s, want %s", c.Tok, got[1:], c.Want)
		}
		if old := jsonscan.AppendString(nil, jsonscan.Unquote([]byte(c.Tok))); !bytes.Equal(got[1:], old) {
			t.Errorf("appendStringToken(%s) = %s, AppendString(unquote) = %s", c.Tok, got[1:], old)
		}
		if len(got)-1 > len(c.Tok) {
			t.Errorf("appendStringToken(%s) wrote %d bytes, more than the token's %d", c.Tok, len(got)-1, len(c.Tok))
		}
	}
}

// FuzzAppendStringToken: for every valid JSON string token, appendStringToken writes what
// AppendString writes for its decoded text, and no more bytes than the token.
func FuzzAppendStringToken(f *testing.F) {
	for _, c := range capturefile.RawEscapes {
		f.Add(c.Tok[1 : len(c.Tok)-1])
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
