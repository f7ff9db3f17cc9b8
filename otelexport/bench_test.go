package otelexport

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/record"
)

// benchExchange is the call the bench's OTLP row sends: a real agent's Responses request (compact)
// and the recorded 2 KiB Responses body, pretty-printed as the upstream sends it and the gateway
// hands it over (the capture line holds it compacted). Both files are the ones `make bench` reads:
// the request from test/bench/testdata (see its SOURCES.md), the body from the repository's
// fixture set (testdata/fixtures).
func benchExchange(b *testing.B) *capture.Exchange {
	b.Helper()
	read := func(name string) string {
		raw, err := os.ReadFile(filepath.FromSlash(name))
		if err != nil {
			b.Fatal(err)
		}
		if !json.Valid(raw) {
			b.Fatalf("%s: not JSON", name)
		}
		return string(raw)
	}
	req := read("../test/bench/testdata/request_responses.json")
	resp := read("../testdata/fixtures/openai_responses/json_reasoning_text_function_call_cached.json")
	return exchange("responses", req, resp, func(ex *capture.Exchange) {
		ex.LatencyTTFTMS = new(1.25)
		ex.ClientSessionID = new("sess-1")
		ex.PayloadsChecked = true // as the gateway hands them over
	})
}

// BenchmarkLiveCall is the worker's cost per captured call (record, span, metrics), without the
// OTLP encoding and send.
func BenchmarkLiveCall(b *testing.B) {
	benchLive(b, Config{SpanExporter: tracetest.NewNoopExporter()})
}

// BenchmarkLivePath is the whole live path per captured call: the hand-off the call's goroutine
// does, the worker's span and metrics, and the batch's OTLP/HTTP encoding and send to a loopback
// receiver that discards the request (its handler's cost is in the total too; -cpuprofile tells
// them apart).
func BenchmarkLivePath(b *testing.B) {
	sink := capturetest.NewServer(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	})
	benchLive(b, Config{Endpoint: sink.URL})
}

// benchLive runs the bench call through the live path of an exporter configured by cfg (metrics to
// a manual reader), flushes it inside the measurement and checks every span went out.
func benchLive(b *testing.B, cfg Config) {
	cfg.MetricReader = sdkmetric.NewManualReader()
	e, err := New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	ex := benchExchange(b)
	b.ReportAllocs()
	stop := reportCPU(b)
	for b.Loop() {
		e.handle(e.newLiveCall("r1", ex, ""))
	}
	if err := e.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	stop()
	if c := e.Counts(); c.Failed+c.Dropped+c.Invalid > 0 {
		b.Fatalf("counts %+v", c)
	}
}

// reportCPU starts counting the process's CPU time (user + system, every goroutine); the function
// it returns reports it per iteration as cpu-ns/op, steadier than ns/op on a shared machine.
func reportCPU(b *testing.B) func() {
	c0 := processCPU()
	return func() { b.ReportMetric(float64(processCPU()-c0)/float64(b.N), "cpu-ns/op") }
}

// benchRecord is the bench call's record and request info, as the worker reads them (handle).
func benchRecord(b *testing.B) (*record.ModelCallRecord, requestInfo) {
	b.Helper()
	rec, _, err := spanRecord(benchExchange(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	ri := scanRequest(rec.Request)
	ri.responseModel = rec.Model
	return rec, ri
}

// BenchmarkSDKFloor is what the OpenTelemetry SDK alone costs per span of the bench call: the span
// BenchmarkLivePath sends (same name, kind, times, attributes and ids), started, ended, batched,
// encoded and sent over OTLP/HTTP by the exporter's own tracer provider, with its attributes built
// once outside the loop and no record, request scan or metrics. BenchmarkLivePath minus this is the
// share of the package's own work.
func BenchmarkSDKFloor(b *testing.B) {
	sink := capturetest.NewServer(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	})
	e, err := New(context.Background(), Config{Endpoint: sink.URL, MetricReader: sdkmetric.NewManualReader()})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	sdkSpans(b, e.tracer)
	if err := e.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	if c := e.Counts(); c.Exported != int64(b.N) {
		b.Fatalf("counts %+v after %d spans", c, b.N)
	}
}

// BenchmarkSDKSpan and BenchmarkSDKBatch split BenchmarkSDKFloor by stage: the span's start,
// attributes and end alone (a span processor that does nothing with it), then with the batch span
// processor handing it to an exporter that discards it (everything but the OTLP encoding and send).
func BenchmarkSDKSpan(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(idGenerator{}), sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(nopProcessor{}))
	defer tp.Shutdown(context.Background())
	sdkSpans(b, tp.Tracer(ScopeName))
}

func BenchmarkSDKBatch(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(idGenerator{}), sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(tracetest.NewNoopExporter(), sdktrace.WithBlocking()))
	defer tp.Shutdown(context.Background())
	sdkSpans(b, tp.Tracer(ScopeName))
	tp.ForceFlush(context.Background())
}

// nopProcessor is a span processor that does nothing.
type nopProcessor struct{}

func (nopProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (nopProcessor) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (nopProcessor) Shutdown(context.Context) error                  { return nil }
func (nopProcessor) ForceFlush(context.Context) error                { return nil }

// sdkSpans starts and ends b.N spans like the bench call's through tr, the attributes built once,
// and reports the CPU time per span.
func sdkSpans(b *testing.B, tr trace.Tracer) {
	rec, ri := benchRecord(b)
	attrs := callAttributes(nil, "r1", rec, ri, server{address: "127.0.0.1", port: 8000})
	start, end := callTimes(rec)
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: RolloutTraceID("r1"), SpanID: RolloutSpanID("r1"), TraceFlags: trace.FlagsSampled, Remote: true})
	sid := callSpanID("r1", rec.ModelCallID, 0)
	name := spanName(ri)
	b.ReportAllocs()
	stop := reportCPU(b)
	for b.Loop() {
		ctx := withIDs(trace.ContextWithRemoteSpanContext(context.Background(), parent), parent.TraceID(), sid)
		_, span := tr.Start(ctx, name, clientKind, trace.WithTimestamp(start))
		span.SetAttributes(attrs...)
		span.End(trace.WithTimestamp(end))
	}
	stop()
}

// BenchmarkSpanRecord and BenchmarkRequestScan are the package's two largest steps per call of the
// bench call: the record read from the response (spanRecord), and the request's model and stream
// (scanRequest).
func BenchmarkSpanRecord(b *testing.B) {
	ex := benchExchange(b)
	var buf []byte
	b.ReportAllocs()
	stop := reportCPU(b)
	for b.Loop() {
		_, buf, _ = spanRecord(ex, buf)
	}
	stop()
}

func BenchmarkRequestScan(b *testing.B) {
	ex := benchExchange(b)
	b.ReportAllocs()
	stop := reportCPU(b)
	for b.Loop() {
		scanRequest(ex.Request)
	}
	stop()
}

// BenchmarkLiveMetrics is the worker's metrics step per call of the bench call: the three GenAI
// client histograms recorded with the call's cached attribute sets (aggregation into a manual
// reader, no export).
func BenchmarkLiveMetrics(b *testing.B) {
	e, err := New(context.Background(), Config{SpanExporter: tracetest.NewNoopExporter(), MetricReader: sdkmetric.NewManualReader()})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	rec, ri := benchRecord(b)
	b.ReportAllocs()
	stop := reportCPU(b)
	for b.Loop() {
		e.record(context.Background(), rec, ri, time.Millisecond)
	}
	stop()
}
