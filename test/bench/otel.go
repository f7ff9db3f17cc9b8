package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcalls/modelcalls/gateway"
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
	counts  otelexport.Counts
	block   int // one-client calls per subject per block
	// roundAdded and roundCPU are each round's added p50 (one client) and CPU ratio (concurrent),
	// to show how far the figures move from round to round.
	roundAdded []time.Duration
	roundCPU   []float64
}

// Paths the row's child gateways serve beside the gateway (otelChildHandler).
const (
	otelCPUPath   = "/__bench/otel/cpu"   // GET: the child's CPU time so far, in ns (getrusage)
	otelFlushPath = "/__bench/otel/flush" // POST: export every span recorded so far (export on)
	otelCountPath = "/__bench/otel/count" // GET: the exporter's span counts as JSON (export on)
)

// otelSeqBlock is how many one-client calls a subject makes before the other takes over;
// otelConcSlices is how many alternating concurrent batches share a round's batch time.
const (
	otelSeqBlock   = 50
	otelConcSlices = 3
)

// runOTelRow measures live export: two capture-on gateways in front of the same upstream, each in a
// child process (`bench -child gateway-otel`), one with an otelexport.Exporter sending OTLP/HTTP to
// a loopback receiver in this process that reads and discards each request. CPU per call is the
// child's own CPU time (its getrusage), so neither the clients, the upstream nor the receiver (the
// Collector's stand-in) count: the figure is the gateway process's. The one-client calls alternate
// between the two gateways in blocks of otelSeqBlock calls, so drifts of a shared machine (the fsync
// time above all, which dominates a captured call) fall on both alike; the concurrent batch time of
// a round is split into otelConcSlices alternating batches for the same reason (the CPU time a call
// costs moves with the machine's other load). The export-on batches end with a flush of the exporter inside the CPU window,
// so the export work of a batch's calls is charged to it.
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
	subjects := map[string]*subject{}
	for _, x := range []struct {
		name string
		env  []string
	}{
		{sOTelOff, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="}},
		{sOTelOn, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.url, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"}},
	} {
		dir := filepath.Join(r.workDir, "otel-"+map[string]string{sOTelOff: "off", sOTelOn: "on"}[x.name])
		c, err := startChild("gateway-otel", r.up.url, dir, x.env...)
		if err != nil {
			return err
		}
		defer c.stop()
		s := newSubject(x.name, c.url, true)
		defer s.closeIdle()
		subjects[x.name] = s
	}
	on := subjects[sOTelOn]
	stats := map[string]*subjectStats{sOTelOff: &res.off, sOTelOn: &res.on}
	order := []string{sOTelOff, sOTelOn}
	for _, name := range order { // warm-up, not recorded
		if _, err := subjects[name].sequential(ctx, r.fx, "otel1", 20); err != nil {
			return err
		}
		if _, err := subjects[name].concurrent(ctx, r.fx, r.workers, 100*time.Millisecond, r.ownFile); err != nil {
			return err
		}
	}
	for round := range r.rounds {
		o := order
		if round%2 == 1 {
			o = reversed(order)
		}
		n0 := map[string]int{sOTelOff: len(res.off.seq), sOTelOn: len(res.on.seq)}
		for b := 0; b*otelSeqBlock < r.seqCalls; b++ {
			bo := o
			if b%2 == 1 {
				bo = reversed(o)
			}
			for _, name := range bo {
				seq, err := subjects[name].sequential(ctx, r.fx, "otel1", min(otelSeqBlock, r.seqCalls-b*otelSeqBlock))
				if err != nil {
					return err
				}
				stats[name].seq = append(stats[name].seq, seq.lat...)
			}
		}
		res.roundAdded = append(res.roundAdded, res.on.seq[n0[sOTelOn]:].pct(50)-res.off.seq[n0[sOTelOff]:].pct(50))
		roundCPU, roundCalls := map[string]time.Duration{}, map[string]int{}
		for slice := range otelConcSlices {
			so := o
			if slice%2 == 1 {
				so = reversed(o)
			}
			for _, name := range so {
				s, st := subjects[name], stats[name]
				c0, err := s.childCPU(ctx)
				if err != nil {
					return err
				}
				conc, err := s.concurrent(ctx, r.fx, r.workers, r.concDur/otelConcSlices, r.ownFile)
				if err != nil {
					return err
				}
				if name == sOTelOn {
					if _, err := s.benchPost(ctx, otelFlushPath); err != nil {
						return fmt.Errorf("otlp flush: %w", err)
					}
				}
				c1, err := s.childCPU(ctx)
				if err != nil {
					return err
				}
				st.cpu += c1 - c0
				roundCPU[name] += c1 - c0
				roundCalls[name] += conc.calls
				st.conc = append(st.conc, conc.lat...)
				st.calls += conc.calls
				st.elapsed += conc.elapsed
			}
		}
		perCall := func(name string) float64 { return float64(roundCPU[name]) / float64(max(1, roundCalls[name])) }
		res.roundCPU = append(res.roundCPU, perCall(sOTelOn)/max(1, perCall(sOTelOff)))
		r.logf("  round %d/%d: added p50 %s ms, CPU per call %.2fx", round+1, r.rounds, msSigned(res.roundAdded[round]), res.roundCPU[round])
	}
	if _, err := on.benchPost(ctx, otelFlushPath); err != nil {
		return fmt.Errorf("otlp flush: %w", err)
	}
	b, err := on.benchGet(ctx, otelCountPath)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &res.counts); err != nil {
		return fmt.Errorf("otlp counts: %w", err)
	}
	r.otel = res
	return nil
}

// otelChildHandler is the gateway a row-7 child serves (`bench -child gateway-otel`): the capture-on
// gateway of gatewayHandler, with live OTLP export when OTEL_EXPORTER_OTLP_ENDPOINT is set (as
// `modelcalls proxy` reads it), plus otelCPUPath, otelFlushPath and otelCountPath. stop drains the
// gateway, then shuts the exporter down.
func otelChildHandler(upstreamURL, captureDir string) (http.Handler, func(), error) {
	h, stopGW, err := gatewayHandler(upstreamURL, captureDir, true)
	if err != nil {
		return nil, nil, err
	}
	var exp *otelexport.Exporter
	if otelexport.Enabled("") {
		gw := h.(*gateway.Handler)
		upURL, _ := url.Parse(upstreamURL)
		exp, err = otelexport.New(context.Background(), otelexport.Config{Upstream: upURL, Registerer: gw.Registry()})
		if err != nil {
			stopGW()
			return nil, nil, err
		}
		gw.OnCaptured = func(c gateway.CapturedCall) { exp.Enqueue(c.RolloutID, c.Exchange, c.Traceparent) }
	}
	mux := http.NewServeMux()
	mux.HandleFunc(otelCPUPath, func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "%d\n", processCPU().Nanoseconds())
	})
	mux.HandleFunc(otelFlushPath, func(w http.ResponseWriter, req *http.Request) {
		if exp == nil {
			http.Error(w, "export off", http.StatusNotFound)
			return
		}
		if err := exp.Flush(req.Context()); err != nil {
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
		if exp != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			exp.Shutdown(ctx)
		}
	}
	return mux, stop, nil
}

// childCPU is the CPU time a row-7 child has used so far (otelCPUPath).
func (s *subject) childCPU(ctx context.Context) (time.Duration, error) {
	b, err := s.benchGet(ctx, otelCPUPath)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s cpu: %w", s.name, err)
	}
	return time.Duration(n), nil
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
	added := o.on.seq.pct(50) - o.off.seq.pct(50)
	cpuRatio := float64(o.on.cpuPerCall()) / float64(max(1, o.off.cpuPerCall()))
	return []check{{
		row: "7 OTLP export", figure: "added p50, 1 client", baseline: "capture on, export off " + ms(o.off.seq.pct(50)) + " ms",
		result: msSigned(added) + " ms", goal: "<= +" + ms(goalOTelAddedP50) + " ms", ok: boolp(added <= goalOTelAddedP50),
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
		"in the bench process that discards what it gets; %d rounds; one-client calls alternate between the two in blocks of %d, concurrent batches in %d alternating slices per round; "+
		"CPU per call is the gateway process's own (getrusage in the child; clients, upstream and receiver excluded), the export-on batches ending with a flush "+
		"inside the CPU window. Spans: %d exported, %d failed, %d dropped.\n\n",
		r.rounds, o.block, otelConcSlices, o.counts.Exported, o.counts.Failed, o.counts.Dropped)
	fmt.Fprintf(&b, "| subject | 1 client p50 | p99 | %d concurrent p50 | p99 | calls/s | CPU per call |\n|---|---|---|---|---|---|---|\n", r.workers)
	for _, x := range []struct {
		name string
		s    *subjectStats
	}{{sOTelOff, &o.off}, {sOTelOn, &o.on}} {
		p, c := x.s.seq.pcts(50, 99), x.s.conc.pcts(50, 99)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.0f | %s |\n", x.name, ms(p[0]), ms(p[1]), ms(c[0]), ms(c[1]), x.s.callsPerSec(), us(x.s.cpuPerCall()))
	}
	added := slices.Clone(o.roundAdded)
	slices.Sort(added)
	cpu := slices.Clone(o.roundCPU)
	slices.Sort(cpu)
	if len(added) > 0 {
		fmt.Fprintf(&b, "\nPer round (min / median / max over %d rounds): added p50 %s / %s / %s ms; CPU per call %.2fx / %.2fx / %.2fx.\n",
			len(added), msSigned(added[0]), msSigned(added[len(added)/2]), msSigned(added[len(added)-1]), cpu[0], cpu[len(cpu)/2], cpu[len(cpu)-1])
	}
	b.WriteString("\n")
	return b.String()
}
