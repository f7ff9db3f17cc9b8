package gateway

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/modelcalls/modelcalls/dialect"
)

// ReasonRequestTimeout is the reason code of the 408 a client gets when its request body stops
// arriving for longer than RequestBodyTimeout (the call is captured as cancelled, not answered by
// the upstream).
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

// finish answers 408 request_timeout when the body timed out (the call itself was captured as
// cancelled and not forwarded): with Connection: close on HTTP/1; on HTTP/2 only the stream ends.
func (g *bodyGuard) finish(w http.ResponseWriter, d dialect.Dialect) {
	if g == nil || !g.timedOut {
		return
	}
	// Keep the deadline expired: net/http discards an unread body after the handler returns, and
	// without a deadline that read would wait on the stalled client forever.
	g.ctl.SetReadDeadline(time.Now())
	if g.http1 {
		w.Header().Set("Connection", "close") // the rest of the body will not be read
	}
	body := dialect.ErrorBody(d, http.StatusRequestTimeout, ReasonRequestTimeout,
		localMessage(ReasonRequestTimeout, "the request body stopped arriving; the call was not forwarded"))
	writeJSON(w, http.StatusRequestTimeout, body, nil)
}
