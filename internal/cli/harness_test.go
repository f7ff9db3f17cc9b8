package cli

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestStripJSONC(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a": 1}`, `{"a":1}`},
		{"{\n // a comment\n \"a\": \"x // not a comment\", /* block */ \"b\": [1, 2,],\n}", `{"a":"x // not a comment","b":[1,2]}`},
		{`{"a": "q\"/*x*/", "b": 1}`, `{"a":"q\"/*x*/","b":1}`},
		{"{\"a\": 1 /* unterminated", `{"a":1`},
	} {
		got := stripJSONC([]byte(tc.in))
		var buf bytes.Buffer
		if err := json.Compact(&buf, got); err != nil {
			if tc.want != `{"a":1` {
				t.Errorf("%q: %q is not JSON: %v", tc.in, got, err)
			}
			continue
		}
		if buf.String() != tc.want {
			t.Errorf("%q: %s, want %s", tc.in, buf.String(), tc.want)
		}
	}
}

// FuzzStripJSONC: JSON without comments passes through stripJSONC unchanged in meaning.
func FuzzStripJSONC(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":"// x","b":[1,{"c":"/*"}]}`, `["a,]", 1]`, `"\\\"//"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		var want, got bytes.Buffer
		json.Compact(&want, b)
		if err := json.Compact(&got, stripJSONC(b)); err != nil || got.String() != want.String() {
			t.Fatalf("%q -> %q (%v)", b, stripJSONC(b), err)
		}
	})
}
