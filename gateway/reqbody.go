package gateway

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// ReasonRequestTimeout is the reason code of the 408 a client gets when its request body stops
// arriving for longer than RequestBodyTimeout (the call is not forwarded; its line records the 408,
// error category "timeout").
const ReasonRequestTimeout = "request_timeout"

// bodyGuard wraps a captured call's request body: every Read runs under a read deadline of
// RequestBodyTimeout on the client's connection (HTTP/1) or stream (HTTP/2), set just before the
// Read and cleared as soon as it returns, so the deadline never outlives the body read (a deadline
// left on an HTTP/1 connection would also end the server's background read during the response).
type bodyGuard struct {
	rc       io.ReadCloser
	ctl      *http.ResponseController
	timeout  time.Duration
	http1    bool
	timedOut bool
}

// guardRequestBody puts r's body under the request body timeout; the returned guard's finish must
// be called before ServeHTTP returns.
func (h *Handler) guardRequestBody(w http.ResponseWriter, r *http.Request) *bodyGuard {
	t := h.RequestBodyTimeout
	if t == 0 {
		t = DefaultRequestBodyTimeout
	}
	if t < 0 || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	g := &bodyGuard{rc: r.Body, ctl: http.NewResponseController(w), timeout: t, http1: r.ProtoMajor == 1}
	r.Body = g
	return g
}

func (g *bodyGuard) Read(p []byte) (int, error) {
	if g.ctl == nil {
		return g.rc.Read(p)
	}
	if err := g.ctl.SetReadDeadline(time.Now().Add(g.timeout)); err != nil {
		g.ctl = nil // the connection does not support deadlines: read without one
		return g.rc.Read(p)
	}
	n, err := g.rc.Read(p)
	g.ctl.SetReadDeadline(time.Time{})
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		g.timedOut = true
	}
	return n, err
}

func (g *bodyGuard) Close() error { return g.rc.Close() }

// expire prepares the 408 request_timeout answer to a body that timed out: the connection is
// closed after it on HTTP/1 (the rest of the body will not be read); on HTTP/2 only the stream ends.
func (g *bodyGuard) expire(w http.ResponseWriter) {
	g.ctl.SetReadDeadline(time.Now())
	if g.http1 {
		w.Header().Set("Connection", "close")
	}
}

// finish keeps the read deadline of a body that timed out expired once the handler is done:
// net/http discards an unread body after the handler returns, and without a deadline that read
// would wait on the stalled client forever.
func (g *bodyGuard) finish() {
	if g == nil || !g.timedOut {
		return
	}
	g.ctl.SetReadDeadline(time.Now())
}
