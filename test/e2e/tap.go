package e2e

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// TapEntry is one request that passed through a Tap, with the answer the upstream gave.
type TapEntry struct {
	Method    string
	Path      string // URL path as it reached the tap (the gateway has stripped /ng-rollout/<id>)
	RawQuery  string
	ReqHeader http.Header
	ReqBody   []byte

	Status     int
	RespHeader http.Header
	RespBody   []byte // bytes as the upstream sent them (not decoded), up to where the client left
	// ClientLeft is true when the client hung up before the upstream's last byte was relayed (the
	// proxy aborted the copy); RespBody then ends where the relay stopped.
	ClientLeft bool

	Start, End time.Time // wall clock: request arrived, response finished
}

// Dialect is the entry's dialect by path, or "" for a call that is not a model call.
func (e TapEntry) Dialect() string {
	if e.Method != http.MethodPost {
		return ""
	}
	return DialectOfPath(e.Path)
}

// DecodedBody is the response body with a gzip Content-Encoding undone (the only coding the
// upstreams of these tests use); other bodies are returned as they are. Errors: a gzip body
// that does not decode.
func (e TapEntry) DecodedBody() ([]byte, error) {
	if !strings.EqualFold(strings.TrimSpace(e.RespHeader.Get("Content-Encoding")), "gzip") {
		return e.RespBody, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(e.RespBody))
	if err != nil {
		return nil, fmt.Errorf("gunzip response: %w", err)
	}
	b, err := io.ReadAll(zr)
	if errors.Is(err, io.ErrUnexpectedEOF) && e.ClientLeft {
		// The client hung up after the last event it wanted (an SDK stops at [DONE]) and the
		// gzip footer never crossed: everything before it decodes, which is what the client saw.
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("gunzip response: %w", err)
	}
	return b, nil
}

// Tap is a recording reverse proxy: every request is forwarded to the target unchanged (the
// standard library's reverse proxy: hop-by-hop headers dropped, X-Forwarded-For added), every
// response is streamed back as it arrives (flushed per write), and both are recorded.
type Tap struct {
	proxy *httputil.ReverseProxy

	mu       sync.Mutex
	idle     *sync.Cond // signalled when inflight drops to 0
	inflight int
	entries  []TapEntry
}

// NewTap returns a Tap forwarding to target, a base URL such as "http://127.0.0.1:8080".
// Errors: target does not parse or is not an absolute http URL.
func NewTap(target string) (*Tap, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("tap target %q: %w", target, err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("tap target %q: want an absolute http URL", target)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
		},
		FlushInterval: -1,
	}
	t := &Tap{proxy: rp}
	t.idle = sync.NewCond(&t.mu)
	return t, nil
}

// takeTimeout bounds how long Take waits for requests still in flight.
const takeTimeout = 30 * time.Second

// Take waits until no request is in flight (a client can have read the last byte before the
// tap has recorded the exchange), at most 30 s, then returns the entries recorded since the
// last Take, in order of completion, and forgets them.
func (t *Tap) Take() []TapEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	deadline := time.Now().Add(takeTimeout)
	timer := time.AfterFunc(takeTimeout, func() {
		t.mu.Lock()
		t.idle.Broadcast()
		t.mu.Unlock()
	})
	defer timer.Stop()
	for t.inflight > 0 && time.Now().Before(deadline) {
		t.idle.Wait()
	}
	out := t.entries
	t.entries = nil
	return out
}

// ServeHTTP implements http.Handler.
func (t *Tap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t.mu.Lock()
	t.inflight++
	t.mu.Unlock()
	e := TapEntry{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, ReqHeader: r.Header.Clone(),
		Start: time.Now()}
	rec := &recordingWriter{ResponseWriter: w}
	defer func() {
		// Runs on a panic too: ReverseProxy aborts with http.ErrAbortHandler when the client hangs
		// up before the upstream's last bytes (an SDK closes the stream at [DONE] while a gzip
		// footer is still coming), and the exchange must still be recorded with what was relayed.
		e.End = time.Now()
		e.Status = rec.status
		if e.Status == 0 {
			e.Status = http.StatusOK
		}
		e.RespHeader = w.Header().Clone()
		e.RespBody = rec.body.Bytes()
		e.ClientLeft = r.Context().Err() != nil || rec.writeErr != nil
		t.mu.Lock()
		t.entries = append(t.entries, e)
		t.inflight--
		if t.inflight == 0 {
			t.idle.Broadcast()
		}
		t.mu.Unlock()
	}()
	if r.Body != nil {
		body, err := readAllLimit(r.Body, 256<<20)
		if err != nil {
			http.Error(w, "tap: read request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		_ = r.Body.Close()
		e.ReqBody = body
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	t.proxy.ServeHTTP(rec, r)
}

// recordingWriter copies what is written to the client.
type recordingWriter struct {
	http.ResponseWriter
	status   int
	body     bytes.Buffer
	writeErr error // the first failed write to the client: it hung up
}

func (r *recordingWriter) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recordingWriter) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body.Write(p)
	n, err := r.ResponseWriter.Write(p)
	if err != nil && r.writeErr == nil {
		r.writeErr = err
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the real writer's Flush.
func (r *recordingWriter) Unwrap() http.ResponseWriter { return r.ResponseWriter }

var errTooLarge = errors.New("body larger than the limit")

// readAllLimit reads r to the end, failing with errTooLarge past limit bytes.
func readAllLimit(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}
