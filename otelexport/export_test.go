package otelexport

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/record"
	"github.com/modelcalls/modelcalls/rollout"
)

const modelCallID = "0123456789abcdef0123456789abcdef"

// exchange builds a captured exchange as the gateway writes it.
func exchange(dialect string, request, response string, mod func(ex *capture.Exchange)) *capture.Exchange {
	ex := &capture.Exchange{
		ModelCallID:        modelCallID,
		Dialect:            dialect,
		ModelRef:           &rollout.ModelServerRef{Type: rollout.ModelServerRefType, Name: "policy"},
		StartedAt:          1767225600.25,
		CompletedAt:        1767225601.75,
		LatencyMS:          1500,
		StatusCode:         new(200),
		Request:            json.RawMessage(request),
		ResponseSource:     new("upstream"),
		UpstreamAttempted:  new(true),
		UpstreamStatusCode: new(200),
	}
	if response != "" {
		ex.Response = json.RawMessage(response)
	}
	if mod != nil {
		mod(ex)
	}
	return ex
}

func recordOf(t *testing.T, ex *capture.Exchange) *record.ModelCallRecord {
	t.Helper()
	line, err := capture.EncodeExchange(ex)
	if err != nil {
		t.Fatalf("encode exchange: %v", err)
	}
	rec, err := record.BuildRecord(line, 3)
	if err != nil {
		t.Fatalf("build record: %v", err)
	}
	return rec
}

type harness struct {
	e      *Exporter
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	reg    *prometheus.Registry
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader(), reg: prometheus.NewRegistry()}
	if cfg.SpanExporter == nil {
		cfg.SpanExporter = keepSpans{h.spans}
	}
	cfg.MetricReader = h.reader
	cfg.Registerer = h.reg
	cfg.Resource = resource.Empty()
	e, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.e = e
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	return h
}

func (h *harness) flushSpans(t *testing.T) tracetest.SpanStubs {
	t.Helper()
	if err := h.e.tp.ForceFlush(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}
	return h.spans.GetSpans()
}

func attrMap(kvs []attribute.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

const (
	chatReq       = `{"model":"gpt-x","stream":false,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`
	chatResp      = `{"id":"chatcmpl-1","model":"gpt-x-2026","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"completion_tokens":7,"total_tokens":127,"prompt_tokens_details":{"cached_tokens":100},"completion_tokens_details":{"reasoning_tokens":3}}}`
	messagesReq   = `{"model":"claude-x","stream":true,"system":"be brief","messages":[{"role":"user","content":[{"type":"text","text":"weather?"}]}]}`
	messagesResp  = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x-1","content":[{"type":"thinking","thinking":"look it up"},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":20,"cache_read_input_tokens":30,"cache_creation_input_tokens":40}}`
	responsesReq  = `{"model":"o-x","stream":true,"instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"sum"}]},{"type":"function_call","call_id":"c1","name":"add","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c1","output":"2"}]}`
	responsesResp = `{"id":"resp_1","object":"response","status":"completed","model":"o-x-5","output":[{"type":"reasoning","summary":[{"type":"summary_text","text":"adding"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"2"}]}],"usage":{"input_tokens":50,"output_tokens":5,"total_tokens":55,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":4}}}`
)

func TestCallSpanAttributes(t *testing.T) {
	upstream, _ := url.Parse("http://llm.internal:8000/base")
	tests := []struct {
		name     string
		ex       *capture.Exchange
		spanName string
		want     map[string]any
		status   codes.Code
	}{{
		name:     "chat json",
		ex:       exchange("chat", chatReq, chatResp, func(ex *capture.Exchange) { ex.LatencyTTFTMS = new(250.5); ex.ClientSessionID = new("sess-1") }),
		spanName: "chat gpt-x",
		want: map[string]any{
			AttrOperationName: "chat", AttrProviderName: "openai", AttrRequestModel: "gpt-x", AttrResponseModel: "gpt-x-2026",
			AttrResponseID: "chatcmpl-1", AttrFinishReasons: []string{"stop"},
			AttrInputTokens: int64(120), AttrOutputTokens: int64(7), AttrCacheReadTokens: int64(100), AttrReasoningTokens: int64(3),
			AttrLatencyTTFTMS:  250.5, // not streamed: no gen_ai.response.time_to_first_chunk
			AttrConversationID: "sess-1", AttrHTTPStatusCode: int64(200), AttrServerAddress: "llm.internal", AttrServerPort: int64(8000),
			AttrRolloutID: "r1", AttrModelCallID: modelCallID, AttrDialect: "chat", AttrModelServer: "policy", AttrStream: false,
			AttrResponseSource: "upstream", AttrUpstreamAttempted: true, AttrUpstreamStatusCode: int64(200), AttrToolCalls: int64(0),
		},
	}, {
		name: "messages sse with cache read and write",
		ex: exchange("messages", messagesReq, messagesResp, func(ex *capture.Exchange) {
			ex.LatencyTTFTMS = new(120.0)
			ex.ResponseRaw = new("event: message_start\n...")
		}),
		spanName: "chat claude-x",
		want: map[string]any{
			AttrOperationName: "chat", AttrProviderName: "anthropic", AttrRequestModel: "claude-x", AttrResponseModel: "claude-x-1",
			AttrResponseID: "msg_1", AttrFinishReasons: []string{"tool_use"},
			// Inclusive of cached: 10 + 30 read + 40 written.
			AttrInputTokens: int64(80), AttrOutputTokens: int64(20), AttrCacheReadTokens: int64(30), AttrCacheCreationTokens: int64(40),
			AttrTimeToFirstChunk: 0.12, AttrLatencyTTFTMS: 120.0,
			AttrHTTPStatusCode: int64(200), AttrServerAddress: "llm.internal", AttrServerPort: int64(8000),
			AttrRolloutID: "r1", AttrModelCallID: modelCallID, AttrDialect: "messages", AttrModelServer: "policy", AttrStream: true,
			AttrResponseSource: "upstream", AttrUpstreamAttempted: true, AttrUpstreamStatusCode: int64(200), AttrToolCalls: int64(1),
		},
	}, {
		name:     "responses stream",
		ex:       exchange("responses", responsesReq, responsesResp, func(ex *capture.Exchange) { ex.LatencyTTFTMS = new(80.0) }),
		spanName: "chat o-x",
		want: map[string]any{
			AttrOperationName: "chat", AttrProviderName: "openai", AttrRequestModel: "o-x", AttrResponseModel: "o-x-5",
			AttrResponseID: "resp_1", AttrInputTokens: int64(50), AttrOutputTokens: int64(5), AttrCacheReadTokens: int64(0), AttrReasoningTokens: int64(4),
			AttrTimeToFirstChunk: 0.08, AttrLatencyTTFTMS: 80.0,
			AttrHTTPStatusCode: int64(200), AttrServerAddress: "llm.internal", AttrServerPort: int64(8000),
			AttrRolloutID: "r1", AttrModelCallID: modelCallID, AttrDialect: "responses", AttrModelServer: "policy", AttrStream: true,
			AttrResponseStatus: "completed", AttrResponseSource: "upstream", AttrUpstreamAttempted: true, AttrUpstreamStatusCode: int64(200), AttrToolCalls: int64(0),
		},
	}, {
		name: "upstream error",
		ex: exchange("chat", chatReq, `{"error":{"message":"slow down","type":"rate_limit"}}`, func(ex *capture.Exchange) {
			ex.StatusCode, ex.UpstreamStatusCode, ex.ErrorCategory = new(429), new(429), new("rate_limit")
		}),
		spanName: "chat gpt-x",
		status:   codes.Error,
		want: map[string]any{
			AttrOperationName: "chat", AttrProviderName: "openai", AttrRequestModel: "gpt-x", AttrErrorType: "rate_limit",
			AttrHTTPStatusCode: int64(429), AttrServerAddress: "llm.internal", AttrServerPort: int64(8000),
			AttrRolloutID: "r1", AttrModelCallID: modelCallID, AttrDialect: "chat", AttrModelServer: "policy", AttrStream: false,
			AttrResponseSource: "upstream", AttrUpstreamAttempted: true, AttrUpstreamStatusCode: int64(429), AttrToolCalls: int64(0),
		},
	}, {
		name: "answered locally, nothing known",
		ex: &capture.Exchange{
			ModelCallID: modelCallID, Dialect: "messages", StartedAt: 1767225600, CompletedAt: 1767225600.001,
			StatusCode: new(503), ErrorCategory: new("server_error"), ResponseSource: new("local"),
			UpstreamAttempted: new(false), LocalResponseReason: new("shutting_down"),
		},
		spanName: "chat",
		status:   codes.Error,
		want: map[string]any{
			AttrOperationName: "chat", AttrProviderName: "anthropic", AttrErrorType: "server_error",
			AttrHTTPStatusCode: int64(503), AttrServerAddress: "llm.internal", AttrServerPort: int64(8000),
			AttrRolloutID: "r1", AttrModelCallID: modelCallID, AttrDialect: "messages",
			AttrResponseSource: "local", AttrUpstreamAttempted: false, AttrLocalResponseReason: "shutting_down",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{Upstream: upstream})
			rec := recordOf(t, tt.ex)
			h.e.Emit(context.Background(), "r1", rec, "")
			spans := h.flushSpans(t)
			if len(spans) != 1 {
				t.Fatalf("got %d spans, want 1", len(spans))
			}
			s := spans[0]
			if s.Name != tt.spanName || s.SpanKind != trace.SpanKindClient {
				t.Errorf("span %q kind %v, want %q CLIENT", s.Name, s.SpanKind, tt.spanName)
			}
			if got := attrMap(s.Attributes); !reflect.DeepEqual(got, tt.want) {
				for k, v := range tt.want {
					if !reflect.DeepEqual(got[k], v) {
						t.Errorf("%s = %#v, want %#v", k, got[k], v)
					}
				}
				for k, v := range got {
					if _, ok := tt.want[k]; !ok {
						t.Errorf("unexpected attribute %s = %#v", k, v)
					}
				}
			}
			if s.Status.Code != tt.status {
				t.Errorf("status %v, want %v", s.Status.Code, tt.status)
			}
			wantStart := time.Unix(int64(tt.ex.StartedAt), int64((tt.ex.StartedAt-float64(int64(tt.ex.StartedAt)))*1e9))
			if d := s.StartTime.Sub(wantStart); d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("start %v, want %v", s.StartTime, wantStart)
			}
			if d := s.EndTime.Sub(s.StartTime).Seconds() - (tt.ex.CompletedAt - tt.ex.StartedAt); d < -1e-6 || d > 1e-6 {
				t.Errorf("duration %v, want %vs", s.EndTime.Sub(s.StartTime), tt.ex.CompletedAt-tt.ex.StartedAt)
			}
		})
	}
}

func TestTraceIdentity(t *testing.T) {
	h := newHarness(t, Config{})
	rec := recordOf(t, exchange("chat", chatReq, chatResp, nil))
	h.e.Emit(context.Background(), "r1", rec, "")
	h.e.Emit(context.Background(), "r1", rec, "") // the same call again: the same ids
	const clientTrace, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	h.e.Emit(context.Background(), "r1", rec, "00-"+clientTrace+"-"+clientSpan+"-00") // unsampled: still exported
	h.e.Emit(context.Background(), "r1", rec, "garbage")
	other := recordOf(t, exchange("chat", chatReq, chatResp, func(ex *capture.Exchange) { ex.ModelCallID = strings.Repeat("f", 32) }))
	h.e.Emit(context.Background(), "r2", other, "")
	spans := h.flushSpans(t)
	if len(spans) != 5 {
		t.Fatalf("got %d spans, want 5", len(spans))
	}
	r1Trace, r1Root, callSpan := RolloutTraceID("r1"), RolloutSpanID("r1"), CallSpanID(modelCallID)
	for i, s := range []tracetest.SpanStub{spans[0], spans[1], spans[3]} {
		if s.SpanContext.TraceID() != r1Trace || s.Parent.SpanID() != r1Root || s.SpanContext.SpanID() != callSpan {
			t.Errorf("span %d: trace %s parent %s span %s, want %s %s %s", i, s.SpanContext.TraceID(), s.Parent.SpanID(), s.SpanContext.SpanID(), r1Trace, r1Root, callSpan)
		}
	}
	c := spans[2]
	if c.SpanContext.TraceID().String() != clientTrace || c.Parent.SpanID().String() != clientSpan || c.SpanContext.SpanID() != callSpan || !c.Parent.IsRemote() {
		t.Errorf("traceparent child: trace %s parent %s span %s", c.SpanContext.TraceID(), c.Parent.SpanID(), c.SpanContext.SpanID())
	}
	o := spans[4]
	if o.SpanContext.TraceID() != RolloutTraceID("r2") || o.SpanContext.TraceID() == r1Trace || o.SpanContext.SpanID() == callSpan {
		t.Errorf("other rollout: trace %s span %s", o.SpanContext.TraceID(), o.SpanContext.SpanID())
	}
	// The derivation is part of the export format (a re-export must land on old data): pinned to
	// sha256 of the labelled ids, as `printf 'modelcalls rollout trace r1' | sha256sum` shows.
	if got := RolloutTraceID("r1").String(); got != "cb8acefb71ea22b3d7c979dc8e65f1b1" {
		t.Errorf("RolloutTraceID(r1) = %s", got)
	}
	if got := CallSpanID(modelCallID).String(); got != "5c94e1341deb3d3d" {
		t.Errorf("CallSpanID = %s", got)
	}
}

func TestContent(t *testing.T) {
	cases := []struct {
		name               string
		ex                 *capture.Exchange
		input, output, sys string
	}{{
		name:   "chat",
		ex:     exchange("chat", `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:..."}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},{"role":"tool","tool_call_id":"t1","content":"42"}]}`, chatResp, nil),
		input:  `[{"role":"system","parts":[{"type":"text","content":"be brief"}]},{"role":"user","parts":[{"type":"text","content":"hi"},{"type":"image_url"}]},{"role":"assistant","parts":[{"type":"tool_call","id":"t1","name":"f","arguments":{"x":1}}]},{"role":"tool","parts":[{"type":"tool_call_response","id":"t1","response":"42"}]}]`,
		output: `[{"role":"assistant","parts":[{"type":"text","content":"hello"}],"finish_reason":"stop"}]`,
	}, {
		name:   "messages",
		ex:     exchange("messages", `{"model":"m","system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":[{"type":"tool_use","id":"u1","name":"w","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"u1","content":"sunny"}]}]}`, messagesResp, nil),
		input:  `[{"role":"user","parts":[{"type":"text","content":"weather?"}]},{"role":"assistant","parts":[{"type":"tool_call","id":"u1","name":"w","arguments":{}}]},{"role":"user","parts":[{"type":"tool_call_response","id":"u1","response":"sunny"}]}]`,
		output: `[{"role":"assistant","parts":[{"type":"reasoning","content":"look it up"},{"type":"tool_call","id":"toolu_1","name":"get_weather","arguments":{"city":"Paris"}}],"finish_reason":"tool_use"}]`,
		sys:    `[{"type":"text","content":"be brief"}]`,
	}, {
		name:   "responses",
		ex:     exchange("responses", responsesReq, responsesResp, nil),
		input:  `[{"role":"user","parts":[{"type":"text","content":"sum"}]},{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"add","arguments":{"a":1}}]},{"role":"tool","parts":[{"type":"tool_call_response","id":"c1","response":"2"}]}]`,
		output: `[{"role":"assistant","parts":[{"type":"reasoning","content":"adding"},{"type":"text","content":"2"}],"finish_reason":"stop"}]`,
		sys:    `[{"type":"text","content":"be brief"}]`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, content := range []bool{false, true} {
				h := newHarness(t, Config{Content: content})
				h.e.Emit(context.Background(), "r1", recordOf(t, tc.ex), "")
				got := attrMap(h.flushSpans(t)[0].Attributes)
				if !content {
					for _, k := range []string{AttrInputMessages, AttrOutputMessages, AttrSystemInstructions} {
						if _, ok := got[k]; ok {
							t.Errorf("content off: %s present", k)
						}
					}
					continue
				}
				check := func(k, want string) {
					if want == "" {
						if _, ok := got[k]; ok {
							t.Errorf("%s present: %v", k, got[k])
						}
						return
					}
					if got[k] != want {
						t.Errorf("%s =\n%v\nwant\n%v", k, got[k], want)
					}
				}
				check(AttrInputMessages, tc.input)
				check(AttrOutputMessages, tc.output)
				check(AttrSystemInstructions, tc.sys)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	upstream, _ := url.Parse("https://api.example")
	h := newHarness(t, Config{Upstream: upstream})
	h.e.Emit(context.Background(), "r1", recordOf(t, exchange("chat", chatReq, chatResp, func(ex *capture.Exchange) { ex.LatencyTTFTMS = new(10.0) })), "")
	h.e.Emit(context.Background(), "r1", recordOf(t, exchange("messages", messagesReq, messagesResp, func(ex *capture.Exchange) { ex.LatencyTTFTMS = new(120.0) })), "")
	h.e.Emit(context.Background(), "r1", recordOf(t, exchange("chat", chatReq, "", func(ex *capture.Exchange) {
		ex.StatusCode, ex.ErrorCategory = new(500), new("server_error")
	})), "")
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	hist := map[string]metricdata.Histogram[float64]{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			hist[m.Name] = m.Data.(metricdata.Histogram[float64])
		}
	}
	dur := hist["gen_ai.client.operation.duration"]
	var n uint64
	errored := 0
	for _, dp := range dur.DataPoints {
		n += dp.Count
		if v, ok := dp.Attributes.Value(AttrErrorType); ok && v.AsString() == "server_error" {
			errored++
		}
		if v, _ := dp.Attributes.Value(AttrServerPort); v.AsInt64() != 443 {
			t.Errorf("server.port %v, want 443", v)
		}
	}
	if n != 3 || errored != 1 {
		t.Errorf("duration: %d points over %d series with %d errored, want 3 calls, 1 errored", n, len(dur.DataPoints), errored)
	}
	sums := map[string]float64{}
	for _, dp := range hist["gen_ai.client.token.usage"].DataPoints {
		v, _ := dp.Attributes.Value(AttrTokenType)
		sums[v.AsString()] += dp.Sum
	}
	if sums["input"] != 120+80 || sums["output"] != 7+20 {
		t.Errorf("token usage sums %v, want input 200, output 27", sums)
	}
	ttfc := hist["gen_ai.client.operation.time_to_first_chunk"]
	if len(ttfc.DataPoints) != 1 || ttfc.DataPoints[0].Count != 1 || ttfc.DataPoints[0].Sum != 0.12 {
		t.Errorf("time to first chunk: %+v, want one streamed call of 0.12 s", ttfc.DataPoints)
	}
}

func TestRolloutSpan(t *testing.T) {
	h := newHarness(t, Config{})
	a := *recordOf(t, exchange("chat", chatReq, chatResp, nil))
	b := *recordOf(t, exchange("messages", messagesReq, messagesResp, func(ex *capture.Exchange) {
		ex.StartedAt, ex.CompletedAt, ex.ErrorCategory = 1767225602, 1767225605, new("stream_truncated")
	}))
	h.e.EmitRollout(context.Background(), Rollout{ID: "r1", Calls: []record.ModelCallRecord{a, b}, Reward: new(0.5), TaskIndex: new(int64(7))})
	spans := h.flushSpans(t)
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if s.SpanContext.TraceID() != RolloutTraceID("r1") || s.SpanContext.SpanID() != RolloutSpanID("r1") || s.Parent.IsValid() {
		t.Errorf("root ids: trace %s span %s parent %v", s.SpanContext.TraceID(), s.SpanContext.SpanID(), s.Parent)
	}
	want := map[string]any{
		AttrRolloutID: "r1", AttrRolloutCalls: int64(2), AttrRolloutErrors: int64(1), AttrRolloutInputTokens: int64(200),
		AttrRolloutOutputTokens: int64(27), AttrRolloutCachedTokens: int64(130), AttrRolloutReward: 0.5, AttrRolloutTaskIndex: int64(7),
	}
	if got := attrMap(s.Attributes); !reflect.DeepEqual(got, want) {
		t.Errorf("attributes %v\nwant %v", got, want)
	}
	if s.Name != "rollout r1" || s.StartTime.Unix() != 1767225600 || s.EndTime.Unix() != 1767225605 {
		t.Errorf("span %q %v..%v", s.Name, s.StartTime, s.EndTime)
	}
}

// keepSpans keeps the recorded spans over Shutdown (the in-memory exporter drops them there).
type keepSpans struct{ *tracetest.InMemoryExporter }

func (keepSpans) Shutdown(context.Context) error { return nil }

// blockingExporter holds every export until released, and can fail.
type blockingExporter struct {
	release chan struct{}
	fail    error
	mu      sync.Mutex
	n       int
}

func (b *blockingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.mu.Lock()
	b.n += len(spans)
	b.mu.Unlock()
	return b.fail
}
func (b *blockingExporter) Shutdown(context.Context) error { return nil }

func TestLiveQueue(t *testing.T) {
	t.Run("exported", func(t *testing.T) {
		h := newHarness(t, Config{})
		ex := exchange("chat", chatReq, chatResp, func(ex *capture.Exchange) { ex.ResponseRaw = new("raw") })
		if !h.e.Enqueue("r1", ex, "") {
			t.Fatal("Enqueue refused")
		}
		if err := h.e.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		spans := h.spans.GetSpans()
		if len(spans) != 1 || spans[0].SpanContext.SpanID() != CallSpanID(modelCallID) {
			t.Fatalf("spans %v", spans)
		}
		// The live span equals the one built from the file (Emit of BuildRecord of the line).
		h2 := newHarness(t, Config{})
		h2.e.Emit(context.Background(), "r1", recordOf(t, ex), "")
		if got, want := attrMap(spans[0].Attributes), attrMap(h2.flushSpans(t)[0].Attributes); !reflect.DeepEqual(got, want) {
			t.Errorf("live %v\nfile %v", got, want)
		}
		if c := h.e.Counts(); c.Exported != 1 || c.Dropped+c.Failed != 0 {
			t.Errorf("counts %+v", c)
		}
		if v := testutil.ToFloat64(h.e.spans.WithLabelValues("exported")); v != 1 {
			t.Errorf("%s{result=exported} = %v", MetricSpans, v)
		}
	})
	t.Run("full queue drops, failures counted", func(t *testing.T) {
		be := &blockingExporter{release: make(chan struct{}), fail: errors.New("collector says no")}
		t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "1")
		t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
		h := newHarness(t, Config{SpanExporter: be, QueueCalls: 2})
		const calls = 50
		accepted := 0
		for range calls {
			if h.e.Enqueue("r1", exchange("chat", chatReq, chatResp, nil), "") {
				accepted++
			}
		}
		// At most: 2 queued, 1 in the worker, 1 in the batch queue, 1 being exported.
		if accepted > 5 || accepted < 2 {
			t.Errorf("accepted %d of %d with a stuck exporter", accepted, calls)
		}
		close(be.release)
		if err := h.e.Shutdown(context.Background()); err != nil && !strings.Contains(err.Error(), "collector says no") {
			t.Logf("shutdown: %v", err)
		}
		c := h.e.Counts()
		if c.Dropped != int64(calls-accepted) || c.Failed != int64(accepted) || c.Exported != 0 {
			t.Errorf("counts %+v, want dropped %d failed %d", c, calls-accepted, accepted)
		}
		if v := testutil.ToFloat64(h.e.spans.WithLabelValues("dropped")); v != float64(calls-accepted) {
			t.Errorf("%s{result=dropped} = %v", MetricSpans, v)
		}
		if h.e.Enqueue("r1", exchange("chat", chatReq, chatResp, nil), "") {
			t.Error("Enqueue after Shutdown accepted")
		}
	})
	t.Run("byte budget", func(t *testing.T) {
		h := newHarness(t, Config{QueueBytes: 10})
		if h.e.Enqueue("r1", exchange("chat", chatReq, chatResp, nil), "") {
			t.Error("a call larger than the byte budget was queued")
		}
		if c := h.e.Counts(); c.Dropped != 1 {
			t.Errorf("counts %+v", c)
		}
	})
}

func TestEnabledAndProtocol(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if Enabled("") {
		t.Error("enabled with nothing set")
	}
	if !Enabled("http://127.0.0.1:4318") {
		t.Error("not enabled by the flag")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces")
	if !Enabled("") {
		t.Error("not enabled by OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if p, _ := protocol(""); p != ProtocolGRPC {
		t.Errorf("protocol from env %q", p)
	}
	if _, err := protocol("http/json"); err == nil {
		t.Error("http/json accepted")
	}
	if _, err := New(context.Background(), Config{Endpoint: "127.0.0.1:4318"}); err == nil {
		t.Error("endpoint without scheme accepted")
	}
	for _, tc := range []struct{ endpoint, want string }{
		{"http://127.0.0.1:4318/v1/traces", `otlp endpoint "http://127.0.0.1:4318/v1/traces" ends in /v1/traces: give the base URL (http://127.0.0.1:4318)`},
		{"https://lf.example/api/public/otel/v1/traces/", "give the base URL (https://lf.example/api/public/otel)"},
		{"http://c:4318/v1/metrics", "ends in /v1/metrics"},
	} {
		if _, err := New(context.Background(), Config{Endpoint: tc.endpoint, Protocol: ProtocolHTTP}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("endpoint %s: %v, want an error containing %q", tc.endpoint, err, tc.want)
		}
	}
	u, _ := url.Parse("http://c:4318/base/")
	if got := signalURL(u, "traces"); got != "http://c:4318/base/v1/traces" {
		t.Errorf("signalURL %s", got)
	}
}

// TestShutdownDeadline: span exports still in flight when Shutdown's context ends are cancelled
// and their spans counted failed, with the export's error; the metrics' result is reported apart.
func TestShutdownDeadline(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fail       error // the exporter's answer once released; nil with release = never
		release    bool
		wantFailed int64
		wantSpans  error
	}{
		{"never answers", nil, false, 3, context.DeadlineExceeded},
		{"refuses", errors.New("collector says no"), true, 3, nil},
		{"takes them", nil, true, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := &blockingExporter{release: make(chan struct{}), fail: tc.fail}
			if tc.release {
				close(be.release)
			}
			h := newHarness(t, Config{SpanExporter: be})
			for range 3 {
				h.e.Emit(context.Background(), "r1", recordOf(t, exchange("chat", chatReq, chatResp, nil)), "")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := h.e.Shutdown(ctx)
			c := h.e.Counts()
			if c.Failed != tc.wantFailed || c.Exported != 3-tc.wantFailed {
				t.Errorf("counts %+v at Shutdown's return, want failed %d", c, tc.wantFailed)
			}
			if tc.wantFailed == 0 {
				if err != nil {
					t.Errorf("Shutdown: %v", err)
				}
				return
			}
			var se *ShutdownError
			if !errors.As(err, &se) || se.Spans == nil || se.Metrics != nil {
				t.Fatalf("Shutdown error %#v, want a *ShutdownError with Spans only", err)
			}
			if tc.wantSpans != nil && !errors.Is(se.Spans, tc.wantSpans) {
				t.Errorf("spans error %v, want %v", se.Spans, tc.wantSpans)
			}
			if tc.fail != nil && !errors.Is(se.Spans, tc.fail) {
				t.Errorf("spans error %v, want %v", se.Spans, tc.fail)
			}
		})
	}
}
