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

// BenchmarkLineStreamed encodes the line of a streamed call: a recorded 200-event SSE body as
// response_raw (most of the line, escaped into a JSON string).
func BenchmarkLineStreamed(b *testing.B) {
	raw, err := os.ReadFile("../testdata/fixtures/openai_chat/stream_tool_call_usage_only_chunk.sse")
	if err != nil {
		b.Fatal(err)
	}
	for len(raw) < 60<<10 {
		raw = append(raw, raw...)
	}
	s := string(raw[:60<<10])
	req := json.RawMessage(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeExchange(&Exchange{ModelCallID: "x", Dialect: "chat", Request: req, ResponseRaw: &s, PayloadsChecked: true}); err != nil {
			b.Fatal(err)
		}
	}
}
