package gateway_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/dialect"
)

// TestStreamOverElementLimit: a Chat stream whose one event carries more tool-call deltas (with
// distinct indexes) than the reassembly's dialect.MaxElements reaches the client byte-identical;
// its line says capture_too_large, keeps the whole body as response_raw and the reconstruction of
// what the limit kept (the deltas within it, the finish reason and usage of the later chunk).
func TestStreamOverElementLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString(`data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[`)
	for i := range dialect.MaxElements + 10 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"index":%d,"id":"c%d","function":{"name":"f","arguments":"{}"}}`, i, i)
	}
	b.WriteString("]}}]}\n\n")
	b.WriteString(`data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"total_tokens":3}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	sent := []byte(b.String())
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(sent)
	})
	resp, got := e.post("elements", "/v1/chat/completions", `{"model":"m","stream":true}`, nil)
	if resp.StatusCode != 200 || !bytes.Equal(got, sent) {
		t.Fatalf("client got %d and %d bytes; want 200 and the %d bytes as sent", resp.StatusCode, len(got), len(sent))
	}
	l := e.one("elements")
	if l.Category() != "capture_too_large" || l.ResponseRaw == nil || *l.ResponseRaw != string(sent) {
		t.Fatalf("category %s, response_raw %d bytes; want capture_too_large and the whole body", l.Category(), len(deref(l.ResponseRaw).(string)))
	}
	if n := bytes.Count(l.Response, []byte(`"type":"function"`)); n != dialect.MaxElements-1 {
		t.Errorf("%d tool calls reconstructed, want %d (the limit less the choice)", n, dialect.MaxElements-1)
	}
	if !bytes.Contains(l.Response, []byte(`"finish_reason":"tool_calls"`)) || !bytes.Contains(l.Response, []byte(`"usage":{"total_tokens":3}`)) {
		t.Errorf("the chunk after the limit is missing from the reconstruction: %.200s", l.Response[max(0, len(l.Response)-200):])
	}
	if !strings.Contains(e.logs.String(), "stream reassembly over its limits") {
		t.Errorf("no warning logged:\n%s", e.logs.String())
	}
}
