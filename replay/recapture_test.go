package replay

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestRecapture: a replay with a capture dir out is captured by the gateway like any run: one
// line per call, the same body bytes as the original capture, provenance local / replay, and a
// miss captured as local / replay_miss.
func TestRecapture(t *testing.T) {
	cases := recordedCases(t)
	src, _ := record(t, "r1", cases)
	out, err := capture.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Source: src, Timing: Timing{Fast: true}, Logger: capturetest.QuietLogger()}
	rc, err := NewRecapture(s, out, "policy", capturetest.QuietLogger())
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(rc)
	for _, c := range cases {
		post(t, front.URL, "/ng-rollout/r1"+c.path, c.request)
	}
	status, hdr, _ := post(t, front.URL, "/ng-rollout/r1/v1/chat/completions", `{"model":"m","messages":[]}`)
	if status != MissStatus {
		t.Errorf("miss through the re-capture: status %d", status)
	}
	missID := hdr.Get("x-nemo-gym-model-call-id")
	front.Close()
	if err := rc.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}

	orig, re := capturetest.Lines(t, src, "r1"), capturetest.Lines(t, out, "r1")
	if len(re) != len(cases)+1 {
		t.Fatalf("re-capture has %d lines, want %d", len(re), len(cases)+1)
	}
	for i := range cases {
		if !bytes.Equal(re[i].Body(), orig[i].Body()) {
			t.Errorf("call %d: re-captured body differs from the original capture", i)
		}
		for k, want := range map[string]any{"response_source": "local", "upstream_attempted": false,
			"local_response_reason": "replay", "status_code": orNil(orig[i].StatusCode), "error_category": orNil(orig[i].ErrorCategory),
			"dialect": orig[i].Dialect} {
			got := map[string]any{"response_source": orNil(re[i].ResponseSource), "upstream_attempted": orNil(re[i].UpstreamAttempted),
				"local_response_reason": orNil(re[i].LocalResponseReason), "status_code": orNil(re[i].StatusCode),
				"error_category": orNil(re[i].ErrorCategory), "dialect": re[i].Dialect}[k]
			if got != want {
				t.Errorf("call %d: %s = %v, want %v", i, k, got, want)
			}
		}
		if re[i].ModelCallID == orig[i].ModelCallID {
			t.Errorf("call %d: the re-capture reuses the original model_call_id", i)
		}
	}
	miss := re[len(cases)]
	if orNil(miss.LocalResponseReason) != "replay_miss" || miss.ModelCallID != missID ||
		!strings.Contains(string(miss.Body()), "first difference at $.messages") {
		t.Errorf("miss line: %s", miss.Data)
	}
}
