package otelexport

import (
	"context"
	"errors"
	"fmt"
	"github.com/modelcalls/modelcalls/dialect"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/modelcalls/modelcalls/record"
)

// Protocols accepted by Config.Protocol (the OTEL_EXPORTER_OTLP_PROTOCOL values the Go SDK's
// exporters support for both traces and metrics).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// ScopeName is the instrumentation scope of every span and metric.
const ScopeName = "github.com/modelcalls/modelcalls/otelexport"

// Metric names in the gateway's Prometheus registry (Config.Registerer).
const (
	// MetricSpans counts call spans by result: exported (the endpoint accepted them), failed (the
	// endpoint refused them or could not be reached), dropped (the export queue was full or the
	// gateway stopped before they could be sent) and invalid (the line could not be read back).
	MetricSpans = "modelcalls_gateway_otlp_spans_total"
)

// Config configures an Exporter. The zero value exports over OTLP/HTTP to wherever the standard
// OTEL_EXPORTER_OTLP_* variables say (the SDK exporters read them: endpoint, headers, timeout,
// certificates, compression).
type Config struct {
	// Endpoint is a base URL (as OTEL_EXPORTER_OTLP_ENDPOINT is read): for OTLP/HTTP, /v1/traces
	// and /v1/metrics are appended to its path; for gRPC it names host and port, and http://
	// means no TLS. "" leaves the endpoint to the OTEL_EXPORTER_OTLP_* variables.
	Endpoint string
	// Protocol is ProtocolHTTP or ProtocolGRPC; "" reads OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, then
	// OTEL_EXPORTER_OTLP_PROTOCOL, then defaults to ProtocolHTTP.
	Protocol string
	// Content adds gen_ai.input.messages, gen_ai.output.messages and gen_ai.system_instructions.
	Content bool
	// Upstream, when set, gives server.address and server.port (the model server called).
	Upstream *url.URL
	// Registerer receives MetricSpans; nil registers nowhere.
	Registerer prometheus.Registerer
	// Logger receives export failures and drops, at most one line per LogEvery; nil is
	// slog.Default().
	Logger *slog.Logger
	// QueueCalls and QueueBytes bound the live queue (Enqueue): calls waiting to become spans, and
	// the payload bytes they hold. Zero means DefaultQueueCalls and DefaultQueueBytes.
	QueueCalls int
	QueueBytes int64

	// NoTraces and NoMetrics turn a signal off (as OTEL_TRACES_EXPORTER=none and
	// OTEL_METRICS_EXPORTER=none do, which New honours too, with OTEL_SDK_DISABLED=true for
	// both): without traces the spans are built and discarded (counted exported); without
	// metrics no metric is recorded or sent.
	NoTraces, NoMetrics bool

	// SpanExporter and MetricReader replace the OTLP exporters (tests: tracetest, ManualReader).
	SpanExporter sdktrace.SpanExporter
	MetricReader sdkmetric.Reader
	// Resource replaces the resource built from OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES.
	Resource *resource.Resource
}

// Defaults of the live queue (docs/otel.md).
const (
	DefaultQueueCalls = 1024
	DefaultQueueBytes = 64 << 20
	// LiveDelay is how long the first call queued since the worker's last round waits for the
	// worker (at most; a half-full queue wakes it at once).
	LiveDelay = 20 * time.Millisecond
	// LogEvery is the least time between two log lines about failed or dropped spans.
	LogEvery = 10 * time.Second
)

// Enabled reports whether export is asked for: an endpoint flag, or one of the standard endpoint
// variables set in the environment; and not turned off by OTEL_SDK_DISABLED=true, or by both
// OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER set to none (an invalid value of those leaves it
// on, for New to report).
func Enabled(endpoint string) bool {
	if sig, err := EnvSignals(); err == nil && !sig.Traces && !sig.Metrics {
		return false
	}
	return endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Exporter turns captured calls into GenAI client spans and metrics, batched and exported over
// OTLP. Emit exports one record synchronously into the batch; Enqueue is the live path's
// non-blocking hand-off. Safe for concurrent use.
type Exporter struct {
	cfg    Config
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
	tracer trace.Tracer
	srv    server
	log    *rateLog

	duration, tokens, ttfc metric.Float64Histogram
	setsMu                 sync.Mutex
	sets                   map[metricKey]*metricOpts // the metrics' attribute sets (metricSets)

	spans                              *prometheus.CounterVec
	exported, failed, dropped, invalid atomic.Int64
	cExported, cFailed, cDropped, cInv prometheus.Counter

	queue      chan liveCall
	scratch    workerScratch // the worker's alone
	queueBytes atomic.Int64
	timer      *time.Timer   // wakes the worker LiveDelay after a call queued (armed set)
	armed      atomic.Bool   // timer is set for the calls queued since the worker's last round
	wake       chan struct{} // wakes the worker at once: the queue is half full
	closed     chan struct{} // closed by Shutdown after the queue
	closing    atomic.Bool
	closeOnce  sync.Once
	workerDone chan struct{}
	mu         sync.RWMutex // held shared by Enqueue while it sends, exclusively by Shutdown to close the queue

	// stop ends the span exports in flight when Shutdown's context ends (the gRPC exporter would
	// otherwise retry on its own timeout, past the caller's deadline); inflight counts them and
	// exportDone wakes Shutdown as each returns.
	stop       context.Context
	stopNow    context.CancelCauseFunc
	inflight   atomic.Int64
	exportDone chan struct{}
	errMu      sync.Mutex
	spanErr    error // the last span export's error; nil when it succeeded

	metricsOut *loggedMetricExporter // the OTLP metric exporter; nil with NoMetrics or Config.MetricReader
}

// MetricsRefused returns the error with which the endpoint refused metrics (HTTP 404, 405 or 501,
// gRPC Unimplemented: a traces-only backend), nil when it took them or none were sent. After a
// refusal no metrics are sent again, and they are no failure of Flush or Shutdown.
func (e *Exporter) MetricsRefused() error {
	if e.metricsOut == nil {
		return nil
	}
	if p := e.metricsOut.refused.Load(); p != nil {
		return *p
	}
	return nil
}

// ShutdownError is what Shutdown returns when the spans or the metrics did not all reach the
// endpoint: Spans is the last span export's error when it failed (else the trace provider's),
// Metrics the meter provider's. One of them is nil when only the other failed.
type ShutdownError struct{ Spans, Metrics error }

func (e *ShutdownError) Error() string {
	switch {
	case e.Spans != nil && e.Metrics != nil:
		return fmt.Sprintf("spans: %v; metrics: %v", e.Spans, e.Metrics)
	case e.Spans != nil:
		return "spans: " + e.Spans.Error()
	default:
		return "metrics: " + e.Metrics.Error()
	}
}

func (e *ShutdownError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Spans, e.Metrics} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// New builds the exporter: the OTLP exporters (or cfg's replacements), a tracer provider with a
// batch span processor (its OTEL_BSP_* variables apply), a meter provider with a periodic reader
// (OTEL_METRIC_EXPORT_INTERVAL applies), and the live queue's worker.
func New(ctx context.Context, cfg Config) (*Exporter, error) {
	proto, err := protocol(cfg.Protocol)
	if err != nil {
		return nil, err
	}
	sig, err := EnvSignals()
	if err != nil {
		return nil, err
	}
	cfg.NoTraces = cfg.NoTraces || !sig.Traces
	cfg.NoMetrics = cfg.NoMetrics || !sig.Metrics
	e := &Exporter{cfg: cfg, log: newRateLog(cfg.Logger), exportDone: make(chan struct{}, 1)}
	e.stop, e.stopNow = context.WithCancelCause(context.Background())
	if cfg.Upstream != nil {
		e.srv = upstreamServer(cfg.Upstream)
	}
	se := cfg.SpanExporter
	switch {
	case cfg.NoTraces:
		se = discardSpans{}
	case se == nil:
		if se, err = newSpanExporter(ctx, proto, cfg.Endpoint); err != nil {
			return nil, err
		}
	}
	var readers []sdkmetric.Option
	if !cfg.NoMetrics {
		reader := cfg.MetricReader
		if reader == nil {
			me, err := newMetricExporter(ctx, proto, cfg.Endpoint)
			if err != nil {
				se.Shutdown(ctx)
				return nil, err
			}
			e.metricsOut = &loggedMetricExporter{Exporter: me, log: e.log, warn: cfg.Logger}
			reader = sdkmetric.NewPeriodicReader(e.metricsOut)
		}
		readers = append(readers, sdkmetric.WithReader(reader))
	}
	res := cfg.Resource
	if res == nil {
		// Later options win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the default name.
		res, err = resource.New(ctx,
			resource.WithAttributes(attribute.String("service.name", "modelcalls")),
			resource.WithTelemetrySDK(),
			resource.WithFromEnv())
		if err != nil {
			return nil, fmt.Errorf("otlp resource: %w", err)
		}
	}
	e.tp = sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(idGenerator{}),
		// Every captured call is exported: the capture is a record, not a sample, so a client's
		// unsampled traceparent does not drop it.
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		// Blocking: a full batch queue holds the worker back, and the live queue in front of it
		// counts what cannot wait.
		sdktrace.WithBatcher(&countingExporter{SpanExporter: se, e: e}, sdktrace.WithBlocking()),
	)
	e.mp = sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
	e.tracer = e.tp.Tracer(ScopeName)
	if err := e.initInstruments(); err != nil {
		return nil, err
	}
	e.initCounters(cfg.Registerer)
	n := cfg.QueueCalls
	if n <= 0 {
		n = DefaultQueueCalls
	}
	e.queue = make(chan liveCall, n)
	e.workerDone = make(chan struct{})
	e.wake, e.closed = make(chan struct{}, 1), make(chan struct{})
	e.timer = time.NewTimer(LiveDelay)
	e.timer.Stop()
	go e.worker()
	return e, nil
}

// ResolveProtocol is the protocol an Exporter with Config.Protocol p uses: p, else
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else ProtocolHTTP; an
// unsupported value is an error.
func ResolveProtocol(p string) (string, error) { return protocol(p) }

func protocol(p string) (string, error) {
	if p == "" {
		p = os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	}
	if p == "" {
		p = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch p {
	case "", ProtocolHTTP:
		return ProtocolHTTP, nil
	case ProtocolGRPC:
		return ProtocolGRPC, nil
	}
	return "", fmt.Errorf("otlp protocol %q: want %s or %s", p, ProtocolHTTP, ProtocolGRPC)
}

// checkEndpoint validates a base URL.
func checkEndpoint(endpoint string) (*url.URL, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("otlp endpoint %q: want an absolute http:// or https:// URL with a host", endpoint)
	}
	return u, nil
}

// signalURL is base + "/v1/<signal>", as OTEL_EXPORTER_OTLP_ENDPOINT is read for OTLP/HTTP.
func signalURL(u *url.URL, signal string) string {
	v := *u
	v.Path = strings.TrimSuffix(v.Path, "/") + "/v1/" + signal
	return v.String()
}

// exporterURL is the endpoint URL a signal's exporter gets: "" when endpoint is "" (the SDK then
// reads the OTEL_EXPORTER_OTLP_* variables); for gRPC the endpoint as given; for OTLP/HTTP the
// endpoint with /v1/<signal> appended.
func exporterURL(proto, endpoint, signal string) (string, error) {
	if endpoint == "" {
		return "", nil
	}
	u, err := checkEndpoint(endpoint)
	if err != nil {
		return "", err
	}
	if proto == ProtocolGRPC {
		return u.String(), nil
	}
	if err := checkBaseURL(u, endpoint); err != nil {
		return "", err
	}
	return signalURL(u, signal), nil
}

// otlpSignalPaths are the paths OTLP/HTTP adds to a base URL, one per signal.
var otlpSignalPaths = []string{"/v1/traces", "/v1/metrics", "/v1/logs"}

// checkBaseURL refuses an OTLP/HTTP endpoint that already ends in a signal's path, as the
// per-signal URL of OTEL_EXPORTER_OTLP_TRACES_ENDPOINT does (and as backends' setup pages give
// it): appended again it would be .../v1/traces/v1/traces, refused with 404 call after call.
func checkBaseURL(u *url.URL, endpoint string) error {
	p := strings.TrimSuffix(u.Path, "/")
	for _, sp := range otlpSignalPaths {
		if strings.HasSuffix(p, sp) {
			base := *u
			base.Path = strings.TrimSuffix(p, sp)
			return fmt.Errorf("otlp endpoint %q ends in %s: give the base URL (%s); /v1/traces and /v1/metrics are added to it", endpoint, sp, base.String())
		}
	}
	return nil
}

// endpointURL is the exporter option that sets the endpoint URL u, none when u is empty (the
// exporter's default and the OTEL_EXPORTER_OTLP_* variables then apply).
func endpointURL[O any](u string, withURL func(string) O) []O {
	if u == "" {
		return nil
	}
	return []O{withURL(u)}
}

func newSpanExporter(ctx context.Context, proto, endpoint string) (sdktrace.SpanExporter, error) {
	u, err := exporterURL(proto, endpoint, "traces")
	if err != nil {
		return nil, err
	}
	var se sdktrace.SpanExporter
	if proto == ProtocolGRPC {
		se, err = otlptracegrpc.New(ctx, endpointURL(u, otlptracegrpc.WithEndpointURL)...)
	} else {
		se, err = otlptracehttp.New(ctx, endpointURL(u, otlptracehttp.WithEndpointURL)...)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	return se, nil
}

func newMetricExporter(ctx context.Context, proto, endpoint string) (sdkmetric.Exporter, error) {
	u, err := exporterURL(proto, endpoint, "metrics")
	if err != nil {
		return nil, err
	}
	var me sdkmetric.Exporter
	if proto == ProtocolGRPC {
		me, err = otlpmetricgrpc.New(ctx, endpointURL(u, otlpmetricgrpc.WithEndpointURL)...)
	} else {
		me, err = otlpmetrichttp.New(ctx, endpointURL(u, otlpmetrichttp.WithEndpointURL)...)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp metric exporter: %w", err)
	}
	return me, nil
}

func upstreamServer(u *url.URL) server {
	s := server{address: u.Hostname()}
	if p := u.Port(); p != "" {
		s.port, _ = strconv.Atoi(p)
	} else if u.Scheme == "https" {
		s.port = 443
	} else if u.Scheme == "http" {
		s.port = 80
	}
	return s
}

// Metric instruments, with the bucket boundaries the GenAI conventions advise.
func (e *Exporter) initInstruments() error {
	h, err := NewClientHistograms(e.mp.Meter(ScopeName))
	if err != nil {
		return err
	}
	e.duration, e.tokens, e.ttfc = h.Duration, h.Tokens, h.TimeToFirstChunk
	return nil
}

// ClientHistograms are the GenAI client metrics every exported call records: the operation's
// duration and its time to first chunk (seconds), and its input and output token counts.
type ClientHistograms struct {
	Duration, Tokens, TimeToFirstChunk metric.Float64Histogram
}

// NewClientHistograms creates the three GenAI client histograms on m with the names, units and
// bucket boundaries the GenAI semantic conventions give (gen_ai.client.operation.duration,
// gen_ai.client.token.usage, gen_ai.client.operation.time_to_first_chunk).
func NewClientHistograms(m metric.Meter) (ClientHistograms, error) {
	var h ClientHistograms
	var err error
	seconds := metric.WithExplicitBucketBoundaries(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
	if h.Duration, err = m.Float64Histogram("gen_ai.client.operation.duration",
		metric.WithUnit("s"), metric.WithDescription("GenAI operation duration."), seconds); err != nil {
		return h, fmt.Errorf("otlp metric: %w", err)
	}
	if h.Tokens, err = m.Float64Histogram("gen_ai.client.token.usage",
		metric.WithUnit("{token}"), metric.WithDescription("Number of input and output tokens used."),
		metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)); err != nil {
		return h, fmt.Errorf("otlp metric: %w", err)
	}
	if h.TimeToFirstChunk, err = m.Float64Histogram("gen_ai.client.operation.time_to_first_chunk",
		metric.WithUnit("s"), metric.WithDescription("Time to receive the first chunk of a streamed response."), seconds); err != nil {
		return h, fmt.Errorf("otlp metric: %w", err)
	}
	return h, nil
}

func (e *Exporter) initCounters(reg prometheus.Registerer) {
	e.spans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricSpans,
		Help: "Call spans for OTLP export by result: exported, failed (endpoint refused or unreachable), dropped (queue full or stopped), invalid (line unreadable).",
	}, []string{"result"})
	e.cExported = e.spans.WithLabelValues("exported")
	e.cFailed = e.spans.WithLabelValues("failed")
	e.cDropped = e.spans.WithLabelValues("dropped")
	e.cInv = e.spans.WithLabelValues("invalid")
	if reg != nil {
		reg.MustRegister(e.spans)
	}
}

// Counts are the span results so far (MetricSpans).
type Counts struct{ Exported, Failed, Dropped, Invalid int64 }

// Counts returns the span results so far.
func (e *Exporter) Counts() Counts {
	return Counts{Exported: e.exported.Load(), Failed: e.failed.Load(), Dropped: e.dropped.Load(), Invalid: e.invalid.Load()}
}

func (e *Exporter) countDropped(n int, why string) {
	e.dropped.Add(int64(n))
	e.cDropped.Add(float64(n))
	e.log.warn("otlp export: spans dropped", "reason", why, "dropped_total", e.dropped.Load())
}

// Emit records the span (and metrics) of one captured call of rollout rolloutID into the batch.
// traceparent is the client's W3C traceparent header ("" when none): a valid one makes the span a
// child of the client's span; otherwise the span is in the rollout's trace, child of the rollout
// span (RolloutTraceID, RolloutSpanID). The span id is CallSpanID(model_call_id).
func (e *Exporter) Emit(ctx context.Context, rolloutID string, rec *record.ModelCallRecord, traceparent string) {
	e.emit(ctx, rolloutID, rec, scanPayloads(rec), traceparent, nil)
}

// clientKind is the span kind option of every call span, built once.
var clientKind = trace.WithSpanKind(trace.SpanKindClient)

// emit is Emit with the payloads' models and stream flag already read. With sc (the live worker's
// scratch), the span's attributes are built in its reused slice and the rollout's span context and
// the span name come from its caches; nil builds them afresh.
func (e *Exporter) emit(ctx context.Context, rolloutID string, rec *record.ModelCallRecord, ri requestInfo, traceparent string, sc *workerScratch) {
	parent := trace.SpanContext{}
	if traceparent != "" {
		pctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
		parent = trace.SpanContextFromContext(pctx)
	}
	if !parent.IsValid() {
		parent = sc.rolloutParent(rolloutID)
	}
	sctx := trace.ContextWithRemoteSpanContext(ctx, parent)
	sctx = withIDs(sctx, parent.TraceID(), callSpanID(rolloutID, rec.ModelCallID, rec.CallIndex))

	start, end := callTimes(rec)
	var attrs []attribute.KeyValue
	if sc != nil {
		attrs = sc.attrs[:0]
	} else {
		attrs = make([]attribute.KeyValue, 0, maxCallAttrs)
	}
	attrs = callAttributes(attrs, rolloutID, rec, ri, e.srv)
	if e.cfg.Content {
		in, out, sys, truncated := contentAttributes(rec)
		if in != "" {
			attrs = append(attrs, attribute.String(AttrInputMessages, in))
		}
		if out != "" {
			attrs = append(attrs, attribute.String(AttrOutputMessages, out))
		}
		if sys != "" {
			attrs = append(attrs, attribute.String(AttrSystemInstructions, sys))
		}
		if truncated {
			attrs = append(attrs, attribute.Bool(AttrContentTruncated, true))
		}
	}
	// The attributes go in after the start: trace.WithAttributes would copy them once more into the
	// start options before the span copies them (every call is sampled, so no sampler reads them).
	_, span := e.tracer.Start(sctx, sc.spanName(ri), clientKind, trace.WithTimestamp(start))
	span.SetAttributes(attrs...)
	if rec.ErrorCategory != nil {
		desc := *rec.ErrorCategory
		if rec.LocalResponseReason != nil {
			desc += ": " + *rec.LocalResponseReason
		}
		span.SetStatus(codes.Error, desc)
	}
	span.End(trace.WithTimestamp(end))
	e.record(ctx, rec, ri, end.Sub(start))
	if sc != nil {
		sc.attrs = attrs
	}
}

// callTimes are the call's real start and end (started_at, completed_at); a capture without them
// (foreign writers) gets the export time for the missing ones.
func callTimes(rec *record.ModelCallRecord) (start, end time.Time) {
	now := time.Now()
	start, end = now, now
	if rec.StartedAt != nil {
		start = epoch(*rec.StartedAt)
	}
	if rec.CompletedAt != nil {
		end = epoch(*rec.CompletedAt)
	} else if rec.LatencyTotalMS != nil {
		end = start.Add(time.Duration(*rec.LatencyTotalMS * float64(time.Millisecond)))
	}
	if end.Before(start) {
		end = start
	}
	return start, end
}

func epoch(sec float64) time.Time {
	s := int64(sec)
	return time.Unix(s, int64((sec-float64(s))*1e9))
}

// record adds the call to the three GenAI client histograms. Their attribute sets are built once
// per combination of provider, models and error type (metricSets) and reused.
func (e *Exporter) record(ctx context.Context, rec *record.ModelCallRecord, ri requestInfo, d time.Duration) {
	ms := e.metricSets(rec, ri)
	secs := d.Seconds()
	if rec.LatencyTotalMS != nil {
		secs = *rec.LatencyTotalMS / 1000
	}
	e.duration.Record(ctx, secs, ms.duration...)
	if rec.TokensIn != nil {
		e.tokens.Record(ctx, float64(*rec.TokensIn), ms.input...)
	}
	if rec.TokensOut != nil {
		e.tokens.Record(ctx, float64(*rec.TokensOut), ms.output...)
	}
	if ri.stream && rec.LatencyTTFTMS != nil {
		e.ttfc.Record(ctx, *rec.LatencyTTFTMS/1000, ms.base...)
	}
}

// metricKey is what a call's metric attributes depend on besides the exporter's server.
type metricKey struct {
	provider, requestModel, responseModel, errorType         string
	hasProvider, hasRequestModel, hasResponseModel, hasError bool
}

// metricOpts are the attribute sets of one metricKey, as the option lists Record takes: base
// (operation, provider, models, server), duration (base and error.type), input and output (base and
// gen_ai.token.type). Lists, not single options, so that a Record call passes one without
// allocating its variadic slice.
type metricOpts struct {
	base, duration, input, output []metric.RecordOption
}

// maxMetricSets bounds the cache of attribute sets; past it the cache starts over.
const maxMetricSets = 1024

func (e *Exporter) metricSets(rec *record.ModelCallRecord, ri requestInfo) *metricOpts {
	var k metricKey
	if rec.Dialect != nil {
		k.provider = dialect.Dialect(*rec.Dialect).Provider()
		k.hasProvider = k.provider != ""
	}
	if ri.requestModel != nil {
		k.requestModel, k.hasRequestModel = *ri.requestModel, true
	}
	if ri.responseModel != nil {
		k.responseModel, k.hasResponseModel = *ri.responseModel, true
	}
	if rec.ErrorCategory != nil {
		k.errorType, k.hasError = *rec.ErrorCategory, true
	}
	e.setsMu.Lock()
	defer e.setsMu.Unlock()
	if ms, ok := e.sets[k]; ok {
		return ms
	}
	base := make([]attribute.KeyValue, 0, 8)
	base = append(base, attribute.String(AttrOperationName, OperationChat))
	if k.hasProvider {
		base = append(base, attribute.String(AttrProviderName, k.provider))
	}
	if k.hasRequestModel {
		base = append(base, attribute.String(AttrRequestModel, k.requestModel))
	}
	if k.hasResponseModel {
		base = append(base, attribute.String(AttrResponseModel, k.responseModel))
	}
	if e.srv.address != "" {
		base = append(base, attribute.String(AttrServerAddress, e.srv.address))
		if e.srv.port > 0 {
			base = append(base, attribute.Int(AttrServerPort, e.srv.port))
		}
	}
	with := func(kv ...attribute.KeyValue) []metric.RecordOption {
		return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(append(base[:len(base):len(base)], kv...)...))}
	}
	ms := &metricOpts{base: with(), duration: with(), input: with(attribute.String(AttrTokenType, "input")), output: with(attribute.String(AttrTokenType, "output"))}
	if k.hasError {
		ms.duration = with(attribute.String(AttrErrorType, k.errorType))
	}
	if e.sets == nil || len(e.sets) >= maxMetricSets {
		e.sets = make(map[metricKey]*metricOpts)
	}
	e.sets[k] = ms
	return ms
}

// Flush exports every span recorded so far and the metrics, and returns the first error.
func (e *Exporter) Flush(ctx context.Context) error {
	return errors.Join(e.tp.ForceFlush(ctx), e.mp.ForceFlush(ctx))
}

// Shutdown stops taking live calls, turns the queued ones into spans, exports everything and
// closes the exporters, all within ctx. Calls still queued when ctx ends are counted dropped;
// span exports still in flight then are cancelled and their spans counted failed. Traces and
// metrics shut down concurrently, each with all of ctx. The error is a *ShutdownError.
func (e *Exporter) Shutdown(ctx context.Context) error {
	e.closeOnce.Do(func() {
		e.closing.Store(true)
		e.mu.Lock()
		close(e.queue)
		e.mu.Unlock()
		close(e.closed)
	})
	select {
	case <-e.workerDone:
	case <-ctx.Done():
		// The worker is still turning calls into spans; what is left in the queue is lost.
		if n := len(e.queue); n > 0 {
			e.countDropped(n, "shutdown")
		}
	}
	// At ctx's end the span exports in flight are cancelled: their spans count as failed, with
	// the exporter's last error (a gRPC exporter retrying a refused connection says so).
	stopAfter := context.AfterFunc(ctx, func() { e.stopNow(context.Cause(ctx)) })
	defer stopAfter()
	// Traces and metrics shut down side by side, each with all of ctx.
	var metricsErr error
	metricsDone := make(chan struct{})
	go func() { metricsErr = e.mp.Shutdown(ctx); close(metricsDone) }()
	tracesErr := e.tp.Shutdown(ctx)
	e.waitExports()
	<-metricsDone
	e.errMu.Lock()
	if e.spanErr != nil {
		tracesErr = e.spanErr
	}
	e.errMu.Unlock()
	if errors.Is(tracesErr, context.Canceled) && ctx.Err() != nil && !errors.Is(tracesErr, context.Cause(ctx)) {
		// The export was cancelled above: say why.
		tracesErr = fmt.Errorf("cancelled at the end of shutdown (%w): %w", context.Cause(ctx), tracesErr)
	}
	if tracesErr == nil && metricsErr == nil {
		return nil
	}
	return &ShutdownError{Spans: Brief(tracesErr), Metrics: Brief(metricsErr)}
}

// exportGrace bounds the wait for a cancelled span export to return and count its spans.
const exportGrace = 2 * time.Second

// waitExports waits (at most exportGrace) for the span exports in flight to return; after
// Shutdown's context ended they have been cancelled and return at once.
func (e *Exporter) waitExports() {
	timer := time.NewTimer(exportGrace)
	defer timer.Stop()
	for e.inflight.Load() > 0 {
		select {
		case <-e.exportDone:
		case <-timer.C:
			return
		}
	}
}

// countingExporter counts exported and failed spans on their way to the real exporter.
type countingExporter struct {
	sdktrace.SpanExporter
	e *Exporter
}

func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	c.e.inflight.Add(1)
	defer func() {
		c.e.inflight.Add(-1)
		select {
		case c.e.exportDone <- struct{}{}:
		default:
		}
	}()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(c.e.stop, func() { cancel(context.Cause(c.e.stop)) })()
	err := c.SpanExporter.ExportSpans(ctx, spans)
	n := int64(len(spans))
	if err != nil {
		err = Brief(err)
		c.e.errMu.Lock()
		c.e.spanErr = err
		c.e.errMu.Unlock()
		c.e.failed.Add(n)
		c.e.cFailed.Add(float64(n))
		c.e.log.warn("otlp export: spans failed", "spans", n, "failed_total", c.e.failed.Load(), "err", err)
		return err
	}
	c.e.errMu.Lock()
	c.e.spanErr = nil
	c.e.errMu.Unlock()
	c.e.exported.Add(n)
	c.e.cExported.Add(float64(n))
	return nil
}

// loggedMetricExporter logs (rate-limited) metric exports that fail. An endpoint that refuses
// metrics altogether (metricsRefused) is warned about once, and no metrics are sent to it again.
type loggedMetricExporter struct {
	sdkmetric.Exporter
	log     *rateLog
	warn    *slog.Logger // the once-only warning about a refusal; nil is slog.Default()
	refused atomic.Pointer[error]
}

func (l *loggedMetricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if l.refused.Load() != nil {
		return nil
	}
	raw := l.Exporter.Export(ctx, rm)
	err := Brief(raw)
	if metricsRefused(raw) {
		if l.refused.CompareAndSwap(nil, &err) {
			log := l.warn
			if log == nil {
				log = slog.Default()
			}
			log.Warn("otlp export: the endpoint does not accept metrics (a traces-only backend?); spans are still exported, metrics are not sent again",
				"err", err, "fix", "set OTEL_METRICS_EXPORTER=none to not try")
		}
		return nil
	}
	if err != nil {
		l.log.warn("otlp export: metrics failed", "err", err)
	}
	return err
}

// discardSpans is the span exporter with traces turned off: it takes every span and sends none.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// rateLog writes at most one line per LogEvery; the lines in between are counted and the count
// goes with the next line.
type rateLog struct {
	log        *slog.Logger
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func newRateLog(l *slog.Logger) *rateLog {
	if l == nil {
		l = slog.Default()
	}
	return &rateLog{log: l}
}

func (r *rateLog) warn(msg string, args ...any) {
	r.mu.Lock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < LogEvery {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	r.last = now
	n := r.suppressed
	r.suppressed = 0
	r.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed_lines", n)
	}
	r.log.Warn(msg, args...)
}

// Handle logs an error of the OpenTelemetry SDK (rate-limited, with the export failures): install
// it with otel.SetErrorHandler so the SDK's own reports do not flood the log.
func (e *Exporter) Handle(err error) { e.log.warn("otlp export: sdk error", "err", Brief(err)) }
