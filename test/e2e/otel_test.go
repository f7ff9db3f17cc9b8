//go:build e2e && unix

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestOTelCollector runs a real OpenTelemetry Collector (scripts/build-otelcol.sh: core otelcol, the
// OTLP receiver, the contrib file exporter writing OTLP JSON lines), points real `modelcalls proxy`
// processes at it over OTLP/HTTP and OTLP/gRPC, sends calls of all three dialects (JSON and SSE, one
// upstream error, one cancelled, one with a client traceparent) through them to a scripted
// upstream, and checks every span and attribute the Collector received against what was sent;
// then `modelcalls export otlp` on the capture dir (the same spans again, plus rollout root spans
// with --in); then the Collector down: calls unaffected, failed spans counted in /metrics.
func TestOTelCollector(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	bin := buildModelcalls(t, repo, work)
	colBin := otelcolBinary(t, repo)
	col := startCollector(t, colBin, work)
	up := capturetest.NewServer(t, otelUpstream{}.ServeHTTP)

	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(strings.ReplaceAll(proto, "/", "-"), func(t *testing.T) {
			capDir := filepath.Join(work, "cap-"+strings.ReplaceAll(proto, "/", "-"))
			endpoint := col.httpURL
			if proto == "grpc" {
				endpoint = col.grpcURL
			}
			rollout := "otel-" + strings.ReplaceAll(proto, "/", "-")
			p := startOTelProxy(t, bin, up.URL, capDir, "--otlp-endpoint", endpoint, "--otlp-protocol", proto, "--otlp-content")
			sent := sendOTelCalls(t, p, rollout)
			stopProxy(t, p)
			if !strings.Contains(p.log.String(), "otlp export stopped") {
				t.Errorf("proxy log lacks the export summary:\n%s", p.log.String())
			}
			spans := col.waitSpans(t, len(sent), func(s otlpSpan) bool { return s.str("modelcalls.rollout_id") == rollout })
			lines := readCaptureMaps(t, capDir, rollout)
			checkCallSpans(t, spans, sent, lines, rollout, up.URL, true)
		})
	}
	col.checkMetrics(t)

	t.Run("export otlp", func(t *testing.T) {
		capDir := filepath.Join(work, "cap-export")
		rollout := "otel-export"
		p := startOTelProxy(t, bin, up.URL, capDir) // no export: capture only
		sent := sendOTelCalls(t, p, rollout)
		stopProxy(t, p)
		in := filepath.Join(work, "rollouts.jsonl")
		writeFile(t, in, `{"_ng_rollout_id":"`+rollout+`","reward":0.75,"_ng_task_index":4}`+"\n")
		out, err := exec.Command(bin, "export", "otlp", "--capture-dir", capDir, "--in", in,
			"--endpoint", col.httpURL, "--upstream", up.URL, "--content").CombinedOutput()
		if err != nil {
			t.Fatalf("export otlp: %v\n%s", err, out)
		}
		if want := fmt.Sprintf("exported %d spans (%d calls, 1 rollout spans) of 1 rollouts; 0 failed", len(sent)+1, len(sent)); !strings.Contains(string(out), want) {
			t.Errorf("summary %q, want %q", out, want)
		}
		spans := col.waitSpans(t, len(sent)+1, func(s otlpSpan) bool { return s.str("modelcalls.rollout_id") == rollout })
		var calls []otlpSpan
		var root *otlpSpan
		for i, s := range spans {
			if s.Name == "rollout "+rollout {
				root = &spans[i]
			} else {
				calls = append(calls, s)
			}
		}
		lines := readCaptureMaps(t, capDir, rollout)
		// After the fact there is no client header: the traceparent call lands in the rollout trace.
		checkCallSpans(t, calls, sent, lines, rollout, up.URL, false)
		if root == nil {
			t.Fatal("no rollout root span")
		}
		if root.TraceID != traceIDOf(rollout) || root.SpanID != rolloutSpanIDOf(rollout) || root.ParentSpanID != "" || root.Kind != 1 {
			t.Errorf("root span ids: trace %s span %s parent %q kind %d", root.TraceID, root.SpanID, root.ParentSpanID, root.Kind)
		}
		in0, out0 := tokenTotals(t, lines)
		for k, want := range map[string]any{
			"modelcalls.rollout.reward": 0.75, "modelcalls.rollout.task_index": int64(4), "modelcalls.rollout.calls": int64(len(sent)),
			"modelcalls.rollout.errors": int64(2), "modelcalls.rollout.input_tokens": in0, "modelcalls.rollout.output_tokens": out0,
		} {
			if got := root.attr(k); got != want {
				t.Errorf("root %s = %#v, want %#v", k, got, want)
			}
		}

		// Exporting the same captures again gives the same spans (ids included).
		out, err = exec.Command(bin, "export", "otlp", "--capture-dir", capDir, "--endpoint", col.httpURL, "--upstream", up.URL, "--content").CombinedOutput()
		if err != nil {
			t.Fatalf("second export otlp: %v\n%s", err, out)
		}
		again := col.waitSpans(t, 2*len(sent)+1, func(s otlpSpan) bool { return s.str("modelcalls.rollout_id") == rollout })
		seen := map[string]int{}
		for _, s := range again {
			seen[s.SpanID]++
		}
		for _, s := range calls {
			if seen[s.SpanID] != 2 {
				t.Errorf("span %s seen %d times after two exports, want 2", s.SpanID, seen[s.SpanID])
			}
		}
	})

	t.Run("collector down", func(t *testing.T) {
		dead := deadEndpoint(t)
		capDir := filepath.Join(work, "cap-down")
		rollout := "otel-down"
		p := startOTelProxy(t, bin, up.URL, capDir, "--otlp-endpoint", dead)
		sent := sendOTelCalls(t, p, rollout)
		if n := len(readCaptureMaps(t, capDir, rollout)); n != len(sent) {
			t.Errorf("%d capture lines, want %d", n, len(sent))
		}
		// Every export attempt fails; the spans are counted, nothing else happens.
		deadline := time.Now().Add(30 * time.Second)
		for {
			failed := scrapeCounter(t, p.admin+"/metrics", `modelcalls_gateway_otlp_spans_total{result="failed"}`)
			if failed >= float64(len(sent)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("failed spans %v after 30s, want %d\n%s", failed, len(sent), p.log.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if exported := scrapeCounter(t, p.admin+"/metrics", `modelcalls_gateway_otlp_spans_total{result="exported"}`); exported != 0 {
			t.Errorf("exported %v with the Collector down", exported)
		}
		stopProxy(t, p)
		if !strings.Contains(p.log.String(), "otlp export: spans failed") {
			t.Errorf("no failure log line:\n%s", p.log.String())
		}
		out, err := exec.Command(bin, "export", "otlp", "--capture-dir", capDir, "--endpoint", dead, "--timeout", "10s").CombinedOutput()
		if code := exitCode(err); code != 1 {
			t.Errorf("export otlp to a dead endpoint: exit %d, want 1\n%s", code, out)
		}
	})
}

// otelcolBinary builds (or finds in the cache) the e2e Collector.
func otelcolBinary(t *testing.T, repo string) string {
	t.Helper()
	if p := os.Getenv("MODELCALLS_E2E_OTELCOL"); p != "" {
		return p
	}
	start := time.Now()
	cmd := exec.Command(filepath.Join(repo, "scripts", "build-otelcol.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/build-otelcol.sh: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("collector ready in %s", time.Since(start).Round(time.Second))
	return lines[len(lines)-1]
}

type collector struct {
	httpURL, grpcURL string
	traces, metrics  string
}

// deadEndpoint is an OTLP base URL on a loopback port nothing listens on.
func deadEndpoint(t *testing.T) string { return "http://" + capturetest.ClosedAddr(t) }

func startCollector(t *testing.T, bin, work string) *collector {
	t.Helper()
	dir := filepath.Join(work, "otelcol")
	hp, gp := strconv.Itoa(capturetest.FreePort(t)), strconv.Itoa(capturetest.FreePort(t))
	c := &collector{
		httpURL: "http://127.0.0.1:" + hp, grpcURL: "http://127.0.0.1:" + gp,
		traces: filepath.Join(dir, "traces.jsonl"), metrics: filepath.Join(dir, "metrics.jsonl"),
	}
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%s
      grpc:
        endpoint: 127.0.0.1:%s
exporters:
  file/traces:
    path: %s
    flush_interval: 50ms
  file/metrics:
    path: %s
    flush_interval: 50ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file/traces]
    metrics:
      receivers: [otlp]
      exporters: [file/metrics]
`, hp, gp, c.traces, c.metrics)
	writeFile(t, filepath.Join(dir, "config.yaml"), cfg)
	logf, err := os.Create(filepath.Join(dir, "otelcol.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", filepath.Join(dir, "config.yaml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start collector: %v", err)
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
	})
	deadline := time.Now().Add(30 * time.Second)
	for _, port := range []string{hp, gp} {
		for {
			conn, err := net.Dial("tcp", "127.0.0.1:"+port)
			if err == nil {
				conn.Close()
				break
			}
			select {
			case <-exited:
				b, _ := os.ReadFile(filepath.Join(dir, "otelcol.log"))
				t.Fatalf("collector exited at start:\n%s", b)
			default:
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(filepath.Join(dir, "otelcol.log"))
				t.Fatalf("collector not listening on %s after 30s:\n%s", port, b)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

// otlpSpan is one span of the file exporter's OTLP JSON, flattened.
type otlpSpan struct {
	TraceID      string `json:"traceId"`
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId"`
	Name         string `json:"name"`
	Kind         int    `json:"kind"`
	Start        string `json:"startTimeUnixNano"`
	End          string `json:"endTimeUnixNano"`
	Attributes   []otlpKV
	Status       struct {
		Code int `json:"code"`
	} `json:"status"`
	resource map[string]any
	attrs    map[string]any
}

type otlpKV struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// otlpValue decodes an OTLP JSON AnyValue into string, int64, float64, bool or []any.
func otlpValue(raw json.RawMessage) any {
	var v struct {
		S *string                             `json:"stringValue"`
		I *string                             `json:"intValue"`
		D *float64                            `json:"doubleValue"`
		B *bool                               `json:"boolValue"`
		A *struct{ Values []json.RawMessage } `json:"arrayValue"`
	}
	json.Unmarshal(raw, &v)
	switch {
	case v.S != nil:
		return *v.S
	case v.I != nil:
		n, _ := strconv.ParseInt(*v.I, 10, 64)
		return n
	case v.D != nil:
		return *v.D
	case v.B != nil:
		return *v.B
	case v.A != nil:
		out := []any{}
		for _, e := range v.A.Values {
			out = append(out, otlpValue(e))
		}
		return out
	}
	return nil
}

func kvMap(kvs []otlpKV) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[kv.Key] = otlpValue(kv.Value)
	}
	return m
}

func (s otlpSpan) attr(k string) any   { return s.attrs[k] }
func (s otlpSpan) str(k string) string { v, _ := s.attrs[k].(string); return v }

// readSpans reads every span the Collector wrote so far.
func (c *collector) readSpans(t *testing.T) []otlpSpan {
	t.Helper()
	b, err := os.ReadFile(c.traces)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []otlpSpan
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		spans, err := decodeTracesData(line)
		if err != nil {
			continue // a line still being written
		}
		out = append(out, spans...)
	}
	return out
}

// decodeTracesData reads the spans of one OTLP JSON TracesData document ({"resourceSpans": ...}),
// each with its resource's attributes.
func decodeTracesData(b []byte) ([]otlpSpan, error) {
	var doc struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []otlpKV `json:"attributes"`
			} `json:"resource"`
			ScopeSpans []struct {
				Spans []otlpSpan `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	var out []otlpSpan
	for _, rs := range doc.ResourceSpans {
		res := kvMap(rs.Resource.Attributes)
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				s.resource, s.attrs = res, kvMap(s.Attributes)
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// waitSpans waits (30 s at most) until the Collector wrote at least n spans that match.
func (c *collector) waitSpans(t *testing.T, n int, match func(otlpSpan) bool) []otlpSpan {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got []otlpSpan
		for _, s := range c.readSpans(t) {
			if match(s) {
				got = append(got, s)
			}
		}
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) != n {
				t.Fatalf("collector has %d matching spans, want %d", len(got), n)
			}
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkMetrics checks the three GenAI client metrics reached the Collector.
func (c *collector) checkMetrics(t *testing.T) {
	t.Helper()
	want := []string{`"gen_ai.client.operation.duration"`, `"gen_ai.client.token.usage"`, `"gen_ai.client.operation.time_to_first_chunk"`}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(c.metrics)
		missing := []string{}
		for _, w := range want {
			if !bytes.Contains(b, []byte(w)) {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 {
			if !bytes.Contains(b, []byte(`"gen_ai.token.type"`)) || !bytes.Contains(b, []byte(`"unit":"{token}"`)) {
				t.Errorf("token usage without gen_ai.token.type or unit {token}")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics missing at the Collector: %v", missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// otelUpstream is a scripted model server for the OTLP test: the request's model picks the answer
// ("ok-*" a normal one, "error-*" a 429, "hang-*" a stream that sends one event and then waits for
// the client to go away); "stream" picks JSON or SSE. Usage numbers are fixed per dialect.
type otelUpstream struct{}

func (otelUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	body, _ := io.ReadAll(r.Body)
	json.Unmarshal(body, &req)
	d := DialectOfPath(r.URL.Path)
	if strings.HasPrefix(req.Model, "error") {
		writeJSON(w, http.StatusTooManyRequests, openAIError("slow down"))
		return
	}
	hang := strings.HasPrefix(req.Model, "hang")
	model := "up-" + d
	switch d {
	case "chat":
		usage := map[string]any{"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35,
			"prompt_tokens_details": map[string]any{"cached_tokens": 10}, "completion_tokens_details": map[string]any{"reasoning_tokens": 2}}
		if !req.Stream {
			writeJSON(w, 200, map[string]any{"id": "chatcmpl-e2e", "object": "chat.completion", "model": model,
				"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "hi"}, "finish_reason": "stop"}}, "usage": usage})
			return
		}
		s := newSSE(w)
		s.send("", map[string]any{"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": "hi"}, "finish_reason": nil}}})
		if hang {
			<-r.Context().Done()
			return
		}
		s.send("", map[string]any{"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
		s.send("", map[string]any{"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "model": model, "choices": []any{}, "usage": usage})
		s.raw("", "[DONE]")
	case "responses":
		full := map[string]any{"id": "resp_e2e", "object": "response", "status": "completed", "model": model,
			"output": []any{map[string]any{"type": "message", "id": "msg_e2e", "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": "hi", "annotations": []any{}}}}},
			"usage": map[string]any{"input_tokens": 40, "output_tokens": 6, "total_tokens": 46,
				"input_tokens_details": map[string]any{"cached_tokens": 20}, "output_tokens_details": map[string]any{"reasoning_tokens": 3}}}
		if !req.Stream {
			writeJSON(w, 200, full)
			return
		}
		s := newSSE(w)
		s.send("response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_e2e", "object": "response", "status": "in_progress", "model": model, "output": []any{}}})
		if hang {
			<-r.Context().Done()
			return
		}
		s.send("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": "msg_e2e", "output_index": 0, "content_index": 0, "delta": "hi"})
		s.send("response.completed", map[string]any{"type": "response.completed", "response": full})
	case "messages":
		usage := map[string]any{"input_tokens": 7, "output_tokens": 8, "cache_read_input_tokens": 20, "cache_creation_input_tokens": 13}
		if !req.Stream {
			writeJSON(w, 200, map[string]any{"id": "msg_e2e", "type": "message", "role": "assistant", "model": model,
				"content": []any{map[string]any{"type": "text", "text": "hi"}}, "stop_reason": "end_turn", "usage": usage})
			return
		}
		s := newSSE(w)
		s.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_e2e", "type": "message", "role": "assistant", "model": model,
			"content": []any{}, "stop_reason": nil, "usage": map[string]any{"input_tokens": 7, "output_tokens": 1, "cache_read_input_tokens": 20, "cache_creation_input_tokens": 13}}})
		if hang {
			<-r.Context().Done()
			return
		}
		s.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "hi"}})
		s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		s.send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"}, "usage": map[string]any{"output_tokens": 8}})
		s.send("message_stop", map[string]any{"type": "message_stop"})
	}
}

// sentCall is one call the test made and what its span must say.
type sentCall struct {
	modelCallID string
	dialect     string
	stream      bool
	model       string
	traceparent string
	errorType   string
	status      int
}

const clientTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// sendOTelCalls sends, under rollout id: each dialect JSON and SSE, one upstream error, one
// cancelled stream, and one call with a client traceparent.
func sendOTelCalls(t *testing.T, p *modelcallsProc, id string) []sentCall {
	t.Helper()
	base := p.base
	before := capturedCalls(p.admin) // the count is cumulative over the proxy's rollouts
	paths := map[string]string{"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
	body := func(d, model string, stream bool) string {
		switch d {
		case "responses":
			return fmt.Sprintf(`{"model":%q,"stream":%v,"instructions":"be brief","input":"say hi"}`, model, stream)
		case "messages":
			return fmt.Sprintf(`{"model":%q,"stream":%v,"max_tokens":16,"messages":[{"role":"user","content":"say hi"}]}`, model, stream)
		}
		opts := ""
		if stream {
			opts = `,"stream_options":{"include_usage":true}`
		}
		return fmt.Sprintf(`{"model":%q,"stream":%v%s,"messages":[{"role":"user","content":"say hi"}]}`, model, stream, opts)
	}
	var sent []sentCall
	do := func(c sentCall, cancelAfterFirst bool) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/ng-rollout/"+id+paths[c.dialect], strings.NewReader(body(c.dialect, c.model, c.stream)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Session-Id", "sess-"+id)
		if c.traceparent != "" {
			req.Header.Set("traceparent", c.traceparent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.dialect, c.model, err)
		}
		c.modelCallID = resp.Header.Get("x-nemo-gym-model-call-id")
		if cancelAfterFirst {
			// Read the first event, then go away: the gateway captures the call as cancelled.
			br := bufio.NewReader(resp.Body)
			if _, err := br.ReadString('\n'); err != nil {
				t.Fatalf("first event: %v", err)
			}
			cancel()
			resp.Body.Close()
		} else {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("%s %s: status %d, want %d", c.dialect, c.model, resp.StatusCode, c.status)
			}
		}
		sent = append(sent, c)
	}
	for _, d := range []string{"chat", "responses", "messages"} {
		for _, stream := range []bool{false, true} {
			do(sentCall{dialect: d, stream: stream, model: "ok-" + d, status: 200}, false)
		}
	}
	do(sentCall{dialect: "chat", model: "error-chat", errorType: "rate_limit", status: 429}, false)
	do(sentCall{dialect: "messages", stream: true, model: "hang-messages", errorType: "cancelled", status: 200}, true)
	do(sentCall{dialect: "responses", model: "ok-responses", traceparent: clientTraceparent, status: 200}, false)
	// The cancelled call's line is written when the gateway sees the client leave: wait for it.
	want := before + len(sent)
	deadline := time.Now().Add(10 * time.Second)
	for capturedCalls(p.admin) < want {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy counts %d captured calls after 10s, want %d", capturedCalls(p.admin), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return sent
}

// capturedCalls is the proxy's count of captured calls (modelcalls_gateway_calls_total, all
// series), read from its admin listener (the proxy's own port forwards every path upstream).
func capturedCalls(admin string) int {
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var n float64
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "modelcalls_gateway_calls_total{") {
			f, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
			n += f
		}
	}
	return int(n)
}

func scrapeCounter(t *testing.T, url, series string) float64 {
	t.Helper()
	_, body := capturetest.Get(t, url)
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, series+" ") {
			f, _ := strconv.ParseFloat(strings.TrimPrefix(line, series+" "), 64)
			return f
		}
	}
	return 0
}

func readCaptureMaps(t *testing.T, dir, id string) []map[string]any {
	t.Helper()
	b := capturetest.ReadFile(t, filepath.Join(dir, id+".capture.jsonl"))
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		m := map[string]any{}
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("capture line: %v", err)
		}
		out = append(out, m)
	}
	return out
}

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// The documented id derivation (docs/otel.md), recomputed here.
func traceIDOf(rollout string) string       { return sha("modelcalls rollout trace " + rollout)[:32] }
func rolloutSpanIDOf(rollout string) string { return sha("modelcalls rollout span " + rollout)[:16] }
func callSpanIDOf(modelCallID string) string {
	return sha("modelcalls call " + modelCallID)[:16]
}

// expectedUsage is what the scripted upstream reports per dialect, in the convention's terms
// (input inclusive of cached and cache-written tokens).
var expectedUsage = map[string]map[string]int64{
	"chat":      {"gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 5, "gen_ai.usage.cache_read.input_tokens": 10, "gen_ai.usage.reasoning.output_tokens": 2},
	"responses": {"gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 6, "gen_ai.usage.cache_read.input_tokens": 20, "gen_ai.usage.reasoning.output_tokens": 3},
	"messages":  {"gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 8, "gen_ai.usage.cache_read.input_tokens": 20, "gen_ai.usage.cache_creation.input_tokens": 13},
}

var usageKeys = []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens",
	"gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.reasoning.output_tokens"}

// checkCallSpans checks one span per sent call, every attribute, against the call and its line.
func checkCallSpans(t *testing.T, spans []otlpSpan, sent []sentCall, lines []map[string]any, rollout, upstream string, live bool) {
	t.Helper()
	byID := map[string]otlpSpan{}
	for _, s := range spans {
		byID[s.str("modelcalls.model_call_id")] = s
	}
	lineOf := map[string]map[string]any{}
	for _, l := range lines {
		lineOf[l["model_call_id"].(string)] = l
	}
	if len(byID) != len(sent) || len(lines) != len(sent) {
		t.Fatalf("%d spans, %d lines for %d calls", len(byID), len(lines), len(sent))
	}
	upHost := strings.TrimPrefix(upstream, "http://")
	upPort, _ := strconv.ParseInt(upHost[strings.LastIndex(upHost, ":")+1:], 10, 64)
	for _, c := range sent {
		name := c.dialect + "/" + c.model
		s, ok := byID[c.modelCallID]
		if !ok {
			t.Errorf("%s: no span for model call %s", name, c.modelCallID)
			continue
		}
		l := lineOf[c.modelCallID]
		if s.resource["service.name"] != "modelcalls" {
			t.Errorf("%s: service.name %v", name, s.resource["service.name"])
		}
		if s.Name != "chat "+c.model || s.Kind != 3 {
			t.Errorf("%s: span %q kind %d, want %q CLIENT(3)", name, s.Name, s.Kind, "chat "+c.model)
		}
		// Identity.
		if s.SpanID != callSpanIDOf(c.modelCallID) {
			t.Errorf("%s: span id %s, want %s", name, s.SpanID, callSpanIDOf(c.modelCallID))
		}
		if c.traceparent != "" && live {
			if s.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || s.ParentSpanID != "00f067aa0ba902b7" {
				t.Errorf("%s: trace %s parent %s, want the client's", name, s.TraceID, s.ParentSpanID)
			}
		} else if s.TraceID != traceIDOf(rollout) || s.ParentSpanID != rolloutSpanIDOf(rollout) {
			t.Errorf("%s: trace %s parent %s, want rollout's %s %s", name, s.TraceID, s.ParentSpanID, traceIDOf(rollout), rolloutSpanIDOf(rollout))
		}
		// Real start and end: the capture line's started_at / completed_at (to the microsecond).
		for _, tc := range []struct{ got, key string }{{s.Start, "started_at"}, {s.End, "completed_at"}} {
			ns, _ := strconv.ParseInt(tc.got, 10, 64)
			if d := float64(ns)/1e9 - l[tc.key].(float64); d > 1e-6 || d < -1e-6 {
				t.Errorf("%s: span %s %d vs line %v", name, tc.key, ns, l[tc.key])
			}
		}
		want := map[string]any{
			"gen_ai.operation.name": "chat", "gen_ai.request.model": c.model,
			"gen_ai.provider.name":   map[string]string{"chat": "openai", "responses": "openai", "messages": "anthropic"}[c.dialect],
			"gen_ai.conversation.id": "sess-" + rollout, "http.response.status_code": int64(c.status),
			"server.address": "127.0.0.1", "server.port": upPort,
			"modelcalls.rollout_id": rollout, "modelcalls.model_call_id": c.modelCallID, "modelcalls.dialect": c.dialect,
			"modelcalls.model_server": "", "modelcalls.stream": c.stream, "modelcalls.response_source": "upstream",
			"modelcalls.upstream_attempted": true, "modelcalls.upstream_status_code": int64(c.status),
		}
		delete(want, "modelcalls.model_server") // the proxy runs without --name: model_ref null, absent
		if ttft, ok := l["latency_ttft_ms"].(float64); ok {
			want["modelcalls.latency_ttft_ms"] = ttft
			if c.stream {
				want["gen_ai.response.time_to_first_chunk"] = ttft / 1000
			}
		}
		okCall := c.errorType == ""
		if okCall {
			want["gen_ai.response.model"] = "up-" + c.dialect
			want["gen_ai.response.id"] = map[string]string{"chat": "chatcmpl-e2e", "responses": "resp_e2e", "messages": "msg_e2e"}[c.dialect]
			for k, v := range expectedUsage[c.dialect] {
				want[k] = v
			}
			switch c.dialect {
			case "chat":
				want["gen_ai.response.finish_reasons"] = []any{"stop"}
			case "messages":
				want["gen_ai.response.finish_reasons"] = []any{"end_turn"}
			case "responses":
				want["modelcalls.response_status"] = "completed"
			}
			want["modelcalls.tool_calls"] = int64(0)
			if s.Status.Code == 2 {
				t.Errorf("%s: span status error", name)
			}
		} else {
			want["error.type"] = c.errorType
			if c.errorType == "rate_limit" {
				want["modelcalls.tool_calls"] = int64(0) // the error body is a JSON object: a response
			}
			if s.Status.Code != 2 {
				t.Errorf("%s: span status %d, want ERROR(2)", name, s.Status.Code)
			}
			if c.errorType == "cancelled" {
				// The stream was cut after message_start: what it reported so far is kept.
				want["gen_ai.response.model"] = "up-messages"
				want["gen_ai.response.id"] = "msg_e2e"
				want["gen_ai.usage.input_tokens"] = int64(40)
				want["gen_ai.usage.output_tokens"] = int64(1)
				want["gen_ai.usage.cache_read.input_tokens"] = int64(20)
				want["gen_ai.usage.cache_creation.input_tokens"] = int64(13)
				want["modelcalls.tool_calls"] = int64(0)
			}
		}
		for k, v := range want {
			if got := s.attr(k); fmt.Sprint(got) != fmt.Sprint(v) {
				t.Errorf("%s: %s = %#v, want %#v", name, k, got, v)
			}
		}
		for k, v := range s.attrs {
			if _, ok := want[k]; !ok && !strings.HasPrefix(k, "gen_ai.input.") && !strings.HasPrefix(k, "gen_ai.output.") && k != "gen_ai.system_instructions" {
				t.Errorf("%s: unexpected attribute %s = %#v", name, k, v)
			}
		}
		for _, k := range usageKeys {
			if _, ok := want[k]; !ok {
				if _, present := s.attrs[k]; present {
					t.Errorf("%s: %s present for an unknown value", name, k)
				}
			}
		}
		// --otlp-content / --content: the messages in the convention's shape.
		var in []struct {
			Role  string `json:"role"`
			Parts []struct {
				Type    string `json:"type"`
				Content string `json:"content"`
			} `json:"parts"`
		}
		if err := json.Unmarshal([]byte(s.str("gen_ai.input.messages")), &in); err != nil || len(in) != 1 || in[0].Role != "user" || len(in[0].Parts) != 1 || in[0].Parts[0].Content != "say hi" {
			t.Errorf("%s: gen_ai.input.messages %q", name, s.str("gen_ai.input.messages"))
		}
		if okCall && !strings.Contains(s.str("gen_ai.output.messages"), `{"type":"text","content":"hi"}`) {
			t.Errorf("%s: gen_ai.output.messages %q", name, s.str("gen_ai.output.messages"))
		}
		if c.dialect == "responses" && s.str("gen_ai.system_instructions") != `[{"type":"text","content":"be brief"}]` {
			t.Errorf("%s: gen_ai.system_instructions %q", name, s.str("gen_ai.system_instructions"))
		}
	}
}

// tokenTotals sums input and output tokens of the capture lines as the scripted upstream reported
// them (expectedUsage), for the calls that reported usage.
func tokenTotals(t *testing.T, lines []map[string]any) (in, out int64) {
	t.Helper()
	for _, l := range lines {
		if l["error_category"] == "rate_limit" {
			continue
		}
		d := l["dialect"].(string)
		if l["error_category"] == "cancelled" {
			in, out = in+40, out+1
			continue
		}
		in += expectedUsage[d]["gen_ai.usage.input_tokens"]
		out += expectedUsage[d]["gen_ai.usage.output_tokens"]
	}
	return in, out
}

var otelListenRE = regexp.MustCompile(` url=http://(127\.0\.0\.1:[0-9]+).* admin_url=http://(127\.0\.0\.1:[0-9]+)`)

// startOTelProxy starts `modelcalls proxy` with an admin listener (p.admin: /metrics; the proxy
// port forwards every path upstream), the extra flags, and short OTel SDK export intervals, and
// waits for the listening line naming both addresses.
func startOTelProxy(t *testing.T, bin, upstream, capDir string, extra ...string) *modelcallsProc {
	t.Helper()
	return startModelcalls(t, bin, modelcallsRun{
		args: append([]string{"proxy", "--upstream", upstream, "--capture-dir", capDir,
			"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, extra...),
		env: []string{"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_METRIC_EXPORT_INTERVAL=200"},
		listening: func(line string) (string, string) {
			if m := otelListenRE.FindStringSubmatch(line); m != nil {
				return "http://" + m[1], "http://" + m[2]
			}
			return "", ""
		},
	})
}

// stopProxy stops p (SIGTERM, then the drain and the export flush) and fails the test unless it
// exits 0: an error for a non-zero exit, fatal for one still running after 60 s.
func stopProxy(t *testing.T, p *modelcallsProc) {
	t.Helper()
	if err := p.stop(); errors.Is(err, errStillRunning) {
		t.Fatalf("proxy did not stop in 60s:\n%s", p.log.String())
	} else if err != nil {
		t.Errorf("proxy exit: %v\n%s", err, p.log.String())
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}
