package otelexport

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"strconv"

	"go.opentelemetry.io/otel/trace"
)

// Trace identity. Every id is the leading bytes of a SHA-256 over a fixed label and the capture's
// own id, so exporting the same capture twice (live, then `export otlp`) gives the same ids:
//
//	trace id of a rollout      sha256("modelcalls rollout trace " + rollout_id)[:16]
//	span id of its root span   sha256("modelcalls rollout span " + rollout_id)[:8]
//	span id of a call          sha256("modelcalls call " + model_call_id)[:8]
//
// A call without a model_call_id (foreign captures) uses rollout_id + "#" + call_index instead.
// An all-zero id (invalid in OTLP) is never produced: its last byte is set to 1.

// RolloutTraceID is the trace id of every call of rollout id that has no client traceparent.
func RolloutTraceID(rolloutID string) trace.TraceID {
	var t trace.TraceID
	sum := labelSum("modelcalls rollout trace ", rolloutID, "")
	copy(t[:], sum[:16])
	if !t.IsValid() {
		t[15] = 1
	}
	return t
}

// RolloutSpanID is the span id of rollout id's root span (`export otlp --in`) and so the parent
// span id of its calls' spans.
func RolloutSpanID(rolloutID string) trace.SpanID {
	return spanIDOf("modelcalls rollout span ", rolloutID, "")
}

// CallSpanID is the span id of the call with this model_call_id.
func CallSpanID(modelCallID string) trace.SpanID {
	return spanIDOf("modelcalls call ", modelCallID, "")
}

func callSpanID(rolloutID string, modelCallID *string, callIndex int) trace.SpanID {
	if modelCallID != nil && *modelCallID != "" {
		return CallSpanID(*modelCallID)
	}
	return spanIDOf("modelcalls call ", rolloutID, "#"+strconv.Itoa(callIndex))
}

func spanIDOf(label, id, suffix string) trace.SpanID {
	var s trace.SpanID
	sum := labelSum(label, id, suffix)
	copy(s[:], sum[:8])
	if !s.IsValid() {
		s[7] = 1
	}
	return s
}

// labelSum is sha256(label + id + suffix), hashed from a buffer on the stack when they fit in it.
func labelSum(label, id, suffix string) [sha256.Size]byte {
	var buf [128]byte
	b := append(buf[:0], label...)
	b = append(b, id...)
	b = append(b, suffix...)
	return sha256.Sum256(b)
}

// idGenerator hands the SDK the ids placed in the span's start context (withIDs); spans started
// without them (none in this package) get random ids.
type idGenerator struct{}

type idsKey struct{}

type ids struct {
	trace trace.TraceID
	span  trace.SpanID
}

func withIDs(ctx context.Context, t trace.TraceID, s trace.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, ids{trace: t, span: s})
}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.trace, v.span
	}
	var t trace.TraceID
	for !t.IsValid() {
		for i := range t {
			t[i] = byte(rand.Uint32())
		}
	}
	return t, randomSpanID()
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.span
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		for i := range s {
			s[i] = byte(rand.Uint32())
		}
	}
	return s
}
