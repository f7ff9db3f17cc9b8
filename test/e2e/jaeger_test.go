//go:build e2e && unix

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestJaeger runs a real Jaeger v2 (scripts/build-jaeger.sh: github.com/jaegertracing/jaeger's
// cmd/jaeger, memory storage, on loopback ports of the test's choosing) as the traces-only backend
// people run, and reads back through Jaeger's own query APIs what modelcalls sent it: `export otlp`
// of a capture dir of two rollouts, over OTLP/HTTP and over OTLP/gRPC, and a live `modelcalls proxy`
// exporting to it. Jaeger has no metrics endpoint: each sender warns once and does not fail. Each
// rollout must be found as exactly one trace (the search Jaeger's UI makes, by the rollout id tag), holding its
// root span and every call's span, each with every GenAI attribute (the full attribute check
// TestOTelCollector makes, on the spans Jaeger's api/v3 returns).
func TestJaeger(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	bin := buildModelcalls(t, repo, work)
	j := startJaeger(t, jaegerBinary(t, repo), work)
	up := capturetest.NewServer(t, otelUpstream{}.ServeHTTP)

	for _, proto := range []string{"http/protobuf", "grpc"} {
		name := strings.ReplaceAll(proto, "/", "-")
		t.Run("export otlp "+name, func(t *testing.T) {
			capDir := filepath.Join(work, "cap-export-"+name)
			rollouts := []string{"jaeger-" + name + "-a", "jaeger-" + name + "-b"}
			p := startOTelProxy(t, bin, up.URL, capDir) // no export: capture only
			sent := map[string][]sentCall{}
			calls := 0
			var in strings.Builder
			for i, r := range rollouts {
				sent[r] = sendOTelCalls(t, p, r)
				calls += len(sent[r])
				fmt.Fprintf(&in, `{"_ng_rollout_id":%q,"reward":%d.5,"_ng_task_index":%d}`+"\n", r, i, i)
			}
			stopProxy(t, p)
			inPath := filepath.Join(work, "rollouts-"+name+".jsonl")
			writeFile(t, inPath, in.String())
			endpoint := j.otlpHTTP
			if proto == "grpc" {
				endpoint = j.otlpGRPC
			}
			cmd := exec.Command(bin, "export", "otlp", "--capture-dir", capDir, "--in", inPath,
				"--endpoint", endpoint, "--protocol", proto, "--upstream", up.URL, "--content")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("export otlp to Jaeger: %v (want exit 0: Jaeger takes every span)\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
			}
			want := fmt.Sprintf("exported %d spans (%d calls, %d rollout spans) of %d rollouts; 0 failed\n", calls+len(rollouts), calls, len(rollouts), len(rollouts))
			if stdout.String() != want {
				t.Errorf("stdout %q, want %q", stdout.String(), want)
			}
			// Jaeger refuses metrics: one warning line, nothing else on stderr.
			warn := "modelcalls export: warning: the OTLP endpoint does not accept metrics ("
			if lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], warn) ||
				!strings.HasSuffix(lines[0], "set OTEL_METRICS_EXPORTER=none to not send them") {
				t.Errorf("stderr %q, want the one warning line %q...", stderr.String(), warn)
			}
			for i, r := range rollouts {
				lines := readCaptureMaps(t, capDir, r)
				spans := j.rolloutSpans(t, r, len(sent[r])+1, false)
				var calls []otlpSpan
				var root *otlpSpan
				for k, s := range spans {
					if s.Name == "rollout "+r {
						root = &spans[k]
					} else {
						calls = append(calls, s)
					}
				}
				checkCallSpans(t, calls, sent[r], lines, r, up.URL, false)
				if root == nil {
					t.Fatalf("%s: no rollout root span in Jaeger", r)
				}
				if root.TraceID != traceIDOf(r) || root.SpanID != rolloutSpanIDOf(r) || root.ParentSpanID != "" || root.Kind != 1 {
					t.Errorf("%s: root span ids: trace %s span %s parent %q kind %d", r, root.TraceID, root.SpanID, root.ParentSpanID, root.Kind)
				}
				in0, out0 := tokenTotals(t, lines)
				for k, want := range map[string]any{
					"modelcalls.rollout.reward": float64(i) + 0.5, "modelcalls.rollout.task_index": int64(i), "modelcalls.rollout.calls": int64(len(sent[r])),
					"modelcalls.rollout.errors": int64(2), "modelcalls.rollout.input_tokens": in0, "modelcalls.rollout.output_tokens": out0,
				} {
					if got := root.attr(k); got != want {
						t.Errorf("%s: root %s = %#v, want %#v", r, k, got, want)
					}
				}
			}
		})
	}

	t.Run("proxy", func(t *testing.T) {
		capDir := filepath.Join(work, "cap-live")
		rollouts := []string{"jaeger-live-a", "jaeger-live-b"}
		p := startOTelProxy(t, bin, up.URL, capDir, "--otlp-endpoint", j.otlpHTTP, "--otlp-content")
		sent := map[string][]sentCall{}
		for _, r := range rollouts {
			sent[r] = sendOTelCalls(t, p, r)
		}
		// The spans reach Jaeger while the proxy runs (every 100 ms here), not only at its exit.
		for _, r := range rollouts {
			spans := j.rolloutSpans(t, r, len(sent[r]), true)
			checkCallSpans(t, spans, sent[r], readCaptureMaps(t, capDir, r), r, up.URL, true)
		}
		// The metrics go every 200 ms: by now Jaeger refused them at least once.
		stopProxy(t, p)
		log := p.log.String()
		if n := strings.Count(log, "otlp export: the endpoint does not accept metrics"); n != 1 {
			t.Errorf("%d metrics refusal warnings in the proxy log, want 1:\n%s", n, log)
		}
		if strings.Contains(log, "otlp export: metrics failed") || strings.Contains(log, "spans failed") {
			t.Errorf("proxy log reports a failure:\n%s", log)
		}
		if !strings.Contains(log, "otlp export stopped") {
			t.Errorf("proxy log lacks the export summary:\n%s", log)
		}
	})
}

// jaegerBinary builds (or finds in the cache) the e2e Jaeger.
func jaegerBinary(t *testing.T, repo string) string {
	t.Helper()
	if p := os.Getenv("MODELCALLS_E2E_JAEGER"); p != "" {
		return p
	}
	start := time.Now()
	cmd := exec.Command(filepath.Join(repo, "scripts", "build-jaeger.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/build-jaeger.sh: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("jaeger ready in %s", time.Since(start).Round(time.Second))
	return lines[len(lines)-1]
}

// jaeger is a running Jaeger: where it takes OTLP, and its query API.
type jaeger struct {
	otlpHTTP, otlpGRPC string // OTLP base URLs
	query              string // http://127.0.0.1:PORT of the query API and UI
}

// startJaeger runs Jaeger with a config of its all-in-one shape cut to what the test reads: the
// OTLP receiver (HTTP and gRPC), memory storage, the query extension (HTTP and gRPC), no batch
// processor (a span is stored when received), no own metrics, every port a free loopback port.
func startJaeger(t *testing.T, bin, work string) *jaeger {
	t.Helper()
	dir := filepath.Join(work, "jaeger")
	port := func() string { return strconv.Itoa(capturetest.FreePort(t)) }
	oh, og, qh, qg := port(), port(), port(), port()
	j := &jaeger{otlpHTTP: "http://127.0.0.1:" + oh, otlpGRPC: "http://127.0.0.1:" + og, query: "http://127.0.0.1:" + qh}
	cfg := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_storage:
    backends:
      e2e_store:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: e2e_store
    enable_tracing: false
    http:
      endpoint: 127.0.0.1:%s
    grpc:
      endpoint: 127.0.0.1:%s
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%s
      grpc:
        endpoint: 127.0.0.1:%s
exporters:
  jaeger_storage_exporter:
    trace_storage: e2e_store
`, qh, qg, oh, og)
	writeFile(t, filepath.Join(dir, "config.yaml"), cfg)
	logPath := filepath.Join(dir, "jaeger.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", filepath.Join(dir, "config.yaml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start jaeger: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("jaeger log:\n%s", tail(string(b), 40))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for _, p := range []string{oh, og, qh} {
		for {
			conn, err := net.Dial("tcp", "127.0.0.1:"+p)
			if err == nil {
				conn.Close()
				break
			}
			select {
			case <-exited:
				b, _ := os.ReadFile(logPath)
				t.Fatalf("jaeger exited at start:\n%s", b)
			default:
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(logPath)
				t.Fatalf("jaeger not listening on %s after 60s:\n%s", p, b)
			}
			time.Sleep(50 * time.Millisecond) // polling an external process's readiness: nothing to wait on
		}
	}
	return j
}

// jaegerV1Trace is one trace of the query API the UI reads (/api/traces): spans with tags and
// references, and the processes (services) they ran in.
type jaegerV1Trace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		TraceID       string `json:"traceID"`
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		References    []struct {
			RefType string `json:"refType"`
			TraceID string `json:"traceID"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		ProcessID string `json:"processID"`
		Tags      []struct {
			Key   string `json:"key"`
			Type  string `json:"type"`
			Value any    `json:"value"`
		} `json:"tags"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

// getJSON GETs url and decodes a 200 answer into v; it reports the status (and body on other
// statuses) instead of failing, for callers that poll.
func getJSON(url string, v any) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, string(b), nil
	}
	return resp.StatusCode, string(b), json.Unmarshal(b, v)
}

// searchRollout is the search Jaeger's UI makes: service modelcalls, tag modelcalls.rollout_id=r, the last hour.
func (j *jaeger) searchRollout(r string) ([]jaegerV1Trace, error) {
	now := time.Now()
	tags, _ := json.Marshal(map[string]string{"modelcalls.rollout_id": r})
	q := url.Values{
		"service": {"modelcalls"}, "tags": {string(tags)}, "limit": {"20"},
		"start": {strconv.FormatInt(now.Add(-time.Hour).UnixMicro(), 10)}, "end": {strconv.FormatInt(now.Add(time.Minute).UnixMicro(), 10)},
	}
	var res struct {
		Data   []jaegerV1Trace `json:"data"`
		Errors []any           `json:"errors"`
	}
	code, body, err := getJSON(j.query+"/api/traces?"+q.Encode(), &res)
	if err == nil && (code != http.StatusOK || len(res.Errors) > 0) {
		err = fmt.Errorf("/api/traces: %d %s", code, body)
	}
	return res.Data, err
}

// traceV3 reads one trace through api/v3 (OTLP JSON), as stored: raw_traces skips the query
// service's adjusters, so every attribute is the one modelcalls sent.
func (j *jaeger) traceV3(t *testing.T, traceID string) []otlpSpan {
	t.Helper()
	var res struct {
		Result json.RawMessage `json:"result"`
	}
	code, body, err := getJSON(j.query+"/api/v3/traces/"+traceID+"?raw_traces=true", &res)
	if err != nil || code != http.StatusOK {
		t.Fatalf("/api/v3/traces/%s: %d %v %s", traceID, code, err, body)
	}
	spans, err := decodeTracesData(res.Result)
	if err != nil {
		t.Fatalf("/api/v3/traces/%s: %v\n%s", traceID, err, body)
	}
	return spans
}

// rolloutSpans waits (30 s at most) until Jaeger's search finds n spans of rollout r, checks what
// the search found (one trace per rollout: the rollout's own, derived from its id; with
// clientTraces, a call sent with the client's traceparent in the client's trace instead), checks
// the spans as the UI shows them (service, operation, parent, GenAI tags), and returns the
// rollout's spans as api/v3 gives them.
func (j *jaeger) rolloutSpans(t *testing.T, r string, n int, clientTraces bool) []otlpSpan {
	t.Helper()
	var traces []jaegerV1Trace
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		traces, err = j.searchRollout(r)
		got := 0
		for _, tr := range traces {
			for _, s := range tr.Spans {
				for _, kv := range s.Tags {
					if kv.Key == "modelcalls.rollout_id" && kv.Value == r {
						got++
					}
				}
			}
		}
		if err == nil && got >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: Jaeger's search found %d spans after 30s, want %d (err %v)", r, got, n, err)
		}
		time.Sleep(100 * time.Millisecond) // polling an external process: nothing to wait on
	}
	want := map[string]bool{traceIDOf(r): true}
	if clientTraces {
		want["4bf92f3577b34da6a3ce929d0e0e4736"] = true
	}
	if len(traces) != len(want) {
		ids := []string{}
		for _, tr := range traces {
			ids = append(ids, tr.TraceID)
		}
		t.Fatalf("%s: Jaeger's search found traces %v, want %d (%v)", r, ids, len(want), want)
	}
	var out []otlpSpan
	for _, tr := range traces {
		if !want[tr.TraceID] {
			t.Errorf("%s: Jaeger's search found trace %s, want one of %v", r, tr.TraceID, want)
			continue
		}
		// As the UI shows it: the service, the span's operation, its parent, its GenAI tags.
		for _, s := range tr.Spans {
			tags := map[string]any{}
			for _, kv := range s.Tags {
				tags[kv.Key] = kv.Value
			}
			if tags["modelcalls.rollout_id"] != r {
				continue // the client's trace holds the other rollouts' calls too
			}
			if svc := tr.Processes[s.ProcessID].ServiceName; svc != "modelcalls" {
				t.Errorf("%s: span %s in service %q, want modelcalls", r, s.SpanID, svc)
			}
			if s.OperationName == "rollout "+r {
				if len(s.References) != 0 {
					t.Errorf("%s: root span has references %v", r, s.References)
				}
				continue
			}
			if !strings.HasPrefix(s.OperationName, "chat ") || tags["gen_ai.operation.name"] != "chat" || tags["gen_ai.request.model"] != strings.TrimPrefix(s.OperationName, "chat ") {
				t.Errorf("%s: span %s operation %q, tags %v", r, s.SpanID, s.OperationName, tags)
			}
			if tr.TraceID == traceIDOf(r) && (len(s.References) != 1 || s.References[0].RefType != "CHILD_OF" || s.References[0].SpanID != rolloutSpanIDOf(r)) {
				t.Errorf("%s: call span %s references %v, want CHILD_OF the rollout span %s", r, s.SpanID, s.References, rolloutSpanIDOf(r))
			}
			if _, ok := tags["gen_ai.provider.name"]; !ok {
				t.Errorf("%s: span %s has no gen_ai.provider.name tag", r, s.SpanID)
			}
			if tags["error"] == nil {
				if _, ok := tags["gen_ai.usage.input_tokens"]; !ok {
					t.Errorf("%s: span %s has no gen_ai.usage.input_tokens tag", r, s.SpanID)
				}
			}
		}
		for _, s := range j.traceV3(t, tr.TraceID) {
			if s.str("modelcalls.rollout_id") == r {
				out = append(out, s)
			}
		}
	}
	if len(out) != n {
		t.Fatalf("%s: api/v3 gives %d spans, want %d", r, len(out), n)
	}
	ids := []string{}
	for _, tr := range traces {
		ids = append(ids, fmt.Sprintf("%s (%d spans)", tr.TraceID, len(tr.Spans)))
	}
	t.Logf("%s: Jaeger's search finds %s; %d spans of the rollout", r, strings.Join(ids, ", "), n)
	return out
}
