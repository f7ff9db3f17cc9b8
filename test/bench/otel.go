package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/cputime"
	"github.com/modelcalls/modelcalls/otelexport"
)

// Live OTLP export goals: what exporting every captured call as a span may add to capture on.
const (
	goalOTelAddedP50 = 20 * time.Microsecond // 1-client p50, export on vs off
	goalOTelCPU      = 1.10                  // CPU per concurrent call, export on / off
)

const (
	sOTelOff = "gateway, capture on, OTLP export off"
	sOTelOn  = "gateway, capture on, OTLP export on"
)

// otelResult is row 7: capture on with live OTLP export off and on, each gateway in its own child
// process, interleaved.
type otelResult struct {
	off, on subjectStats
	// offGC and onGC are the garbage collector's CPU time in the concurrent batches (-1: unknown).
	offGC, onGC         time.Duration
	offAllocs, onAllocs int64
	counts              otelexport.Counts
	block               int // one-client calls per subject per block
	// pairs are the paired block differences of the one-client p50, on - off, over every block of
	// every round (the figure the goal is judged on is their median); roundAdded and roundCPU are
	// each round's median of them and CPU ratio (concurrent), to show how far the figures move from
	// round to round.
	pairs      []time.Duration
	roundAdded []time.Duration
	roundCPU   []float64
	variants   []otelVariantResult
}

// otelFloorVariant names the built-in variant every run measures: otelStageSDK, the SDK's floor.
const otelFloorVariant = "sdk-floor"

// floor is the built-in floor variant's result, nil when absent.
func (o *otelResult) floor() *otelVariantResult {
	for i := range o.variants {
		if o.variants[i].name == otelFloorVariant {
			return &o.variants[i]
		}
	}
	return nil
}

// otelVariantResult is an extra export-on subject (otelVariantsEnv) against the same export-off one.
type otelVariantResult struct {
	name   string
	st     subjectStats
	gc     time.Duration
	allocs int64
	pairs  []time.Duration // paired block differences against export off
}

// addedP50 is the figure of the one-client goal: the median of the paired block differences.
func (o *otelResult) addedP50() time.Duration { return medianDuration(o.pairs) }

// medianCI is a 95% confidence interval of the median of d: the 2.5th and 97.5th percentiles of
// the medians of 2000 resamples of d with replacement (a bootstrap; the seed is fixed, so one set of
// pairs always gives one interval).
func medianCI(d []time.Duration) (lo, hi time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	const n = 2000
	rng := rand.New(rand.NewPCG(1, 2))
	meds := make([]time.Duration, n)
	s := make([]time.Duration, len(d))
	for i := range meds {
		for j := range s {
			s[j] = d[rng.IntN(len(d))]
		}
		meds[i] = medianDuration(s)
	}
	slices.Sort(meds)
	return meds[n*25/1000], meds[n*975/1000-1]
}

// medianDuration is the median of d (the mean of the two middle values for an even count); 0 when
// empty.
func medianDuration(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Paths the row's child gateways serve beside the gateway (otelChildHandler).
const (
	otelCPUPath   = "/__bench/otel/cpu"   // GET: the child's CPU time so far and the garbage collector's share of it, in ns: "CPU GC ALLOCATED" (the last in bytes)
	otelFlushPath = "/__bench/otel/flush" // POST: export every span recorded so far (export on)
	otelCountPath = "/__bench/otel/count" // GET: the exporter's span counts as JSON (export on)
)

// otelSeqBlock is how many one-client calls a subject makes before the next takes over;
// otelSeqFactor multiplies the plan's one-client calls per round (row 7's goal is a few
// hundredths of a millisecond on a call of about 1.5 ms whose fsync varies by tenths: it needs
// more pairs than the other rows); otelConcSlices is how many alternating concurrent batches share
// a round's batch time.
const (
	otelSeqBlock   = 50
	otelSeqFactor  = 2
	otelConcSlices = 3
)

// otelVariantsEnv adds export-on subjects to row 7, measured interleaved with the other two and
// reported beside them (not judged): entries separated by ";", each "NAME[@BINARY] [VAR=VALUE ...]":
// the child runs BINARY (a bench binary built from another commit, `go build -o BINARY
// ./test/bench`) instead of this one, with the variables added to its environment. For A/B
// comparisons of exporter changes or OTEL_* settings within one run.
const otelVariantsEnv = "MODELCALLS_BENCH_OTEL_VARIANTS"

// otelSubject is one child gateway of row 7 and what it measured.
type otelSubject struct {
	name   string
	tag    string // file names
	exe    string // "" runs this binary
	env    []string
	export bool
	s      *subject
	st     subjectStats
	gc     time.Duration   // the garbage collector's CPU time in the concurrent batches; -1: unknown
	allocs int64           // bytes allocated in the concurrent batches; -1: unknown
	blocks []time.Duration // p50 of each one-client block, in block order
}

// gcCell renders the garbage collector's CPU time and the bytes allocated per concurrent call.
func gcCell(gc time.Duration, allocs int64, st *subjectStats) string {
	if gc < 0 || st.calls == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s, %.1f KiB", us(gc/time.Duration(st.calls)), float64(allocs)/1024/float64(st.calls))
}

// parseOTelVariants reads otelVariantsEnv.
func parseOTelVariants(spec, recvURL string) ([]*otelSubject, error) {
	var out []*otelSubject
	for i, entry := range strings.Split(spec, ";") {
		f := strings.Fields(entry)
		if len(f) == 0 {
			continue
		}
		name, exe, _ := strings.Cut(f[0], "@")
		if name == "" || strings.Contains(name, "=") {
			return nil, fmt.Errorf("%s: entry %q does not start with a name: %w", otelVariantsEnv, entry, errUnexpected)
		}
		v := &otelSubject{name: name, tag: fmt.Sprintf("v%d", i), exe: exe, export: true,
			env: append(otelOnEnv(recvURL), f[1:]...)}
		for _, kv := range f[1:] {
			if !strings.Contains(kv, "=") {
				return nil, fmt.Errorf("%s: %q is not VAR=VALUE: %w", otelVariantsEnv, kv, errUnexpected)
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// otelOnEnv is the environment of an export-on child: OTLP/HTTP to the receiver.
func otelOnEnv(recvURL string) []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recvURL, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"}
}

// runOTelRow measures live export: two capture-on gateways in front of the same upstream, each in a
// child process (`bench -child gateway-otel`), one with an otelexport.Exporter sending OTLP/HTTP to
// a loopback receiver in this process that reads and discards each request. CPU per call is the
// child's own CPU time (its getrusage), so neither the clients, the upstream nor the receiver (the
// Collector's stand-in) count: the figure is the gateway process's. The one-client calls alternate
// between the gateways in blocks of otelSeqBlock calls, the order reversed from block to block
// (ABBA), so drifts of a shared machine (the fsync time above all, which dominates a captured call)
// fall on both alike; the added p50 is the median over all blocks of the difference between the
// export-on block's p50 and the export-off block's next to it, which a disturbance of a few blocks
// (another process's burst) moves by little. The concurrent batch time of a round is split into
// otelConcSlices alternating batches for the same reason (the CPU time a call costs moves with the
// machine's other load). The export-on batches end with a flush of the exporter inside the CPU
// window, so the export work of a batch's calls is charged to it.
func (r *runner) runOTelRow(ctx context.Context) error {
	recv, err := serve(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		w.WriteHeader(http.StatusOK)
	}))
	if err != nil {
		return err
	}
	defer recv.close()
	res := &otelResult{block: otelSeqBlock}
	subs := []*otelSubject{
		{name: sOTelOff, tag: "off", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="}},
		{name: sOTelOn, tag: "on", env: otelOnEnv(recv.url), export: true},
		// The SDK's floor, in every run: what the CPU goal leaves to the package is what export on
		// costs above it.
		{name: otelFloorVariant, tag: "floor", env: append(otelOnEnv(recv.url), otelStageEnv+"="+otelStageSDK), export: true},
	}
	variants, err := parseOTelVariants(os.Getenv(otelVariantsEnv), recv.url)
	if err != nil {
		return err
	}
	subs = append(subs, variants...)
	for _, x := range subs {
		dir := filepath.Join(r.workDir, "otel-"+x.tag)
		env := append(slices.Clone(x.env), otelVariantsEnv+"=")
		if f := flag.Lookup("cpuprofile"); f != nil && f.Value.String() != "" {
			env = append(env, otelProfileEnv+"="+f.Value.String()+".otel-"+x.tag)
		} else {
			env = append(env, otelProfileEnv+"=")
		}
		var c *child
		if x.exe == "" {
			c, err = startChild("gateway-otel", r.up.url, dir, env...)
		} else {
			c, err = startChildExe(x.exe, "gateway-otel", r.up.url, dir, env...)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", x.name, err)
		}
		defer c.stop()
		x.s = newSubject(x.name, c.url, true)
		defer x.s.closeIdle()
	}
	off, on := subs[0], subs[1]
	for _, x := range subs { // the same warm-up for every subject, not recorded
		if _, err := x.s.sequential(ctx, r.fx, "otel1", 20); err != nil {
			return err
		}
		if _, err := x.s.concurrent(ctx, r.fx, r.workers, 100*time.Millisecond, r.ownFile); err != nil {
			return err
		}
		if x.export {
			if _, err := x.s.benchPost(ctx, otelFlushPath); err != nil {
				return fmt.Errorf("otlp flush: %w", err)
			}
		}
	}
	for round := range r.rounds {
		o := subs
		if round%2 == 1 {
			o = reversed(subs)
		}
		b0 := len(off.blocks)
		seqCalls := r.seqCalls * otelSeqFactor
		for b := 0; b*otelSeqBlock < seqCalls; b++ {
			bo := o
			if b%2 == 1 {
				bo = reversed(o)
			}
			for _, x := range bo {
				seq, err := x.s.sequential(ctx, r.fx, "otel1", min(otelSeqBlock, seqCalls-b*otelSeqBlock))
				if err != nil {
					return err
				}
				x.st.seq = append(x.st.seq, seq.lat...)
				x.blocks = append(x.blocks, seq.lat.pct(50))
			}
		}
		for i := b0; i < len(off.blocks); i++ {
			res.pairs = append(res.pairs, on.blocks[i]-off.blocks[i])
		}
		res.roundAdded = append(res.roundAdded, medianDuration(res.pairs[b0:]))
		roundCPU, roundCalls := map[*otelSubject]time.Duration{}, map[*otelSubject]int{}
		for slice := range otelConcSlices {
			so := o
			if slice%2 == 1 {
				so = reversed(o)
			}
			for _, x := range so {
				c0, err := x.s.childCPU(ctx)
				if err != nil {
					return err
				}
				conc, err := x.s.concurrent(ctx, r.fx, r.workers, r.concDur/otelConcSlices, r.ownFile)
				if err != nil {
					return err
				}
				if x.export {
					if _, err := x.s.benchPost(ctx, otelFlushPath); err != nil {
						return fmt.Errorf("otlp flush: %w", err)
					}
				}
				c1, err := x.s.childCPU(ctx)
				if err != nil {
					return err
				}
				x.st.cpu += c1.cpu - c0.cpu
				if c0.gc < 0 || c1.gc < 0 {
					x.gc, x.allocs = -1, -1
				} else if x.gc >= 0 {
					x.gc += c1.gc - c0.gc
					x.allocs += c1.allocs - c0.allocs
				}
				roundCPU[x] += c1.cpu - c0.cpu
				roundCalls[x] += conc.calls
				x.st.addConc(conc)
			}
		}
		perCall := func(x *otelSubject) float64 { return float64(roundCPU[x]) / float64(max(1, roundCalls[x])) }
		res.roundCPU = append(res.roundCPU, perCall(on)/max(1, perCall(off)))
		r.logf("  round %d/%d: added p50 %s ms (median of %d block pairs), CPU per call %.2fx", round+1, r.rounds,
			msSigned(res.roundAdded[round]), len(off.blocks)-b0, res.roundCPU[round])
	}
	if _, err := on.s.benchPost(ctx, otelFlushPath); err != nil {
		return fmt.Errorf("otlp flush: %w", err)
	}
	b, err := on.s.benchGet(ctx, otelCountPath)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &res.counts); err != nil {
		return fmt.Errorf("otlp counts: %w", err)
	}
	res.off, res.on, res.offGC, res.onGC, res.offAllocs, res.onAllocs = off.st, on.st, off.gc, on.gc, off.allocs, on.allocs
	for _, v := range subs[2:] {
		vr := otelVariantResult{name: v.name, st: v.st, gc: v.gc, allocs: v.allocs}
		for i := range off.blocks {
			vr.pairs = append(vr.pairs, v.blocks[i]-off.blocks[i])
		}
		res.variants = append(res.variants, vr)
	}
	r.otel = res
	return nil
}

// otelProfileEnv names the file a row-7 child writes its CPU profile to (its whole life): the run's
// -cpuprofile FILE with ".otel-off" or ".otel-on" appended, so the two gateways' profiles can be
// compared (the run's own profile holds the clients, the upstream and the receiver, not them).
const otelProfileEnv = "MODELCALLS_BENCH_CHILD_CPUPROFILE"

// otelChildHandler is the gateway a row-7 child serves (`bench -child gateway-otel`): the capture-on
// gateway of gatewayHandler, with live OTLP export when OTEL_EXPORTER_OTLP_ENDPOINT is set (as
// `modelcalls proxy` reads it), plus otelCPUPath, otelFlushPath and otelCountPath. stop drains the
// gateway, then shuts the exporter down.
func otelChildHandler(upstreamURL, captureDir string) (http.Handler, func(), error) {
	stopProfile := func() {}
	if path := os.Getenv(otelProfileEnv); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("child cpu profile: %w", err)
		}
		stopProfile = func() { pprof.StopCPUProfile(); f.Close() }
	}
	h, stopGW, err := gatewayHandler(upstreamURL, captureDir, true)
	if err != nil {
		stopProfile()
		return nil, nil, err
	}
	var exp *otelexport.Exporter
	var floor *sdkFloor
	if otelexport.Enabled("") {
		gw := h.(*gateway.Handler)
		upURL, _ := url.Parse(upstreamURL)
		cfg := otelexport.Config{Upstream: upURL, Registerer: gw.Registry()}
		switch stage := os.Getenv(otelStageEnv); stage {
		case "":
		case otelStageDiscard:
			cfg.SpanExporter = discardSpans{}
		case otelStageSDK, otelStageSDKDiscard:
			floor, err = newSDKFloor(context.Background(), upURL, stage == otelStageSDKDiscard)
		default:
			err = fmt.Errorf("%s=%q: want %s, %s or %s: %w", otelStageEnv, stage, otelStageDiscard, otelStageSDK, otelStageSDKDiscard, errUnexpected)
		}
		if err == nil && floor == nil {
			exp, err = otelexport.New(context.Background(), cfg)
		}
		if err != nil {
			stopGW()
			stopProfile()
			return nil, nil, err
		}
		if floor != nil {
			gw.OnCaptured = floor.span
		} else {
			gw.OnCaptured = func(c gateway.CapturedCall) { exp.Enqueue(c.RolloutID, c.Exchange, c.Traceparent) }
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc(otelCPUPath, func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "%d %d %d\n", cputime.Process().Nanoseconds(), gcCPU().Nanoseconds(), heapAllocs())
	})
	mux.HandleFunc(otelFlushPath, func(w http.ResponseWriter, req *http.Request) {
		var err error
		switch {
		case exp != nil:
			err = exp.Flush(req.Context())
		case floor != nil:
			floor.round() // the calls still queued
			err = errors.Join(floor.tp.ForceFlush(req.Context()), floor.mp.ForceFlush(req.Context()))
		default:
			http.Error(w, "export off", http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
	})
	mux.HandleFunc(otelCountPath, func(w http.ResponseWriter, _ *http.Request) {
		if exp == nil {
			http.Error(w, "export off", http.StatusNotFound)
			return
		}
		json.NewEncoder(w).Encode(exp.Counts())
	})
	mux.Handle("/", h)
	stop := func() {
		stopGW()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if exp != nil {
			exp.Shutdown(ctx)
		}
		if floor != nil {
			floor.tp.Shutdown(ctx)
			floor.mp.Shutdown(ctx)
		}
		stopProfile()
	}
	return mux, stop, nil
}

// otelStageEnv makes a row-7 export-on child (a variant, otelVariantsEnv) do only some stages of
// the export, so that the variants' CPU per call against export off splits the export's cost in
// the gateway process itself (reported, not judged):
//
//	discard      the exporter as configured, but its spans go to an exporter that discards them:
//	             everything but the OTLP encoding (transform, protobuf) and the HTTP send
//	sdk          no otelexport: each captured call gets one span and its three histogram records
//	             from the SDK alone (a batch span processor, a periodic metric reader, the
//	             official OTLP/HTTP exporters), made in rounds on one goroutine as otelexport
//	             makes them, with the attributes of the first call's real span: the SDK's floor,
//	             without our record, request scan, attribute building or queue
//	sdk-discard  sdk with a span exporter that discards and a metric reader that never collects:
//	             the SDK's span start, attributes, end, batch processor and histogram records
//	             alone
const otelStageEnv = "MODELCALLS_BENCH_OTEL_STAGE"

const (
	otelStageDiscard    = "discard"
	otelStageSDK        = "sdk"
	otelStageSDKDiscard = "sdk-discard"
)

// discardSpans is a span exporter that accepts and drops every batch.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// sdkFloor is the otelStageSDK child's span source: the SDK alone. Like otelexport's live queue,
// the calls' goroutines only hand their times over, and one goroutine makes the spans of all the
// calls queued since its last round, otelexport.LiveDelay after the first of them, so that the
// SDK's work runs where otelexport runs it (one goroutine, in rounds) and the figure is the SDK's,
// not that of 64 goroutines contending for its batch queue.
//
// Each call also records the three GenAI client histograms otelexport records (their names and
// bucket counts, the attribute sets built once from the first span's), into a meter provider with
// the official OTLP/HTTP metric exporter (sdk-discard: a reader that never collects).
type sdkFloor struct {
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
	tracer trace.Tracer
	upURL  *url.URL
	once   sync.Once
	name   string
	kind   trace.SpanStartOption
	attrs  []attribute.KeyValue
	err    error

	duration, tokens, ttfc    metric.Float64Histogram
	base, input, output       []metric.RecordOption
	secs, tokensIn, tokensOut float64
	ttfcSecs                  float64
	stream                    bool

	mu             sync.Mutex
	pending, spare [][2]time.Time // start and end of the calls queued for the next round
	armed          bool
}

func newSDKFloor(ctx context.Context, upURL *url.URL, discard bool) (*sdkFloor, error) {
	var se sdktrace.SpanExporter = discardSpans{}
	if !discard {
		var err error
		if se, err = otlptracehttp.New(ctx); err != nil {
			return nil, fmt.Errorf("otlp trace exporter: %w", err)
		}
	}
	var reader sdkmetric.Reader = sdkmetric.NewManualReader()
	if !discard {
		me, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("otlp metric exporter: %w", err)
		}
		reader = sdkmetric.NewPeriodicReader(me)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(se, sdktrace.WithBlocking()))
	f := &sdkFloor{tp: tp, mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), tracer: tp.Tracer(otelexport.ScopeName), upURL: upURL}
	h, err := otelexport.NewClientHistograms(f.mp.Meter(otelexport.ScopeName))
	if err != nil {
		return nil, err
	}
	f.duration, f.tokens, f.ttfc = h.Duration, h.Tokens, h.TimeToFirstChunk
	return f, nil
}

// learn takes the span's name, kind and attributes, and the metrics' attribute sets and values,
// from the span otelexport makes of c.
func (f *sdkFloor) learn(c gateway.CapturedCall) error {
	var err error
	if f.name, f.kind, f.attrs, err = firstSpan(c, f.upURL); err != nil {
		return err
	}
	var base []attribute.KeyValue
	for _, kv := range f.attrs {
		switch kv.Key {
		case otelexport.AttrOperationName, otelexport.AttrProviderName, otelexport.AttrRequestModel, otelexport.AttrResponseModel,
			otelexport.AttrServerAddress, otelexport.AttrServerPort:
			base = append(base, kv)
		case otelexport.AttrInputTokens:
			f.tokensIn = float64(kv.Value.AsInt64())
		case otelexport.AttrOutputTokens:
			f.tokensOut = float64(kv.Value.AsInt64())
		case otelexport.AttrTimeToFirstChunk:
			f.ttfcSecs = kv.Value.AsFloat64()
		case otelexport.AttrStream:
			f.stream = kv.Value.AsBool()
		}
	}
	with := func(kv ...attribute.KeyValue) []metric.RecordOption {
		return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(append(base[:len(base):len(base)], kv...)...))}
	}
	f.base = with()
	f.input = with(attribute.String(otelexport.AttrTokenType, "input"))
	f.output = with(attribute.String(otelexport.AttrTokenType, "output"))
	f.secs = c.End.Sub(c.Start).Seconds()
	return nil
}

// span is the sdk stage's OnCaptured. The first call learns the span's name, kind and attributes
// from the real exporter (into an in-memory exporter); every call, the first included, is then
// queued for a span like it with the call's start and end.
func (f *sdkFloor) span(c gateway.CapturedCall) {
	f.once.Do(func() {
		if f.err = f.learn(c); f.err != nil {
			fmt.Fprintln(os.Stderr, "bench child: sdk stage:", f.err)
		}
	})
	if f.err != nil {
		return
	}
	f.mu.Lock()
	f.pending = append(f.pending, [2]time.Time{c.Start, c.End})
	if !f.armed {
		f.armed = true
		time.AfterFunc(otelexport.LiveDelay, f.round)
	}
	f.mu.Unlock()
}

// round starts and ends the spans of the calls queued.
func (f *sdkFloor) round() {
	f.mu.Lock()
	calls := f.pending
	f.pending, f.spare, f.armed = f.spare[:0], nil, false
	f.mu.Unlock()
	for _, t := range calls {
		_, s := f.tracer.Start(context.Background(), f.name, f.kind, trace.WithTimestamp(t[0]))
		s.SetAttributes(f.attrs...)
		s.End(trace.WithTimestamp(t[1]))
		ctx := context.Background()
		f.duration.Record(ctx, f.secs, f.base...)
		f.tokens.Record(ctx, f.tokensIn, f.input...)
		f.tokens.Record(ctx, f.tokensOut, f.output...)
		if f.stream {
			f.ttfc.Record(ctx, f.ttfcSecs, f.base...)
		}
	}
	f.mu.Lock()
	if f.spare == nil {
		f.spare = calls
	}
	f.mu.Unlock()
}

// firstSpan is the name, kind and attributes of the span otelexport makes of c.
func firstSpan(c gateway.CapturedCall, upURL *url.URL) (string, trace.SpanStartOption, []attribute.KeyValue, error) {
	mem := keptSpans{tracetest.NewInMemoryExporter()}
	e, err := otelexport.New(context.Background(), otelexport.Config{Upstream: upURL, SpanExporter: mem, MetricReader: sdkmetric.NewManualReader()})
	if err != nil {
		return "", nil, nil, err
	}
	e.Enqueue(c.RolloutID, c.Exchange, c.Traceparent)
	if err := e.Shutdown(context.Background()); err != nil {
		return "", nil, nil, err
	}
	spans := mem.GetSpans()
	if len(spans) != 1 {
		return "", nil, nil, fmt.Errorf("first span: got %d spans: %w", len(spans), errUnexpected)
	}
	return spans[0].Name, trace.WithSpanKind(spans[0].SpanKind), spans[0].Attributes, nil
}

// keptSpans is an in-memory exporter whose spans outlive its shutdown.
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

// childCPU reads the CPU time a row-7 child has used so far, the garbage collector's share of it and
// the bytes it allocated (otelCPUPath).
func (s *subject) childCPU(ctx context.Context) (childCPU, error) {
	var c childCPU
	b, err := s.benchGet(ctx, otelCPUPath)
	if err != nil {
		return c, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return c, fmt.Errorf("%s cpu: empty answer: %w", s.name, errUnexpected)
	}
	n := make([]int64, len(f))
	for i := range f {
		if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return c, fmt.Errorf("%s cpu: %w", s.name, err)
		}
	}
	c.cpu, c.gc, c.allocs = time.Duration(n[0]), -1, -1
	if len(n) == 3 {
		c.gc, c.allocs = time.Duration(n[1]), n[2]
	}
	return c, nil
}

// childCPU is one reading of a row-7 child's counters; gc and allocs are -1 when the child does
// not report them (a variant built before it did).
type childCPU struct {
	cpu, gc time.Duration
	allocs  int64
}

// gcCPU is the CPU time this process's garbage collector has used so far, as the runtime estimates
// it (runtime/metrics /cpu/classes/gc/total:cpu-seconds: mark workers, assists and pauses).
func gcCPU() time.Duration {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return time.Duration(s[0].Value.Float64() * 1e9)
}

// heapAllocs is the bytes this process has allocated on the heap so far (runtime/metrics
// /gc/heap/allocs:bytes): what drives the garbage collector's work.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// benchGet and benchPost call one of a child's /__bench paths and return the body (status 200).
func (s *subject) benchGet(ctx context.Context, path string) ([]byte, error) {
	return s.benchDo(ctx, http.MethodGet, path)
}

func (s *subject) benchPost(ctx context.Context, path string) ([]byte, error) {
	return s.benchDo(ctx, http.MethodPost, path)
}

func (s *subject) benchDo(ctx context.Context, method, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", s.name, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d: %s: %w", resp.StatusCode, strings.TrimSpace(string(b)), errUnexpected)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", s.name, path, err)
	}
	return b, nil
}

// otelChecks are row 7's figures against their goals.
func (r *runner) otelChecks() []check {
	o := r.otel
	if o == nil {
		return nil
	}
	added := o.addedP50()
	lo, hi := medianCI(o.pairs)
	cpuRatio := float64(o.on.cpuPerCall()) / float64(max(1, o.off.cpuPerCall()))
	return []check{{
		row: "7 OTLP export", figure: "added p50, 1 client (median of paired blocks)", baseline: "capture on, export off " + ms(o.off.seq.pct(50)) + " ms",
		result: fmt.Sprintf("%s ms (95%% CI %s to %s)", msSigned(added), msSigned(lo), msSigned(hi)), goal: "<= +" + ms(goalOTelAddedP50) + " ms", ok: boolp(added <= goalOTelAddedP50),
	}, {
		row: "7 OTLP export", figure: fmt.Sprintf("CPU per call, %d concurrent", r.workers), baseline: "export off " + us(o.off.cpuPerCall()),
		result: fmt.Sprintf("%s (%.2fx)", us(o.on.cpuPerCall()), cpuRatio), goal: fmt.Sprintf("<= %.2fx", goalOTelCPU), ok: boolp(cpuRatio <= goalOTelCPU),
	}}
}

// otelSection renders row 7 for BENCHMARKS.md.
func (r *runner) otelSection() string {
	o := r.otel
	if o == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Live OTLP export (row 7)\n\n")
	fmt.Fprintf(&b, "Two capture-on gateways, each in its own child process, one with live OTLP/HTTP export (`proxy --otlp-endpoint`) to a loopback receiver "+
		"in the bench process that discards what it gets; %d rounds; %d one-client calls per subject per round alternate between the two in blocks of %d (ABBA), concurrent batches in %d alternating slices per round; "+
		"the added p50 is the median over the %d block pairs of (export-on block p50 - the adjacent export-off block p50); "+
		"CPU per call is the gateway process's own (getrusage in the child; clients, upstream and receiver excluded), the export-on batches ending with a flush "+
		"inside the CPU window; of which GC is the garbage collector's share of it as the Go runtime estimates it, and the heap bytes the child allocated (runtime/metrics). Spans: %d exported, %d failed, %d dropped.\n\n",
		r.rounds, r.seqCalls*otelSeqFactor, o.block, otelConcSlices, len(o.pairs), o.counts.Exported, o.counts.Failed, o.counts.Dropped)
	fmt.Fprintf(&b, "| subject | 1 client p50 | p99 | %d concurrent p50 | p99 | calls/s | CPU per call | of which GC, allocated per call |\n|---|---|---|---|---|---|---|---|\n", r.workers)
	row := func(name string, s *subjectStats, gc time.Duration, allocs int64) {
		p, c := s.seq.pcts(50, 99), s.conc.pcts(50, 99)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.0f | %s | %s |\n", name, ms(p[0]), ms(p[1]), ms(c[0]), ms(c[1]), s.callsPerSec(), us(s.cpuPerCall()), gcCell(gc, allocs, s))
	}
	row(sOTelOff, &o.off, o.offGC, o.offAllocs)
	row(sOTelOn, &o.on, o.onGC, o.onAllocs)
	for _, v := range o.variants {
		row("variant "+v.name, &v.st, v.gc, v.allocs)
	}
	added := slices.Clone(o.roundAdded)
	slices.Sort(added)
	cpu := slices.Clone(o.roundCPU)
	slices.Sort(cpu)
	if len(added) > 0 {
		lo, hi := medianCI(o.pairs)
		fmt.Fprintf(&b, "\nAdded p50, 1 client: %s ms, the median of the %d paired block differences (95%% bootstrap interval %s to %s ms); pooled percentiles on - off: %s ms. "+
			"Per round (min / median / max over %d rounds): added p50 %s / %s / %s ms; CPU per call %.2fx / %.2fx / %.2fx.\n",
			msSigned(o.addedP50()), len(o.pairs), msSigned(lo), msSigned(hi), msSigned(o.on.seq.pct(50)-o.off.seq.pct(50)),
			len(added), msSigned(added[0]), msSigned(added[len(added)/2]), msSigned(added[len(added)-1]), cpu[0], cpu[len(cpu)/2], cpu[len(cpu)-1])
	}
	if f := o.floor(); f != nil {
		offCPU := o.off.cpuPerCall()
		fmt.Fprintf(&b, "\nSDK floor (not judged): the %s variant, each call's span and histogram records made by the OpenTelemetry SDK alone with its OTLP/HTTP exporters (%s), "+
			"costs %s per call, %s over export off (%.2fx); export on costs %s over export off, so the package's own work is %s per call on top of the SDK's.\n",
			otelFloorVariant, otelStageEnv+"="+otelStageSDK, us(f.st.cpuPerCall()), usSigned(f.st.cpuPerCall()-offCPU),
			float64(f.st.cpuPerCall())/float64(max(1, offCPU)), usSigned(o.on.cpuPerCall()-offCPU), usSigned(o.on.cpuPerCall()-f.st.cpuPerCall()))
	}
	for _, v := range o.variants {
		lo, hi := medianCI(v.pairs)
		fmt.Fprintf(&b, "\nVariant %s (not judged): added p50 %s ms (median of paired blocks against export off; 95%% interval %s to %s), CPU per call %.2fx of export off.\n",
			v.name, msSigned(medianDuration(v.pairs)), msSigned(lo), msSigned(hi), float64(v.st.cpuPerCall())/float64(max(1, o.off.cpuPerCall())))
	}
	b.WriteString("\n")
	return b.String()
}

// usSigned renders d in whole microseconds with its sign.
func usSigned(d time.Duration) string { return fmt.Sprintf("%+d µs", d.Microseconds()) }
