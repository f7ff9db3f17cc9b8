// Package capturefile holds the capture-file helpers the tests of the record package and of the
// root package (the merge) share: capture lines encoded as the gateway writes them, capture files
// written by hand or in bulk for benchmarks, the NeMo Gym fixture lines, and JSON string tokens
// full of escapes. It imports only capture and rollout, so the record package's own tests can use
// it (capturetest imports record and cannot be imported by them).
//
// It is imported by tests only, never by product code.
package capturefile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/rollout"
)

// CompactJSON returns the compact form of a JSON text, failing the test when it is not JSON.
func CompactJSON(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact: %v", err)
	}
	return buf.Bytes()
}

// ExchangeLine encodes a capture line the way the gateway writes it (capture.EncodeExchange),
// filling a fresh model_call_id, dialect chat, the policy model ref and fixed times when unset.
func ExchangeLine(t testing.TB, ex capture.Exchange) []byte {
	t.Helper()
	if ex.ModelCallID == "" {
		ex.ModelCallID = capture.NewModelCallID()
	}
	if ex.Dialect == "" {
		ex.Dialect = "chat"
	}
	if ex.ModelRef == nil {
		ex.ModelRef = &rollout.ModelServerRef{Type: rollout.ModelServerRefType, Name: "policy_model"}
	}
	if ex.StartedAt == 0 {
		ex.StartedAt, ex.CompletedAt, ex.LatencyMS = 1795968571.5, 1795968572.25, 750
	}
	b, err := capture.EncodeExchange(&ex)
	if err != nil {
		t.Fatalf("encode exchange: %v", err)
	}
	return b
}

// WriteCapture writes a capture file for rollout id in dir with exactly the given content.
func WriteCapture(t testing.TB, dir, id, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, id+capture.CaptureSuffix), []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
}

// OpenStore opens (creating) the store of dir.
func OpenStore(t testing.TB, dir string) *capture.Store {
	t.Helper()
	s, err := capture.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ClaimCall claims call of rollout id in s (a live claim until released), failing the test if it
// cannot.
func ClaimCall(t testing.TB, s *capture.Store, id, call string) *capture.Claim {
	t.Helper()
	c, err := s.Claim(id, call)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// JSONOf renders v compactly for messages and comparisons.
func JSONOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

// ReadLines returns the non-empty lines of a file.
func ReadLines(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// StrOrNil renders a *string for messages: "<nil>" or the quoted string.
func StrOrNil(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", *p)
}

// GymLines returns every line of the Gym-written capture dir (seeds and benchmark material);
// testdata is the path of the repository's top-level testdata directory from the test's package.
func GymLines(t testing.TB, testdata string) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdata, "gym-capture/capture/*.capture.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("gym capture files: %v", err)
	}
	var lines [][]byte
	for _, f := range files {
		lines = append(lines, ReadLines(t, f)...)
	}
	return lines
}

// WriteBenchCapture writes rollouts capture files of callsPer lines each into dir, cycling through
// pool with a fresh 32-hex model_call_id per line, and returns the rollout records (JSONL lines in
// Gym's style, rollout r being task r/100, rollout index r%100) and the total capture bytes.
func WriteBenchCapture(b testing.TB, dir string, pool [][]byte, rollouts, callsPer int) ([][]byte, int64) {
	b.Helper()
	var total int64
	records := make([][]byte, rollouts)
	var buf bytes.Buffer
	n := 0
	for r := range rollouts {
		buf.Reset()
		for range callsPer {
			line := bytes.Clone(pool[n%len(pool)])
			if i := bytes.Index(line, []byte(`"model_call_id":"`)); i >= 0 && len(line) > i+17+32 {
				copy(line[i+17:], fmt.Sprintf("%032x", n))
			}
			n++
			buf.Write(line)
			buf.WriteByte('\n')
		}
		id := fmt.Sprintf("%d-%d", r/100, r%100)
		if err := os.WriteFile(filepath.Join(dir, id+capture.CaptureSuffix), buf.Bytes(), 0o640); err != nil {
			b.Fatal(err)
		}
		total += int64(buf.Len())
		records[r] = fmt.Appendf(nil, `{"_ng_task_index": %d, "_ng_rollout_index": %d, "responses_create_params": {"input": "task %d"}, "reward": 1.0}`, r/100, r%100, r)
	}
	return records, total
}

// RawEscapes are JSON string tokens of request_raw/response_raw values as writers other than ours
// may put them in a line (Tok), with the token our writer writes for the decoded text (Want):
// escapes our writer never produces next to the ones it does, and the characters it writes as
// they are (é, U+2028, a U+FFFD that replaced invalid UTF-8).
var RawEscapes = []struct{ Tok, Want string }{
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

// DecodeObject decodes a JSON object keeping numbers as json.Number, failing the test (with the
// text's first 200 bytes) when it is not one.
func DecodeObject(t testing.TB, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		shown := b
		if len(shown) > 200 {
			shown = append(shown[:200:200], "..."...)
		}
		t.Fatalf("decode %s: %v", shown, err)
	}
	return m
}
