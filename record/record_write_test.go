package record

import (
	"bytes"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// TestWriteJSONMatchesAppendJSON: WriteJSON writes the very bytes AppendJSON builds, with and
// without payloads, for records whose payload strings span many 64 KiB pieces and hold multi-byte
// characters, and control characters at piece boundaries.
func TestWriteJSONMatchesAppendJSON(t *testing.T) {
	long := strings.Repeat("é✓\n\x01\"\\", 40000) + strings.Repeat("x", 65535) + "€"
	lines := []string{
		`{"model_call_id":"a","dialect":"chat","status_code":200,"request":{"model":"m"},"response":{"choices":[{"index":0,"message":{"role":"assistant","content":"hi","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"tool_calls\":1}"}}]}}]},"request_raw":null}`,
		`{"model_call_id":"b","dialect":"messages","request":null,"response":null,"response_raw":` + string(mustJSONString(long)) + `,"request_raw":"plain"}`,
		`{"model_call_id":"c","dialect":"responses","request":{"a":[1,2]},"response":{"output":[]}}`,
	}
	// Tokens written by other encoders (\/, \u00e9, escaped surrogate pairs) are rewritten in
	// AppendString's form; shifted by 0 to 22 bytes, the 64 KiB piece boundaries fall on every
	// byte of the 23-byte unit, a surrogate pair's two halves among them.
	for k := range 23 {
		unit := `a\/\u00e9\ud83d\ude00\"`
		lines = append(lines, `{"model_call_id":"d","request_raw":"`+strings.Repeat("x", k)+strings.Repeat(unit, 8000)+`"}`)
	}
	for i, l := range lines {
		r, err := BuildRecord([]byte(l), i)
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		for _, raw := range []RawText{r.RequestRaw, r.ResponseRaw} {
			if raw != nil && !bytes.Equal(raw.appendJSON(nil), jsonscan.AppendString(nil, raw.Text())) {
				t.Fatalf("line %d: raw text not written as AppendString writes its text", i)
			}
		}
		for _, payloads := range []bool{false, true} {
			want := r.AppendJSON(nil, payloads)
			var got bytes.Buffer
			if err := r.WriteJSON(&got, payloads); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("line %d payloads %v: WriteJSON differs from AppendJSON (%d vs %d bytes)", i, payloads, got.Len(), len(want))
			}
		}
	}
}

func mustJSONString(s string) []byte {
	var b []byte
	b = append(b, '"')
	for _, c := range []byte(s) {
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
