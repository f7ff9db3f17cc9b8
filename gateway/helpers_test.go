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
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// fixture reads a recorded body or harness request of the shared fixture set
// (testdata/fixtures/<name> at the repository root).
func fixture(t testing.TB, name string) []byte { return capturetest.Fixture(t, name) }

// env is a gateway in front of an upstream, with a fresh capture dir.
type env struct {
	t     testing.TB
	h     *gateway.Handler
	store *capture.Store
	gw    *httptest.Server
	up    *capturetest.Upstream
	logs  *capturetest.Buffer
}

func newEnv(t testing.TB, fn http.HandlerFunc, configure ...func(*gateway.Handler)) *env {
	t.Helper()
	return newEnvFor(t, capturetest.NewUpstream(t, fn), configure...)
}

func newEnvFor(t testing.TB, up *capturetest.Upstream, configure ...func(*gateway.Handler)) *env {
	t.Helper()
	store := capturetest.NewStore(t)
	u, _ := url.Parse(up.URL)
	logs := &capturetest.Buffer{}
	h := &gateway.Handler{
		Upstream:        u,
		Store:           store,
		ModelServerName: "policy_model",
		Logger:          capturetest.Logger(logs),
	}
	for _, f := range configure {
		f(h)
	}
	gw := capturetest.NewServer(t, h.ServeHTTP)
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

// lines reads rollout id's capture file strictly, decodes every line and builds its record
// (capturetest.Lines), and checks each line against NeMo Gym's reader rules.
func (e *env) lines(id string) []*capturetest.Line {
	e.t.Helper()
	ls := capturetest.Lines(e.t, e.store, id)
	for _, l := range ls {
		if err := gymReadable(l.Data); err != nil {
			e.t.Fatalf("capture line %d breaks NeMo Gym's reader rules: %v\n%s", l.Num, err, l.Data)
		}
	}
	return ls
}

// one reads rollout id's capture file and requires exactly one line.
func (e *env) one(id string) *capturetest.Line {
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

// gymKeys are the keys NeMo Gym's CaptureStore writes first, in its order (docs/format.md, section
// 3); request_raw and response_raw follow only when present.
var gymKeys = []string{"model_call_id", "dialect", "model_ref", "started_at", "completed_at", "latency_ms",
	"latency_ttft_ms", "status_code", "error_category", "request", "response"}

// gymReadable checks a capture line against the rules NeMo Gym's Python reader applies
// (docs/format.md, sections 3 and 6): strict JSON object (the store's strict read already checked that), Gym's
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
