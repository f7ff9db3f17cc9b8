package capturetest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
)

// NewServer starts a loopback test server running h, closed at cleanup. For an http.Handler value,
// pass its ServeHTTP method.
func NewServer(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// Request is what a test upstream received.
type Request struct {
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	Body     []byte
}

// Upstream is a loopback model server for tests that remembers every request.
type Upstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []Request
}

// NewUpstream starts an Upstream, closed at cleanup. Each request's body is read whole before fn
// runs, as a model server does; only then does net/http notice a client that goes away (and
// cancel the request's context). fn may not read the body again.
func NewUpstream(t testing.TB, fn http.HandlerFunc) *Upstream {
	t.Helper()
	u := &Upstream{}
	u.Server = NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, Request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
		u.mu.Unlock()
		fn(w, r)
	})
	return u
}

// Requests returns the requests received so far, in arrival order.
func (u *Upstream) Requests() []Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Request(nil), u.seen...)
}

// Answer is one recorded answer: status, content type and body.
type Answer struct {
	Status      int
	ContentType string
	Body        []byte
}

// ServeHTTP writes the answer: an event stream (text/event-stream) one event per flushed write,
// as a model server streams; anything else in one write with its Content-Length.
func (a Answer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	sse := a.ContentType == "text/event-stream"
	w.Header().Set("Content-Type", a.ContentType)
	if !sse {
		w.Header().Set("Content-Length", strconv.Itoa(len(a.Body)))
	}
	w.WriteHeader(a.Status)
	if !sse {
		w.Write(a.Body)
		return
	}
	for _, ev := range SSEEvents(a.Body) {
		w.Write(ev)
		http.NewResponseController(w).Flush()
	}
}

// Replay is the handler that writes Answer{status, contentType, body}.
func Replay(status int, contentType string, body []byte) http.HandlerFunc {
	return Answer{status, contentType, body}.ServeHTTP
}

// SSEEvents splits an event stream body into events, each keeping its trailing blank line ("\n\n"),
// so an upstream can send (and flush) one event per write. A last event without its blank line is
// kept as it is.
func SSEEvents(body []byte) [][]byte {
	events := bytes.SplitAfter(body, []byte("\n\n"))
	if last := len(events) - 1; len(events[last]) == 0 {
		events = events[:last] // the body ended with a blank line (or is empty)
	}
	return events
}

// EchoUpgrade answers an upgrade request the way a WebSocket upstream does at the HTTP level: 101
// Switching Protocols, then it reads one line from the switched connection, writes it back prefixed
// "echo " and closes. There is no WebSocket framing: it is for tests that a proxy relays the
// switched connection both ways.
func EchoUpgrade(w http.ResponseWriter) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	brw.Flush()
	line, _ := brw.ReadString('\n')
	brw.WriteString("echo " + line)
	brw.Flush()
}
