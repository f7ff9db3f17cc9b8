package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
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

// otelResult is row 7: capture on with live OTLP export off and on, batches interleaved (ABAB).
type otelResult struct {
	off, on subjectStats
	counts  otelexport.Counts
}

// runOTelRow measures live export: two capture-on gateways in front of the same upstream, one with
// an otelexport.Exporter sending OTLP/HTTP to a loopback receiver that reads and discards each
// request (the Collector's own cost is not the gateway's). The "on" batches end with a flush of the
// exporter inside the measured CPU window, so the export work of a batch's calls is charged to it.
func (r *runner) runOTelRow(ctx context.Context) error {
	recv, err := serve(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		w.WriteHeader(http.StatusOK)
	}))
	if err != nil {
		return err
	}
	defer recv.close()
	hOff, stopOff, err := gatewayHandler(r.up.url, filepath.Join(r.workDir, "otel-off"), true)
	if err != nil {
		return err
	}
	defer stopOff()
	hOn, stopOn, err := gatewayHandler(r.up.url, filepath.Join(r.workDir, "otel-on"), true)
	if err != nil {
		return err
	}
	defer stopOn()
	gw := hOn.(*gateway.Handler)
	upURL, _ := url.Parse(r.up.url)
	exp, err := otelexport.New(ctx, otelexport.Config{Endpoint: recv.url, Upstream: upURL, Registerer: gw.Registry()})
	if err != nil {
		return err
	}
	gw.OnCaptured = func(c gateway.CapturedCall) { exp.Enqueue(c.RolloutID, c.Exchange, c.Traceparent) }
	res := &otelResult{}
	subjects := map[string]*subject{}
	for name, h := range map[string]http.Handler{sOTelOff: hOff, sOTelOn: hOn} {
		srv, err := serve(h)
		if err != nil {
			return err
		}
		defer srv.close()
		subjects[name] = newSubject(name, srv.url, true)
		defer subjects[name].closeIdle()
	}
	stats := map[string]*subjectStats{sOTelOff: &res.off, sOTelOn: &res.on}
	order := []string{sOTelOff, sOTelOn}
	for _, name := range order { // warm-up, not recorded
		if _, err := subjects[name].sequential(ctx, r.fx, "otel1", 20); err != nil {
			return err
		}
	}
	for round := range r.rounds {
		o := order
		if round%2 == 1 {
			o = reversed(order)
		}
		for _, name := range o {
			s, st := subjects[name], stats[name]
			seq, err := s.sequential(ctx, r.fx, "otel1", r.seqCalls)
			if err != nil {
				return err
			}
			st.seq = append(st.seq, seq.lat...)
			c0 := processCPU()
			conc, err := s.concurrent(ctx, r.fx, r.workers, r.concDur, r.ownFile)
			if err != nil {
				return err
			}
			if name == sOTelOn {
				if err := exp.Flush(ctx); err != nil {
					return fmt.Errorf("otlp flush: %w", err)
				}
			}
			st.cpu += processCPU() - c0
			st.conc = append(st.conc, conc.lat...)
			st.calls += conc.calls
			st.elapsed += conc.elapsed
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := exp.Shutdown(sctx); err != nil {
		return fmt.Errorf("otlp shutdown: %w", err)
	}
	res.counts = exp.Counts()
	r.otel = res
	return nil
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
	fmt.Fprintf(&b, "Two capture-on gateways, one with live OTLP/HTTP export (`proxy --otlp-endpoint`) to a loopback receiver that discards what it gets; "+
		"%d rounds, batches interleaved; the export-on batches end with a flush inside the CPU window. Spans: %d exported, %d failed, %d dropped.\n\n",
		r.rounds, o.counts.Exported, o.counts.Failed, o.counts.Dropped)
	fmt.Fprintf(&b, "| subject | 1 client p50 | p99 | %d concurrent p50 | p99 | calls/s | CPU per call |\n|---|---|---|---|---|---|---|\n", r.workers)
	for _, x := range []struct {
		name string
		s    *subjectStats
	}{{sOTelOff, &o.off}, {sOTelOn, &o.on}} {
		p, c := x.s.seq.pcts(50, 99), x.s.conc.pcts(50, 99)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.0f | %s |\n", x.name, ms(p[0]), ms(p[1]), ms(c[0]), ms(c[1]), x.s.callsPerSec(), us(x.s.cpuPerCall()))
	}
	b.WriteString("\n")
	return b.String()
}
