package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/modelcalls/modelcalls/rollout"
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
	ModelCallID              string                  `json:"model_call_id"`
	Dialect                  string                  `json:"dialect"`
	ModelRef                 *rollout.ModelServerRef `json:"model_ref"`
	StartedAt                float64                 `json:"started_at"`
	CompletedAt              float64                 `json:"completed_at"`
	LatencyMS                float64                 `json:"latency_ms"`
	LatencyTTFTMS            *float64                `json:"latency_ttft_ms"`
	StatusCode               *int                    `json:"status_code"`
	ErrorCategory            *string                 `json:"error_category"`
	Request                  json.RawMessage         `json:"request"`
	Response                 json.RawMessage         `json:"response"`
	RequestRaw               *string                 `json:"request_raw"`
	ResponseRaw              *string                 `json:"response_raw"`
	ResponseSource           *string                 `json:"response_source"`
	UpstreamAttempted        *bool                   `json:"upstream_attempted"`
	UpstreamStatusCode       *int                    `json:"upstream_status_code"`
	LocalResponseReason      *string                 `json:"local_response_reason"`
	ClientSessionID          *string                 `json:"client_session_id"`
	ClientAssistantMessageID *string                 `json:"client_assistant_message_id"`

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
		if err := gymReadable(en.Data); err != nil {
			e.t.Fatalf("capture line %d breaks NeMo Gym's reader rules: %v\n%s", en.Line, err, en.Data)
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

// gymKeys are the keys NeMo Gym's CaptureStore writes, in its order (reference §3.2); request_raw
// and response_raw are optional.
var gymKeys = []string{"model_call_id", "dialect", "model_ref", "started_at", "completed_at", "latency_ms",
	"latency_ttft_ms", "status_code", "error_category", "request", "response"}

// gymReadable checks a capture line against the rules NeMo Gym's Python reader applies
// (reference §3.4 and §4): strict JSON object (the store's strict read already checked that), Gym's
// keys first and in its order, model_ref null or {"type":"responses_api_models","name":<string>},
// model_call_id and dialect strings, status_code an integer or null, timestamps and latencies
// numbers, request/response objects or null, raw fields strings when present.
func gymReadable(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return err
	}
	var order []string
	vals := map[string]any{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return err
		}
		order = append(order, k.(string))
		vals[k.(string)] = v
	}
	if len(order) < len(gymKeys) {
		return fmt.Errorf("keys %v, want Gym's %v first", order, gymKeys)
	}
	for i, k := range gymKeys {
		if order[i] != k {
			return fmt.Errorf("key %d is %q, Gym writes %q there", i, order[i], k)
		}
	}
	isNum := func(v any) bool { _, ok := v.(json.Number); return ok }
	isInt := func(v any) bool { n, ok := v.(json.Number); return ok && !strings.ContainsAny(string(n), ".eE") }
	for _, k := range []string{"model_call_id", "dialect"} {
		if _, ok := vals[k].(string); !ok {
			return fmt.Errorf("%s is %T, not a string", k, vals[k])
		}
	}
	if mr := vals["model_ref"]; mr != nil {
		m, ok := mr.(map[string]any)
		if _, named := m["name"].(string); !ok || m["type"] != "responses_api_models" || !named {
			return fmt.Errorf("model_ref %v is not {type: responses_api_models, name: string}", mr)
		}
	}
	for _, k := range []string{"started_at", "completed_at", "latency_ms"} {
		if !isNum(vals[k]) {
			return fmt.Errorf("%s is %v, not a number", k, vals[k])
		}
	}
	if v := vals["latency_ttft_ms"]; v != nil && !isNum(v) {
		return fmt.Errorf("latency_ttft_ms is %v", v)
	}
	if v := vals["status_code"]; v != nil && !isInt(v) {
		return fmt.Errorf("status_code is %v, not an integer", v)
	}
	if v := vals["error_category"]; v != nil {
		if _, ok := v.(string); !ok {
			return fmt.Errorf("error_category is %T", v)
		}
	}
	for _, k := range []string{"request", "response"} {
		if v := vals[k]; v != nil {
			if _, ok := v.(map[string]any); !ok {
				return fmt.Errorf("%s is %T, not an object", k, v)
			}
		}
	}
	for _, k := range []string{"request_raw", "response_raw"} {
		if v, ok := vals[k]; ok {
			if _, ok := v.(string); !ok {
				return fmt.Errorf("%s is %T, not a string", k, v)
			}
		}
	}
	return nil
}

// TestGymReadableCheck makes sure the checker every gateway test applies can fail.
func TestGymReadableCheck(t *testing.T) {
	good := `{"model_call_id":"a","dialect":"chat","model_ref":null,"started_at":1.0,"completed_at":2.0,"latency_ms":1.0,"latency_ttft_ms":null,"status_code":200,"error_category":null,"request":{},"response":null}`
	if err := gymReadable([]byte(good)); err != nil {
		t.Fatalf("good line rejected: %v", err)
	}
	for name, bad := range map[string]string{
		"float status": strings.Replace(good, `200`, `200.0`, 1),
		"key order":    strings.Replace(good, `"model_call_id":"a","dialect":"chat"`, `"dialect":"chat","model_call_id":"a"`, 1),
		"model_ref":    strings.Replace(good, `"model_ref":null`, `"model_ref":{"type":"x","name":"n"}`, 1),
		"request list": strings.Replace(good, `"request":{}`, `"request":[]`, 1),
	} {
		if gymReadable([]byte(bad)) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
