package gateway_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// OnCaptured sees every captured call once, after its line is durable (the line is already in the
// file when the callback runs), with the client's traceparent; a failed upstream call is captured
// and handed over too, an uncaptured request is not.
func TestOnCaptured(t *testing.T) {
	var mu sync.Mutex
	var got []gateway.CapturedCall
	var inFile []int
	var e *env
	e = newEnv(t, capturetest.Replay(http.StatusOK, "application/json", []byte(`{"id":"c1","model":"m","choices":[]}`)), func(h *gateway.Handler) {
		h.OnCaptured = func(c gateway.CapturedCall) {
			n := len(e.lines(c.RolloutID))
			mu.Lock()
			got = append(got, c)
			inFile = append(inFile, n)
			mu.Unlock()
		}
	})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	resp, _ := e.post("r1", "/v1/chat/completions", `{"model":"m","messages":[]}`, map[string]string{"traceparent": tp})
	e.post("r1", "/v1/chat/completions", `{"model":"m","messages":[]}`, nil)
	e.post("", "/v1/chat/completions", `{"model":"m"}`, nil) // unprefixed: not captured
	e.drain()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("OnCaptured called %d times, want 2", len(got))
	}
	if got[0].Traceparent != tp || got[1].Traceparent != "" {
		t.Errorf("traceparents %q, %q", got[0].Traceparent, got[1].Traceparent)
	}
	if id := resp.Header.Get("x-nemo-gym-model-call-id"); got[0].Exchange.ModelCallID != id || got[0].RolloutID != "r1" {
		t.Errorf("call %s in %s, want %s in r1", got[0].Exchange.ModelCallID, got[0].RolloutID, id)
	}
	if inFile[0] != 1 || inFile[1] != 2 {
		t.Errorf("lines in the file when OnCaptured ran: %v, want [1 2]", inFile)
	}
	if !got[0].End.After(got[0].Start) {
		t.Errorf("start %v end %v", got[0].Start, got[0].End)
	}
}
