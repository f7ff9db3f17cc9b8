package replay

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
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
	front := capturetest.NewServer(t, rc.ServeHTTP)
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

// TestProxyInFront: a modelcalls proxy (gateway) in front of a replay strips the rollout prefix,
// so the replay answers 404 replay_not_recorded naming that cause, and the gateway's warning says
// the upstream is a replay; with --upstream at the replay's /ng-rollout/<id> the same call is
// answered from the recording and captured.
func TestProxyInFront(t *testing.T) {
	cases := recordedCases(t)
	src, _ := record(t, "r1", cases)
	rp := newReplay(t, &Server{Source: src, Timing: Timing{Fast: true}})
	c := cases[0]

	gwLogs := &capturetest.Buffer{}
	front := func(upstream string) string {
		u, _ := url.Parse(upstream)
		gw := &gateway.Handler{Upstream: u, Store: capturetest.NewStore(t), Logger: capturetest.Logger(gwLogs)}
		return capturetest.NewServer(t, gw.ServeHTTP).URL
	}
	status, _, b := post(t, front(rp), "/ng-rollout/r1"+c.path, c.request)
	if status != http.StatusNotFound || !bytes.Contains(b, []byte("no /ng-rollout/<id>/ prefix")) ||
		!bytes.Contains(b, []byte("replay --capture-dir-out DIR2")) {
		t.Errorf("through a proxy: %d %s", status, b)
	}
	logs := gwLogs.String()
	if !strings.Contains(logs, "kind=upstream_404") || !strings.Contains(logs, "the upstream is a modelcalls replay") ||
		strings.Contains(logs, "model server's base URL") {
		t.Errorf("gateway warning:\n%s", logs)
	}

	status, hdr, b := post(t, front(rp+"/ng-rollout/r1"), "/ng-rollout/r1"+c.path, c.request)
	if status != http.StatusOK || hdr.Get("x-nemo-gym-local-response-reason") != ReasonReplay {
		t.Errorf("proxy with --upstream REPLAY/ng-rollout/r1: %d %q %s", status, hdr.Get("x-nemo-gym-local-response-reason"), b)
	}
}
