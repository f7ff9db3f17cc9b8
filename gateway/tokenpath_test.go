package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestTrainingTokenCapturePath: NeMo Gym's token-id capture URL,
// /ng-rollout/<id>/training-token-capture/v1/..., is captured under <id> and forwarded with the
// prefix and that segment stripped, as NeMo Gym routes it; nothing is logged as a routing mistake.
func TestTrainingTokenCapturePath(t *testing.T) {
	var gotPath string
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.Path
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop","token_ids":[1,2]}],"prompt_token_ids":[5,6,7]}`)
	})
	resp, _ := e.post("r1", "/training-token-capture/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("x-nemo-gym-model-call-id") == "" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	if gotPath != "/v1/chat/completions" {
		t.Errorf("upstream got %q, want /v1/chat/completions", gotPath)
	}
	e.drain()
	l := e.one("r1")
	if l.Dialect != "chat" || string(l.Request) != `{"model":"m","messages":[{"role":"user","content":"hi"}]}` {
		t.Errorf("line %s", l.Data)
	}
	if logs := e.logs.String(); strings.Contains(logs, "prefixed_path") || strings.Contains(logs, "uncaptured") {
		t.Errorf("routing warning logged: %s", logs)
	}
}
