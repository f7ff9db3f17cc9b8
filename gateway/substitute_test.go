package gateway_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestSubstitutedAnswersAreRecorded: every answer the gateway gives a captured call in place of the
// upstream's is the answer its line records: the status the client got, response_source local, the
// local reason and the error category (the status's, or connection when the upstream could not be
// reached), with the upstream's own status beside them when it sent one the gateway does not relay.
func TestSubstitutedAnswersAreRecorded(t *testing.T) {
	switching := func(head string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			brw.WriteString(head)
			brw.Flush()
			brw.ReadString('\n') // hold the switched connection until the gateway lets go
		}
	}
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	for _, tc := range []struct {
		name      string
		upstream  http.HandlerFunc
		configure func(*gateway.Handler)
		send      func(t *testing.T, e *env) int // the status the client got
		status    int
		reason    string
		attempted bool
		upCode    int    // the upstream's status in upstream_status_code; 0: none
		category  string // "": the status's category
	}{
		{name: "101 switching to websocket", upstream: switching("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"),
			status: 502, reason: gateway.ReasonUpstreamBadStatus, attempted: true, upCode: 101},
		{name: "101 without an upgrade", upstream: switching("HTTP/1.1 101 Switching Protocols\r\n\r\n"),
			status: 502, reason: gateway.ReasonUpstreamBadStatus, attempted: true, upCode: 101},
		{name: "upstream down", configure: func(h *gateway.Handler) { h.Upstream, _ = url.Parse("http://" + capturetest.ClosedAddr(t)) },
			status: 502, reason: gateway.ReasonUpstreamUnreachable, attempted: true, category: capture.CategoryConnection},
		{name: "upstream timeout", upstream: func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-stuck:
			case <-r.Context().Done():
			}
		}, configure: func(h *gateway.Handler) { h.UpstreamTimeout = 50 * time.Millisecond },
			status: 504, reason: gateway.ReasonUpstreamTimeout, attempted: true},
		{name: "request too large", configure: func(h *gateway.Handler) { h.MaxRequestBytes = 4 },
			status: 413, reason: gateway.ReasonRequestTooLarge},
		{name: "shutting down", configure: func(h *gateway.Handler) { h.BeginShutdown() },
			status: 503, reason: gateway.ReasonShuttingDown},
		{name: "request body stalls", configure: func(h *gateway.Handler) { h.RequestBodyTimeout = 50 * time.Millisecond },
			send: stalledBody, status: 408, reason: gateway.ReasonRequestTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := tc.upstream
			if up == nil {
				up = capturetest.Replay(200, "application/json", []byte(`{"id":"c"}`))
			}
			var configure []func(*gateway.Handler)
			if tc.configure != nil {
				configure = append(configure, tc.configure)
			}
			e := newEnv(t, up, configure...)
			got := 0
			if tc.send != nil {
				got = tc.send(t, e)
			} else {
				resp, _ := e.post("sub-1", "/v1/chat/completions", `{"model":"m","messages":[]}`, nil)
				got = resp.StatusCode
			}
			if got != tc.status {
				t.Fatalf("client got %d, want %d", got, tc.status)
			}
			ls := capturetest.Lines(t, e.store, "sub-1")
			if len(ls) != 1 {
				t.Fatalf("%d lines, want 1", len(ls))
			}
			l := ls[0]
			category := tc.category
			if category == "" {
				category = capture.StatusCategory(tc.status)
			}
			if deref(l.StatusCode) != tc.status || l.Category() != category ||
				deref(l.ResponseSource) != "local" || deref(l.LocalResponseReason) != tc.reason || deref(l.UpstreamAttempted) != tc.attempted {
				t.Errorf("line: status %v category %s source %v reason %v attempted %v; want %d %s local %s %v",
					deref(l.StatusCode), l.Category(), deref(l.ResponseSource), deref(l.LocalResponseReason), deref(l.UpstreamAttempted),
					tc.status, category, tc.reason, tc.attempted)
			}
			if tc.upCode != 0 && deref(l.UpstreamStatusCode) != tc.upCode {
				t.Errorf("upstream_status_code %v, want %d", deref(l.UpstreamStatusCode), tc.upCode)
			}
			if tc.upCode == 0 && l.UpstreamStatusCode != nil {
				t.Errorf("upstream_status_code %v, want none", *l.UpstreamStatusCode)
			}
		})
	}
}

// stalledBody sends 10 of 1000 announced body bytes and waits for the answer.
func stalledBody(t *testing.T, e *env) int {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.gw.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /ng-rollout/sub-1/v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":")
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	res.Body.Close()
	e.drain()
	return res.StatusCode
}
