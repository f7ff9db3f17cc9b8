package replay

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
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
	s := &Server{Source: src, Timing: Timing{Fast: true}, Logger: quietLog()}
	rc, err := NewRecapture(s, out, "policy", quietLog())
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

	orig, re := lines(t, src, "r1"), lines(t, out, "r1")
	if len(re) != len(cases)+1 {
		t.Fatalf("re-capture has %d lines, want %d", len(re), len(cases)+1)
	}
	for i := range cases {
		if !bytes.Equal(recordedBody(t, re[i]), recordedBody(t, orig[i])) {
			t.Errorf("call %d: re-captured body differs from the original capture", i)
		}
		for k, want := range map[string]any{"response_source": "local", "upstream_attempted": false,
			"local_response_reason": "replay", "status_code": orig[i]["status_code"], "error_category": orig[i]["error_category"],
			"dialect": orig[i]["dialect"]} {
			if re[i][k] != want {
				t.Errorf("call %d: %s = %v, want %v", i, k, re[i][k], want)
			}
		}
		if re[i]["model_call_id"] == orig[i]["model_call_id"] {
			t.Errorf("call %d: the re-capture reuses the original model_call_id", i)
		}
	}
	miss := re[len(cases)]
	if miss["local_response_reason"] != "replay_miss" || miss["model_call_id"] != missID ||
		!strings.Contains(string(recordedBody(t, miss)), "first difference at $.messages") {
		t.Errorf("miss line: %v", miss)
	}
}
