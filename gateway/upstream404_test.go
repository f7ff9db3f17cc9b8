package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestUpstream404Warning: an upstream 404 on a captured call is named once; when the upstream is a
// modelcalls replay (its answer declares local_response_reason replay_not_recorded) the warning
// names the stripped rollout prefix and the wirings that work, not the base URL.
func TestUpstream404Warning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason string // x-nemo-gym-local-response-reason of the 404, "" for none
		want   []string
		not    []string
	}{
		{"model server", "", []string{"check that --upstream is the model server's base URL"}, []string{"replay"}},
		{"replay", "replay_not_recorded", []string{"the upstream is a modelcalls replay", "strips the /ng-rollout/<id> prefix",
			"modelcalls replay --capture-dir-out DIR2", "/ng-rollout/r1"}, []string{"model server's base URL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.reason != "" {
					w.Header().Set("x-nemo-gym-response-source", "local")
					w.Header().Set("x-nemo-gym-local-response-reason", tc.reason)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				w.Write([]byte(`{"error":{"message":"not here","type":"invalid_request_error","code":"x"}}`))
			})
			for range 2 {
				if res, _ := e.post("r1", "/v1/chat/completions", `{"model":"m","messages":[]}`, nil); res.StatusCode != http.StatusNotFound {
					t.Fatalf("status %d", res.StatusCode)
				}
			}
			e.drain()
			logs := e.logs.String()
			if n := strings.Count(logs, "kind=upstream_404"); n != 1 {
				t.Fatalf("%d upstream_404 warnings, want 1:\n%s", n, logs)
			}
			for _, w := range tc.want {
				if !strings.Contains(logs, w) {
					t.Errorf("warning lacks %q:\n%s", w, logs)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(logs, w) {
					t.Errorf("warning has %q:\n%s", w, logs)
				}
			}
		})
	}
}
