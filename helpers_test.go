package modelcalls

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

// Test helpers shared by the package's tests.

// ptr returns a pointer to v (for expected values in tables).
func ptr[T any](v T) *T { return &v }

// compactJSON returns the compact form of a JSON text, failing the test when it is not JSON.
func compactJSON(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact: %v", err)
	}
	return buf.Bytes()
}

// exchangeLine encodes a capture line the way the gateway writes it (capture.EncodeExchange).
func exchangeLine(t testing.TB, ex capture.Exchange) []byte {
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

// writeCapture writes a capture file for rollout id in dir with exactly the given content.
func writeCapture(t testing.TB, dir, id, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, id+capture.CaptureSuffix), []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
}

// openStore opens (creating) the store of dir.
func openStore(t testing.TB, dir string) *capture.Store {
	t.Helper()
	s, err := capture.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// claimCall claims call of rollout id in s (a live claim until released), failing the test if it
// cannot.
func claimCall(t testing.TB, s *capture.Store, id, call string) *capture.Claim {
	t.Helper()
	c, err := s.Claim(id, call)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// decodeObject decodes a JSON object keeping numbers as json.Number.
func decodeObject(t testing.TB, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return m
}

// jsonOf renders v compactly for messages and comparisons.
func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

// readLines returns the non-empty lines of a file.
func readLines(t testing.TB, path string) [][]byte {
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

func strOrNil(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", *p)
}

// Lines for hand-built capture files: okLine is a good exchange (ok fills its model_call_id and
// prompt tokens), badModelRef one whose record cannot be built.
const (
	okLine      = `{"model_call_id":"%s","dialect":"chat","model_ref":{"type":"responses_api_models","name":"p"},"started_at":1.0,"completed_at":2.0,"latency_ms":%s,"latency_ttft_ms":null,"status_code":200,"error_category":null,"request":{"model":"m"},"response":{"usage":{"prompt_tokens":%d,"completion_tokens":1}}}`
	badModelRef = `{"model_call_id":"bad-ref","dialect":"chat","model_ref":{"type":"agents","name":"p"},"status_code":200}`
)

func ok(id string, tokens int) string { return fmt.Sprintf(okLine, id, "1.5", tokens) }

// payloadFields are the JSON names of the four payload fields a merge writes only with payloads.
var payloadFields = [...]string{"request", "response", "request_raw", "response_raw"}
