package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// FuzzBuildRecord: BuildRecord never panics; it succeeds only on strict-JSON objects, and what it
// builds always encodes to a JSON object with every field, tool-call arguments being objects.
func FuzzBuildRecord(f *testing.F) {
	for _, l := range capturefile.GymLines(f, "../testdata") {
		f.Add(l)
	}
	for _, l := range []string{`{}`, `[1]`, badModelRef, badPayload, nanLine, `{"response":{"output":[{"type":"function_call","arguments":"[1]"}]}}`,
		`{"response":{"content":[{"type":"tool_use","input":"{\"a\":1}"},{"type":"thinking","thinking":""}]}}`} {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := BuildRecord(data, 1)
		if err != nil {
			if !errors.Is(err, ErrInvalidExchange) {
				t.Fatalf("error %v does not wrap ErrInvalidExchange", err)
			}
			return
		}
		if !json.Valid(data) || !utf8.Valid(data) || !bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{")) {
			t.Fatalf("built a record from %q", data)
		}
		out := rec.AppendJSON(nil, true)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil || len(m) != 33 || bytes.ContainsAny(out, "\n\r") {
			t.Fatalf("record JSON %s: %v (%d keys)", out, err, len(m))
		}
		for _, tc := range rec.ToolCalls {
			if !jsonscan.IsObject(tc.Arguments) || !json.Valid(tc.Arguments) {
				t.Fatalf("arguments %s are not an object", tc.Arguments)
			}
		}
		// The raw texts are kept as tokens: they decode as encoding/json decodes them and are
		// written as AppendString writes the decoded text (in one piece and through WriteJSON).
		for _, raw := range []RawText{rec.RequestRaw, rec.ResponseRaw} {
			if raw == nil {
				continue
			}
			var want string
			if err := json.Unmarshal(raw, &want); err != nil || raw.Text() != want {
				t.Fatalf("raw text %s: Text() = %q, encoding/json %q, %v", raw, raw.Text(), want, err)
			}
			if got := raw.appendJSON(nil); !bytes.Equal(got, jsonscan.AppendString(nil, want)) {
				t.Fatalf("raw text %s written as %s, want %s", raw, got, jsonscan.AppendString(nil, want))
			}
		}
		var w bytes.Buffer
		if err := rec.WriteJSON(&w, true); err != nil || !bytes.Equal(w.Bytes(), out) {
			t.Fatalf("WriteJSON %s, AppendJSON %s (%v)", w.Bytes(), out, err)
		}
		// The same record comes out of the text walkers (no response index, usage and its
		// detail groups walked as text) and of the read path (strings sharing the line, written
		// without escaping those that lie in it).
		ex := jsonscan.TrimWS(data)
		var text ModelCallRecord
		if err := buildRecord(&text, ex, 1); err != nil {
			t.Fatalf("text walk: %v", err)
		}
		if got := text.AppendJSON(nil, true); !bytes.Equal(got, out) {
			t.Fatalf("text walk built\n%s\nthe index built\n%s", got, out)
		}
		sc := jsonscan.Scanner{Nested: "response"}
		members, err := sc.Members(ex, nil)
		var shared ModelCallRecord
		if err != nil || buildRecordMembers(&shared, ex, members, &sc, 1, true, nil) != nil {
			t.Fatalf("read path: %v", err)
		}
		if got := shared.appendJSON(nil, true, ex); !bytes.Equal(got, out) {
			t.Fatalf("read path wrote\n%s\nwant\n%s", got, out)
		}
	})
}
