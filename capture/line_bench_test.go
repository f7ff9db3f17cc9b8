package capture

import (
	"encoding/json"
	"os"
	"testing"
)

// BenchmarkLine is the per-line JSON work of a captured non-streamed call: the gateway's one
// IsPayloadObject check of request and response, then the encoding of a line whose response is
// pretty-printed (as many servers send it), without a second check (PayloadsChecked).
func BenchmarkLine(b *testing.B) {
	resp, err := os.ReadFile("../testdata/fixtures/openai_chat/json_text_usage_details.json")
	if err != nil {
		b.Fatal(err)
	}
	req := json.RawMessage(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if !IsPayloadObject(req) || !IsPayloadObject(resp) {
			b.Fatal("not a payload")
		}
		if _, err := EncodeExchange(&Exchange{ModelCallID: "x", Dialect: "chat", Request: req, Response: resp, PayloadsChecked: true}); err != nil {
			b.Fatal(err)
		}
	}
}
