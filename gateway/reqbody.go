package gateway

import (
	"errors"
	"fmt"
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
	return guardBody(w, r, t)
}

// guardBody puts r's body under a per-read timeout t (none when t <= 0).
func guardBody(w http.ResponseWriter, r *http.Request, t time.Duration) *bodyGuard {
	if t <= 0 || r.Body == nil || r.Body == http.NoBody {
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

// Errors of ReadRequestBody.
var (
	// ErrRequestTooLarge: the body is larger than the limit (answer 413 request_too_large).
	ErrRequestTooLarge = errors.New("request body larger than the limit")
	// ErrRequestTimeout: the body stopped arriving for longer than the timeout (answer 408
	// request_timeout; on HTTP/1 the response already says Connection: close).
	ErrRequestTimeout = errors.New("request body stopped arriving")
)

// ReadRequestBody reads r's whole body with the request hygiene of the gateway's captured calls,
// for a handler that needs the body before it answers (what `modelcalls replay` does): at most limit
// bytes (negative: no limit; past it ErrRequestTooLarge, at once when Content-Length says so), each
// read under a read deadline of timeout on the client's connection or stream (<= 0: none; past it
// ErrRequestTimeout), and memory that follows the bytes that arrive, not the length announced
// (readBody). Other errors are the client's side of the connection failing.
func ReadRequestBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, error) {
	g := guardBody(w, r, timeout)
	b, err := readBody(r, limit)
	switch {
	case err == nil:
		return b, nil
	case g != nil && g.timedOut:
		g.expire(w)
		return nil, ErrRequestTimeout
	case errors.Is(err, errTooLarge):
		return nil, ErrRequestTooLarge
	}
	return nil, err
}

// maxPresizedRequest bounds how much of an announced Content-Length readBody allocates before the
// bytes arrive.
const maxPresizedRequest = 64 << 10

// readBody reads r's whole body, up to limit bytes (negative: no limit; errTooLarge beyond, without
// reading when Content-Length already says so). The buffer starts at the announced length up to 64
// KiB and grows fourfold as bytes arrive, never past the announced length while the body keeps to
// it: a client announcing 60 MB and sending one byte costs 64 KiB, one sending the 60 MB costs the
// 60 MB plus a third in the smaller buffers left behind (a doubling buffer costs twice, and up to
// twice again when it overshoots).
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if limit >= 0 && r.ContentLength > limit {
		return nil, errTooLarge
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	announced := r.ContentLength // -1 when unknown
	size := int64(maxPresizedRequest)
	if announced >= 0 && announced < size {
		size = announced
	}
	buf := make([]byte, 0, max(size, 512))
	for {
		if len(buf) == cap(buf) {
			if announced >= 0 && int64(len(buf)) == announced {
				// Every announced byte is here: a one-byte read finds the end without growing.
				var one [1]byte
				n, err := r.Body.Read(one[:])
				if n == 0 && err == io.EOF {
					return buf, nil
				}
				if n == 0 && err != nil {
					return nil, fmt.Errorf("read request body: %w", err)
				}
				buf = append(buf, one[:n]...)
			} else {
				next := int64(4 * cap(buf))
				if announced > int64(len(buf)) {
					next = min(next, announced)
				}
				if limit >= 0 {
					next = min(next, limit+1)
				}
				grown := make([]byte, len(buf), max(next, int64(len(buf))+1))
				copy(grown, buf)
				buf = grown
			}
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if limit >= 0 && int64(len(buf)) > limit {
			return nil, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read request body: %w", err)
		}
	}
}
