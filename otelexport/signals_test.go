package otelexport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcalls/modelcalls/record"

	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestEnvSignals(t *testing.T) {
	for _, tc := range []struct {
		disabled, traces, metrics string
		want                      Signals
		err                       bool
	}{
		{"", "", "", Signals{true, true}, false},
		{"true", "", "", Signals{}, false},
		{"TRUE", "otlp", "otlp", Signals{}, false},
		{"false", "none", "", Signals{false, true}, false},
		{"", "", "none", Signals{true, false}, false},
		{"", "otlp,none", "none", Signals{true, false}, false},
		{"", "console", "", Signals{}, true},
		{"", "", "prometheus", Signals{}, true},
	} {
		t.Setenv("OTEL_SDK_DISABLED", tc.disabled)
		t.Setenv("OTEL_TRACES_EXPORTER", tc.traces)
		t.Setenv("OTEL_METRICS_EXPORTER", tc.metrics)
		got, err := EnvSignals()
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%+v: %+v, %v", tc, got, err)
		}
	}
}

func TestMetricsRefused(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("failed to send metrics to http://h:4318/v1/metrics: 404 Not Found (body: 404 page not found)"), true},
		{errors.New("failed to send metrics to http://h:4318/v1/metrics: 405 Method Not Allowed (body: (empty))"), true},
		{fmt.Errorf("export: %w", errors.New("failed to send metrics to http://h/v1/metrics: 501 Not Implemented (body: x)")), true},
		{errors.New("failed to send metrics to http://h/v1/metrics: 400 Bad Request (body: x)"), false},
		{errors.New("failed to send metrics to http://h/v1/metrics: 500 Internal Server Error (body: 404)"), false},
		{status.Error(grpccodes.Unimplemented, "unknown service opentelemetry.proto.collector.metrics.v1.MetricsService"), true},
		{fmt.Errorf("wrapped: %w", status.Error(grpccodes.Unimplemented, "x")), true},
		{errors.Join(errors.New("a"), status.Error(grpccodes.Unimplemented, "x")), true},
		{status.Error(grpccodes.Unavailable, "connection refused"), false},
		{nil, false},
	} {
		if got := metricsRefused(tc.err); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestMetricsRefusedOnce: an endpoint that answers 404 on /v1/metrics (a traces-only backend) gets
// one metrics upload; the refusal is warned about once, and neither Flush nor Shutdown fails for it.
func TestMetricsRefusedOnce(t *testing.T) {
	var metrics, traces atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/v1/metrics":
			metrics.Add(1)
			http.NotFound(w, r)
		case "/v1/traces":
			traces.Add(1)
		}
	}))
	defer srv.Close()
	var log strings.Builder
	e, err := New(context.Background(), Config{Endpoint: srv.URL, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	latency, model := 12.5, "m"
	for range 3 {
		e.Emit(context.Background(), "r1", &record.ModelCallRecord{Model: &model, LatencyTotalMS: &latency}, "")
		if err := e.Flush(context.Background()); err != nil {
			t.Fatalf("flush: %v", err)
		}
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if metrics.Load() != 1 || traces.Load() == 0 {
		t.Errorf("%d metric uploads, %d trace uploads; want 1 and some", metrics.Load(), traces.Load())
	}
	if e.MetricsRefused() == nil || strings.Count(log.String(), "does not accept metrics") != 1 {
		t.Errorf("refused %v; log:\n%s", e.MetricsRefused(), log.String())
	}
}
