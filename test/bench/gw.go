package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
)

// gatewayHandler builds the gateway under test in front of upstreamURL, configured as
// `modelcalls proxy` runs it: default transport, timeouts and spool threshold, a model server name,
// and a capture limit raised to 256 MiB.
// With captureOn false it has no store (capture off: prefixes are still stripped and ids validated).
// stop drains in-flight capture writes.
func gatewayHandler(upstreamURL, captureDir string, captureOn bool) (http.Handler, func(), error) {
	u, err := url.Parse(upstreamURL)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway upstream: %w", err)
	}
	h := &gateway.Handler{
		Upstream:        u,
		ModelServerName: "bench",
		// The memory row passes a 100 MiB stream and records it whole (its shape is part of the
		// row), above the 64 MiB the proxy keeps per capture by default.
		MaxCaptureBytes: 256 << 20,
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if captureOn {
		if h.Store, err = capture.Open(captureDir); err != nil {
			return nil, nil, err
		}
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		h.Shutdown(ctx)
	}
	return h, stop, nil
}

// gatewayWriteMetric names the gateway's capture-write histogram in the report.
const gatewayWriteMetric = gateway.MetricCaptureWriteSec

// captureWrites reads the gateway's own capture-write histogram (gateway.MetricCaptureWriteSec:
// append + fsync, per captured call): count and sum so far; zero when h is not a gateway or the
// metric is absent.
func captureWrites(h http.Handler) writeStat {
	var w writeStat
	g, ok := h.(*gateway.Handler)
	if !ok {
		return w
	}
	mfs, err := g.Registry().Gather()
	if err != nil {
		return w
	}
	for _, mf := range mfs {
		if mf.GetName() != gateway.MetricCaptureWriteSec {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hg := m.GetHistogram(); hg != nil {
				w.count += hg.GetSampleCount()
				w.sum += hg.GetSampleSum()
			}
		}
	}
	return w
}
