package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
)

// fixture reads a file from testdata.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sseEvents splits an SSE body into events, each keeping its trailing blank line, so a test
// upstream can send (and flush) one event per write. A last event without a blank line is kept.
func sseEvents(body []byte) [][]byte {
	var out [][]byte
	for len(body) > 0 {
		i := bytes.Index(body, []byte("\n\n"))
		if i < 0 {
			out = append(out, body)
			break
		}
		out = append(out, body[:i+2])
		body = body[i+2:]
	}
	return out
}

// seenRequest is what the test upstream received.
type seenRequest struct {
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	Body     []byte
}

// upstream is a loopback model server for tests.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

// newUpstream starts an upstream that records each request, then runs fn.
func newUpstream(t testing.TB, fn http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, seenRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
		u.mu.Unlock()
		fn(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenRequest(nil), u.seen...)
}

// replay answers with a fixture body: SSE bodies (by content type) one event per flushed write,
// everything else in one write.
func replay(status int, contentType string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		if contentType != "text/event-stream" {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		w.WriteHeader(status)
		if contentType != "text/event-stream" {
			w.Write(body)
			return
		}
		for _, ev := range sseEvents(body) {
			w.Write(ev)
			http.NewResponseController(w).Flush()
		}
	}
}

// env is a gateway in front of an upstream, with a fresh capture dir.
type env struct {
	t     testing.TB
	h     *gateway.Handler
	store *capture.Store
	gw    *httptest.Server
	up    *upstream
	logs  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newEnv(t testing.TB, fn http.HandlerFunc, configure ...func(*gateway.Handler)) *env {
	t.Helper()
	up := newUpstream(t, fn)
	return newEnvFor(t, up, configure...)
}

func newEnvFor(t testing.TB, up *upstream, configure ...func(*gateway.Handler)) *env {
	t.Helper()
	store, err := capture.Open(filepath.Join(t.TempDir(), "captures"))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	logs := &syncBuffer{}
	h := &gateway.Handler{
		Upstream:        u,
		Store:           store,
		ModelServerName: "policy_model",
		Logger:          slogTo(logs),
	}
	for _, f := range configure {
		f(h)
	}
	gw := httptest.NewServer(h)
	t.Cleanup(gw.Close)
	return &env{t: t, h: h, store: store, gw: gw, up: up, logs: logs}
}

// url is the gateway URL of path under rollout id's prefix ("" id: no prefix).
func (e *env) url(id, path string) string {
	if id == "" {
		return e.gw.URL + path
	}
	return e.gw.URL + "/ng-rollout/" + id + path
}

// rawTransport does no transparent decompression; TestMain closes its idle connections.
var rawTransport = &http.Transport{DisableCompression: true}

// rawClient talks to the gateway without any transparent decompression.
func rawClient() *http.Client { return &http.Client{Transport: rawTransport} }

// post sends body to the gateway and returns the response with its whole body.
func (e *env) post(id, path, body string, header map[string]string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url(id, path), strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := rawClient().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("read gateway response: %v", err)
	}
	return resp, b
}

// line is one capture line, decoded.
type line struct {
	ModelCallID              string            `json:"model_call_id"`
	Dialect                  string            `json:"dialect"`
	ModelRef                 *capture.ModelRef `json:"model_ref"`
	StartedAt                float64           `json:"started_at"`
	CompletedAt              float64           `json:"completed_at"`
	LatencyMS                float64           `json:"latency_ms"`
	LatencyTTFTMS            *float64          `json:"latency_ttft_ms"`
	StatusCode               *int              `json:"status_code"`
	ErrorCategory            *string           `json:"error_category"`
	Request                  json.RawMessage   `json:"request"`
	Response                 json.RawMessage   `json:"response"`
	RequestRaw               *string           `json:"request_raw"`
	ResponseRaw              *string           `json:"response_raw"`
	ResponseSource           *string           `json:"response_source"`
	UpstreamAttempted        *bool             `json:"upstream_attempted"`
	UpstreamStatusCode       *int              `json:"upstream_status_code"`
	LocalResponseReason      *string           `json:"local_response_reason"`
	ClientSessionID          *string           `json:"client_session_id"`
	ClientAssistantMessageID *string           `json:"client_assistant_message_id"`

	keys   map[string]json.RawMessage
	record *modelcalls.ModelCallRecord
}

func (l *line) has(key string) bool { _, ok := l.keys[key]; return ok }

func (l *line) category() string {
	if l.ErrorCategory == nil {
		return "<null>"
	}
	return *l.ErrorCategory
}

// lines reads rollout id's capture file (strictly) and decodes every line, also as a record.
func (e *env) lines(id string) []*line {
	e.t.Helper()
	entries, err := e.store.Read(id)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*line
	for _, en := range entries {
		l := &line{}
		if err := json.Unmarshal(en.Data, l); err != nil {
			e.t.Fatalf("capture line %d: %v", en.Line, err)
		}
		if err := json.Unmarshal(en.Data, &l.keys); err != nil {
			e.t.Fatal(err)
		}
		rec, err := modelcalls.BuildRecord(en.Data, en.Index)
		if err != nil {
			e.t.Fatalf("BuildRecord of line %d: %v\n%s", en.Line, err, en.Data)
		}
		l.record = rec
		out = append(out, l)
	}
	return out
}

// one reads rollout id's capture file and requires exactly one line.
func (e *env) one(id string) *line {
	e.t.Helper()
	ls := e.lines(id)
	if len(ls) != 1 {
		e.t.Fatalf("rollout %s: %d capture lines, want 1", id, len(ls))
	}
	return ls[0]
}

// drain waits until every captured call has its capture finished (the Handler then refuses new
// captured calls).
func (e *env) drain() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.h.Shutdown(ctx); err != nil {
		e.t.Fatalf("captures did not finish: %v", err)
	}
}

// metric returns the value of the counter or gauge name with the given labels (0 when absent).
func metric(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func strp(s string) *string { return &s }

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// readDir lists the names in dir.
func readDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, err
}
