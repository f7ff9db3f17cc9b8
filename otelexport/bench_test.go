package otelexport

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkLiveCall is the worker's cost per captured call (encode, read back, span, metrics),
// without the OTLP encoding and send.
func BenchmarkLiveCall(b *testing.B) {
	e, err := New(context.Background(), Config{SpanExporter: tracetest.NewNoopExporter()})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	ex := exchange("responses", responsesReq, responsesResp, nil)
	b.ReportAllocs()
	for b.Loop() {
		cp := *ex
		cp.Request = slimRequest(cp.Request)
		e.emitExchange(&cp, "r1", "")
	}
}
