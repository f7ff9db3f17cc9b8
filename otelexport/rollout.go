package otelexport

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/modelcalls/modelcalls/record"
)

// Rollout is what a rollout's root span carries: its calls (for the time range and totals) and the
// fields of its rollout record.
type Rollout struct {
	ID        string
	Calls     []record.ModelCallRecord
	Reward    *float64 // the record's "reward" when a number
	TaskIndex *int64   // the record's "_ng_task_index" when an integer
}

// EmitRollout records the root span of rollout r: name "rollout <id>", kind INTERNAL, trace id
// RolloutTraceID, span id RolloutSpanID (the parent of the calls' spans), from the first call's start
// to the last call's end (the export time when there are no calls), with the call count, the
// calls with an error, the token totals over the calls that reported them, and the reward.
func (e *Exporter) EmitRollout(ctx context.Context, r Rollout) {
	var start, end time.Time
	var in, out, cached int64
	var haveIn, haveOut, haveCached bool
	errs := 0
	for i := range r.Calls {
		c := &r.Calls[i]
		s, en := callTimes(c)
		if start.IsZero() || s.Before(start) {
			start = s
		}
		if en.After(end) {
			end = en
		}
		if c.TokensIn != nil {
			in, haveIn = in+*c.TokensIn, true
		}
		if c.TokensOut != nil {
			out, haveOut = out+*c.TokensOut, true
		}
		if c.CachedTokens != nil {
			cached, haveCached = cached+*c.CachedTokens, true
		}
		if c.ErrorCategory != nil {
			errs++
		}
	}
	if start.IsZero() {
		start = time.Now()
		end = start
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrRolloutID, r.ID),
		attribute.Int(AttrRolloutCalls, len(r.Calls)),
		attribute.Int(AttrRolloutErrors, errs),
	}
	if haveIn {
		attrs = append(attrs, attribute.Int64(AttrRolloutInputTokens, in))
	}
	if haveOut {
		attrs = append(attrs, attribute.Int64(AttrRolloutOutputTokens, out))
	}
	if haveCached {
		attrs = append(attrs, attribute.Int64(AttrRolloutCachedTokens, cached))
	}
	if r.Reward != nil {
		attrs = append(attrs, attribute.Float64(AttrRolloutReward, *r.Reward))
	}
	if r.TaskIndex != nil {
		attrs = append(attrs, attribute.Int64(AttrRolloutTaskIndex, *r.TaskIndex))
	}
	sctx := withIDs(ctx, RolloutTraceID(r.ID), RolloutSpanID(r.ID))
	_, span := e.tracer.Start(sctx, "rollout "+r.ID, trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(end))
}
