package e2e

import (
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestObserve checks the test-side usage reading on recorded provider bodies (the repository's
// fixture set, testdata/fixtures at the root), against the key values their recordings hold.
func TestObserve(t *testing.T) {
	n := func(i int) *int { return &i }
	tests := []struct {
		file, dialect, id string
		in, out, total    int
		cached            *int
	}{
		{"openai_chat/stream_tool_call_usage_only_chunk.sse", DialectChat, "chatcmpl-ABfw8AOXnoa2kzy11vVTSjuQhHCQr", 76, 24, 100, nil},
		{"openai_chat/json_text_usage_details.json", DialectChat, "chatcmpl-D8Z5f52zQqikDBEKQMQoYcWMcWPeU", 16, 363, 379, n(0)},
		{"openai_responses/stream_reasoning_function_call.sse", DialectResponses, "resp_0050471a34b36ae60068c97b94a480819587a9d70cf2979b33", 53, 469, 522, n(0)},
		{"anthropic_messages/stream_message_delta_cumulative_cache.sse", DialectMessages, "msg_011CdYfpjpVtBoXyXCQD1tQP", 9632, 198, 9830, n(6289)},
		{"anthropic_messages/stream_message_delta_input_tokens_differs.sse", DialectMessages, "msg_3196a1cc08de4d76b85b8f5777c0d42b", 61, 2, 63, nil},
		{"anthropic_messages/json_cache_read_and_creation.json", DialectMessages, "msg_01KPaKTJSqAKoZri7Ujrny58", 1532, 33, 1565, n(1111)},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			body := capturetest.Fixture(t, tc.file)
			o := Observe(tc.dialect, body)
			eq := func(p *int, v int) bool { return p != nil && *p == v }
			if !eq(o.TokensIn, tc.in) || !eq(o.TokensOut, tc.out) || !eq(o.TokensAll, tc.total) {
				t.Fatalf("Observe = %s; want in %d out %d total %d", describe(o), tc.in, tc.out, tc.total)
			}
			if (o.Cached == nil) != (tc.cached == nil) || (o.Cached != nil && *o.Cached != *tc.cached) {
				t.Fatalf("cached = %s; want %v", describe(o), tc.cached)
			}
			if o.ResponseID == nil || *o.ResponseID != tc.id {
				t.Fatalf("id = %v; want %s", o.ResponseID, tc.id)
			}
		})
	}
}
