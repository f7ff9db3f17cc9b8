package gateway_test

import (
	"net/http"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestCompletionsCalls: a /v1/completions call, JSON and SSE, is captured as dialect completions,
// a stream's line holding the rebuilt text_completion and its record the text's usage and finish
// reason.
func TestCompletionsCalls(t *testing.T) {
	stream := "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"Hel\",\"logprobs\":null,\"finish_reason\":null}]}\n\n" +
		"data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"lo\",\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n" +
		"data: [DONE]\n\n"
	json := `{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"Hello","logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
	for _, tc := range []struct {
		name, ctype, body string
	}{
		{"json", "application/json", json},
		{"sse", "text/event-stream", stream},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, capturetest.Replay(http.StatusOK, tc.ctype, []byte(tc.body)))
			resp, got := e.post("k-1", "/v1/completions", `{"model":"m","prompt":[1,2,3],"stream":`+map[string]string{"json": "false", "sse": "true"}[tc.name]+`}`, nil)
			if resp.StatusCode != 200 || string(got) != tc.body {
				t.Fatalf("client got %d, %q", resp.StatusCode, got)
			}
			l := e.one("k-1")
			if l.Dialect != "completions" || l.Category() != "<null>" {
				t.Fatalf("dialect %s, category %s", l.Dialect, l.Category())
			}
			if string(l.Response) != json {
				t.Errorf("response\n%s\nwant\n%s", l.Response, json)
			}
			r := l.Record
			if r == nil || r.FinishReason == nil || *r.FinishReason != "stop" || r.TokensIn == nil || *r.TokensIn != 3 || r.TokensOut == nil || *r.TokensOut != 2 || r.Model == nil || *r.Model != "m" {
				t.Errorf("record %+v", r)
			}
		})
	}
}
