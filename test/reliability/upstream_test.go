//go:build unix

package reliability

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// Item 5: upstream faults. Whatever the upstream does (refuses, resets mid-stream, stalls, speaks
// garbage, answers HTML, breaks its chunked encoding), the client gets what the upstream sent or a
// clear dialect-shaped local error, and the capture line says what happened.

// lineWant is what a capture line must say; zero values mean null (or absent).
type lineWant struct {
	status         int
	category       string
	source         string
	attempted      string // "true", "false", "" for null
	upstreamStatus int
	reason         string
	raw            *string // response_raw exactly; nil: absent
	response       bool    // response is an object (not null)
}

func checkLine(t *testing.T, x *capturetest.Line, w lineWant) {
	t.Helper()
	attempted := ""
	if x.UpstreamAttempted != nil {
		attempted = fmt.Sprint(*x.UpstreamAttempted)
	}
	wantStatus, wantUp := "<nil>", "<nil>"
	if w.status != 0 {
		wantStatus = fmt.Sprint(w.status)
	}
	if w.upstreamStatus != 0 {
		wantUp = fmt.Sprint(w.upstreamStatus)
	}
	got := fmt.Sprintf("status %s category %q source %q attempted %q upstream_status %s reason %q",
		num(x.StatusCode), str(x.ErrorCategory), str(x.ResponseSource), attempted, num(x.UpstreamStatusCode), str(x.LocalResponseReason))
	want := fmt.Sprintf("status %s category %q source %q attempted %q upstream_status %s reason %q",
		wantStatus, orNil(w.category), orNil(w.source), w.attempted, wantUp, orNil(w.reason))
	if got != want {
		t.Errorf("capture line:\n got %s\nwant %s", got, want)
	}
	if w.raw == nil && x.ResponseRaw != nil {
		t.Errorf("response_raw %q, want none", *x.ResponseRaw)
	}
	if w.raw != nil && (x.ResponseRaw == nil || *x.ResponseRaw != *w.raw) {
		t.Errorf("response_raw %q, want %q", str(x.ResponseRaw), *w.raw)
	}
	isObj := len(x.Response) > 0 && x.Response[0] == '{'
	if isObj != w.response {
		t.Errorf("response %s, want an object: %v", x.Response, w.response)
	}
}

func orNil(s string) string {
	if s == "" {
		return "<nil>"
	}
	return s
}

func ptrTo[T any](v T) *T { return &v }

// hijacked starts an upstream that takes over the connection of each request and runs fn on it
// with the request read.
func hijacked(t *testing.T, fn func(c net.Conn, rw *bufio.ReadWriter)) string {
	t.Helper()
	srv := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		fn(c, rw)
	})
	return srv.URL
}

// chunk encodes b as one HTTP/1.1 chunk.
func chunk(b []byte) string { return fmt.Sprintf("%x\r\n%s\r\n", len(b), b) }

// localError checks a local answer: the status, a dialect-shaped JSON error naming reason, and the
// model call id header matching the line.
func localError(t *testing.T, status int, hdr http.Header, body []byte, wantStatus int, reason string, x *capturetest.Line) {
	t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if status != wantStatus || json.Unmarshal(body, &e) != nil || e.Error.Code != reason || e.Error.Message == "" {
		t.Errorf("client got %d %s, want %d with error code %s", status, body, wantStatus, reason)
	}
	if hdr.Get(gateway.HeaderModelCallID) != x.ModelCallID {
		t.Errorf("model call id header %q, line %q", hdr.Get(gateway.HeaderModelCallID), x.ModelCallID)
	}
}

// awaitCancel is an upstream handler's wait: until the client's request r is cancelled (then it
// closes gone, when not nil) or the test ends.
func awaitCancel(t *testing.T, r *http.Request, gone chan struct{}) {
	select {
	case <-r.Context().Done():
		if gone != nil {
			close(gone)
		}
	case <-t.Context().Done():
	}
}

// sendThenAwaitCancel is an upstream handler that starts an event stream, sends events and
// flushes them, then awaits the client's cancellation (awaitCancel).
func sendThenAwaitCancel(t *testing.T, w http.ResponseWriter, r *http.Request, gone chan struct{}, events ...[]byte) {
	sseHeaders(w)
	for _, ev := range events {
		w.Write(ev)
	}
	w.(http.Flusher).Flush()
	awaitCancel(t, r, gone)
}

// wantUnreachable makes one Chat call as rollout id through a gateway in front of upstream, which
// never answers HTTP: the client gets the gateway's own 502 upstream_unreachable, and the line says
// so as a connection error.
func wantUnreachable(t *testing.T, upstream, id, path string) {
	t.Helper()
	g := startGateway(t, upstream, nil)
	status, hdr, body, err := g.call(id, path, chatRequest("n1", false))
	if err != nil {
		t.Fatal(err)
	}
	g.drain()
	x := g.only(id)
	localError(t, status, hdr, body, 502, gateway.ReasonUpstreamUnreachable, x)
	checkLine(t, x, lineWant{status: 502, category: "connection", source: "local", attempted: "true", reason: "upstream_unreachable", response: true})
}

func TestUpstreamFaults(t *testing.T) {
	const path = "/v1/chat/completions"
	ev1 := chatEvent("n1", "Hel", "")
	ev2 := chatEvent("n1", "lo", "")

	t.Run("connection refused", func(t *testing.T) {
		wantUnreachable(t, "http://"+capturetest.ClosedAddr(t), "refused-0", path)
	})

	// The upstream sends the first events of a stream in chunks, then, once the client has read
	// them, breaks the response. The client gets an error after those bytes and nothing more.
	// After an upstream failure the response is null (even when a whole stream had arrived) and
	// response_raw holds what arrived.
	for _, tc := range []struct {
		name, id string
		events   [][]byte // sent, one chunk each, before the fault
		fault    func(c net.Conn, rw *bufio.ReadWriter)
	}{
		{"reset mid-stream", "reset-0", [][]byte{ev1, ev2}, func(c net.Conn, _ *bufio.ReadWriter) {
			c.(*net.TCPConn).SetLinger(0) // close with RST
		}},
		{"chunked encoding error", "chunked-0", [][]byte{ev1}, func(_ net.Conn, rw *bufio.ReadWriter) {
			rw.WriteString("zz-not-a-chunk-size\r\n" + string(ev2) + "\r\n")
			rw.Flush()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			relayed := make(chan struct{})
			up := hijacked(t, func(c net.Conn, rw *bufio.ReadWriter) {
				rw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
				for _, ev := range tc.events {
					rw.WriteString(chunk(ev))
				}
				rw.Flush()
				select {
				case <-relayed:
				case <-t.Context().Done():
				}
				tc.fault(c, rw)
			})
			g := startGateway(t, up, nil)
			sent := bytes.Join(tc.events, nil)
			res := g.open(tc.id, path, chatRequest("n1", true))
			readFirst(t, res.Body, sent) // before the fault
			close(relayed)
			rest, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err == nil || len(rest) != 0 {
				t.Errorf("after the fault the client read %q, err %v; want nothing more and an error", rest, err)
			}
			g.drain()
			checkLine(t, g.only(tc.id), lineWant{status: 200, category: "connection", source: "upstream", attempted: "true", upstreamStatus: 200,
				raw: ptrTo(string(sent))})
		})
	}

	t.Run("stall before headers", func(t *testing.T) {
		gone := make(chan struct{})
		up := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			awaitCancel(t, r, gone)
		})
		g := startGateway(t, up.URL, func(h *gateway.Handler) { h.UpstreamTimeout = 300 * time.Millisecond })
		status, hdr, body, err := g.call("stall-0", path, chatRequest("n1", false))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-gone:
		case <-within():
			t.Fatal("the upstream request was not cancelled after the timeout")
		}
		g.drain()
		x := g.only("stall-0")
		localError(t, status, hdr, body, 504, gateway.ReasonUpstreamTimeout, x)
		checkLine(t, x, lineWant{status: 504, category: "timeout", source: "local", attempted: "true", reason: "upstream_timeout", response: true})
	})

	t.Run("stall mid-body", func(t *testing.T) {
		gone := make(chan struct{})
		up := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			sendThenAwaitCancel(t, w, r, gone, ev1)
		})
		g := startGateway(t, up.URL, func(h *gateway.Handler) { h.IdleTimeout = 300 * time.Millisecond })
		status, _, body, err := g.call("idle-0", path, chatRequest("n1", true))
		if status != 200 || !bytes.Equal(body, ev1) || err == nil {
			t.Errorf("client got %d %q err %v; want 200, the first event, then an error", status, body, err)
		}
		<-gone
		g.drain()
		checkLine(t, g.only("idle-0"), lineWant{status: 200, category: "timeout", source: "upstream", attempted: "true", upstreamStatus: 200,
			raw: ptrTo(string(ev1))})
	})

	t.Run("garbage bytes", func(t *testing.T) {
		up := hijacked(t, func(c net.Conn, rw *bufio.ReadWriter) {
			rw.WriteString("\x00\x01\xffNOT HTTP AT ALL\r\n\r\n{\"choices\":[]}")
			rw.Flush()
		})
		wantUnreachable(t, up, "garbage-0", path)
	})

	t.Run("200 with an HTML body", func(t *testing.T) {
		html := "<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1><p>nginx</p></body></html>\n"
		up := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, html)
		})
		g := startGateway(t, up.URL, nil)
		status, hdr, body, err := g.call("html-0", path, chatRequest("n1", false))
		if err != nil || status != 200 || string(body) != html || hdr.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("client got %d %q %v, want the upstream's HTML as sent", status, body, err)
		}
		g.drain()
		checkLine(t, g.only("html-0"), lineWant{status: 200, category: "capture_parse_error", source: "upstream", attempted: "true", upstreamStatus: 200,
			raw: &html})
	})

	t.Run("body shorter than Content-Length", func(t *testing.T) {
		full := chatJSON("n1", 0)
		up := hijacked(t, func(c net.Conn, rw *bufio.ReadWriter) {
			fmt.Fprintf(rw, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(full), full[:20])
			rw.Flush()
		})
		g := startGateway(t, up, nil)
		status, _, body, err := g.call("short-0", path, chatRequest("n1", false))
		if status != 200 || !bytes.Equal(body, full[:20]) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("client got %d %q %v; want 200, the 20 bytes sent, unexpected EOF", status, body, err)
		}
		g.drain()
		checkLine(t, g.only("short-0"), lineWant{status: 200, category: "connection", source: "upstream", attempted: "true", upstreamStatus: 200,
			raw: ptrTo(string(full[:20]))})
	})

	t.Run("error status relayed", func(t *testing.T) {
		for _, tc := range []struct {
			status   int
			category string
		}{{500, "upstream_error"}, {503, "upstream_error"}, {504, "timeout"}, {429, "rate_limit"}, {401, "auth"}, {404, "not_found"}, {400, "client_error"}} {
			errBody := fmt.Sprintf(`{"error":{"message":"upstream says %d","type":"x","code":"c%d"}}`, tc.status, tc.status)
			up := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				io.WriteString(w, errBody)
			})
			g := startGateway(t, up.URL, nil)
			status, _, body, err := g.call("status-0", path, chatRequest("n1", false))
			if err != nil || status != tc.status || string(body) != errBody {
				t.Fatalf("client got %d %q %v", status, body, err)
			}
			g.drain()
			checkLine(t, g.only("status-0"), lineWant{status: tc.status, category: tc.category, source: "upstream", attempted: "true",
				upstreamStatus: tc.status, response: true})
		}
	})

	errEv := []byte("data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n")
	for _, tc := range []struct {
		name, id string
		events   [][]byte // the whole stream the upstream sends
		category string
	}{
		{"stream ends without its terminal event", "trunc-0", [][]byte{ev1, ev2}, "stream_truncated"},
		{"error event mid-stream", "errev-0", [][]byte{ev1, errEv}, "upstream_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := bytes.Join(tc.events, nil)
			up := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				for _, ev := range tc.events {
					w.Write(ev)
				}
			})
			g := startGateway(t, up.URL, nil)
			status, _, body, err := g.call(tc.id, path, chatRequest("n1", true))
			if err != nil || status != 200 || !bytes.Equal(body, sent) {
				t.Fatalf("client got %d %q %v", status, body, err)
			}
			g.drain()
			checkLine(t, g.only(tc.id), lineWant{status: 200, category: tc.category, source: "upstream", attempted: "true", upstreamStatus: 200,
				raw: ptrTo(string(sent)), response: true})
		})
	}

	t.Run("upstream declares its provenance", func(t *testing.T) {
		up := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(gateway.HeaderResponseSource, "local")
			w.Header().Set(gateway.HeaderUpstreamAttempted, "true")
			w.Header().Set(gateway.HeaderLocalResponseReason, "upstream_unreachable")
			w.WriteHeader(502)
			io.WriteString(w, `{"error":{"message":"model server could not reach vLLM"}}`)
		})
		g := startGateway(t, up.URL, nil)
		status, _, _, err := g.call("declared-0", path, chatRequest("n1", false))
		if err != nil || status != 502 {
			t.Fatalf("client got %d %v", status, err)
		}
		g.drain()
		checkLine(t, g.only("declared-0"), lineWant{status: 502, category: "upstream_error", source: "local", attempted: "true",
			reason: "upstream_unreachable", response: true})
	})
}
