package otelexport

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/record"
)

// liveCall is one captured call waiting in the live queue.
type liveCall struct {
	rolloutID   string
	ex          *capture.Exchange
	traceparent string
	bytes       int64
}

// Enqueue hands one captured call to the export worker without blocking: it returns false (and
// counts the span dropped) when the queue holds QueueCalls calls or QueueBytes payload bytes, or
// after Shutdown began. ex must be the exchange whose line is durable; Enqueue keeps a shallow copy
// without response_raw (the span is built from the parsed payloads, as BuildRecord reads them), so
// the caller may release its body buffers. The call's span is built on the worker goroutine.
func (e *Exporter) Enqueue(rolloutID string, ex *capture.Exchange, traceparent string) bool {
	c := e.newLiveCall(rolloutID, ex, traceparent)
	size := c.bytes
	limit := e.cfg.QueueBytes
	if limit <= 0 {
		limit = DefaultQueueBytes
	}
	if e.queueBytes.Add(size) > limit {
		e.queueBytes.Add(-size)
		e.countDropped(1, "queue_bytes")
		return false
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closing.Load() {
		e.queueBytes.Add(-size)
		e.countDropped(1, "shutdown")
		return false
	}
	select {
	case e.queue <- c:
	default:
		e.queueBytes.Add(-size)
		e.countDropped(1, "queue_full")
		return false
	}
	if len(e.queue) >= cap(e.queue)/2 {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	} else if e.armed.CompareAndSwap(false, true) {
		e.timer.Reset(LiveDelay)
	}
	return true
}

// worker turns queued calls into spans. It wakes LiveDelay after the first call queued since its
// last round, when the queue is half full, or at Shutdown, and then works through every call
// queued: one wake-up per round instead of one per call, so the calls' goroutines hand off
// without waking a thread, and the rounds run apart from the calls that queued them.
func (e *Exporter) worker() {
	defer close(e.workerDone)
	for {
		select {
		case <-e.timer.C:
		case <-e.wake:
		case <-e.closed:
		}
		e.armed.Store(false)
		for more := true; more; {
			select {
			case c, ok := <-e.queue:
				if !ok {
					return
				}
				e.queueBytes.Add(-c.bytes)
				e.handle(c)
			default:
				more = false
			}
		}
	}
}

// exchangeCopies recycles the queue entries' exchange copies: the worker returns each once its
// call's span has ended (handle), so a steady stream of calls allocates none.
var exchangeCopies = sync.Pool{New: func() any { return new(capture.Exchange) }}

// newLiveCall is the queue entry of a captured call: a shallow copy of ex without response_raw.
func (e *Exporter) newLiveCall(rolloutID string, ex *capture.Exchange, traceparent string) liveCall {
	cp := exchangeCopies.Get().(*capture.Exchange)
	*cp = *ex
	cp.ResponseRaw, cp.ResponseRawFrom, cp.ResponseRawEscaped, cp.ResponseTo = nil, nil, nil, nil
	size := int64(len(cp.Request) + len(cp.Response))
	if cp.RequestRaw != nil {
		size += int64(len(*cp.RequestRaw))
	}
	return liveCall{rolloutID: rolloutID, ex: cp, traceparent: traceparent, bytes: size}
}

// handle turns one queued call into its span and metrics (the worker's work per call), then
// recycles its exchange copy.
func (e *Exporter) handle(c liveCall) {
	defer func() { *c.ex = capture.Exchange{}; exchangeCopies.Put(c.ex) }()
	rec, line, err := spanRecord(c.ex, e.scratch.line)
	e.scratch.line = line
	if err != nil {
		e.invalid.Add(1)
		e.cInv.Inc()
		e.log.warn("otlp export: captured call not exportable", "rollout_id", c.rolloutID, "model_call_id", c.ex.ModelCallID, "err", err)
		return
	}
	ri := scanRequest(rec.Request)
	ri.responseModel = rec.Model // read from the response alone (see spanRecord)
	e.emit(context.Background(), c.rolloutID, rec, ri, c.traceparent, &e.scratch)
}

// workerScratch are buffers the worker reuses from call to call: nothing keeps them once a call's
// span has ended (the SDK copies the attributes; the record's strings are copies of the line's);
// and caches of what the calls of one rollout and one model share.
type workerScratch struct {
	line    []byte
	attrs   []attribute.KeyValue
	parents map[string]trace.SpanContext // rollout id -> its trace's parent span context
	model   string                       // the request model of the last span name built
	name    string                       // and that name
}

// maxParents bounds the cache of rollout span contexts; past it the cache starts over.
const maxParents = 1024

// rolloutParent is the span context the spans of rollout id hang under when the client sent no
// trace context: its trace (RolloutTraceID) and root span (RolloutSpanID). sc may be nil.
func (sc *workerScratch) rolloutParent(id string) trace.SpanContext {
	if sc != nil {
		if p, ok := sc.parents[id]; ok {
			return p
		}
	}
	p := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: RolloutTraceID(id), SpanID: RolloutSpanID(id),
		TraceFlags: trace.FlagsSampled, Remote: true,
	})
	if sc != nil {
		if sc.parents == nil || len(sc.parents) >= maxParents {
			sc.parents = make(map[string]trace.SpanContext)
		}
		sc.parents[id] = p
	}
	return p
}

// spanName is spanName(ri), the last one kept for the next call of the same model. sc may be nil.
func (sc *workerScratch) spanName(ri requestInfo) string {
	if sc == nil || ri.requestModel == nil {
		return spanName(ri)
	}
	if sc.name == "" || sc.model != *ri.requestModel {
		sc.model, sc.name = *ri.requestModel, spanName(ri)
	}
	return sc.name
}

// spanRecord is the record a span reads: record.FromExchange, ex's record as BuildRecord reads it
// from ex's capture line, built without writing the whole line (its Model is the response's model
// alone; spans read the request's model from the request). The line is built in buf (returned for
// reuse); the record aliases it.
func spanRecord(ex *capture.Exchange, buf []byte) (*record.ModelCallRecord, []byte, error) {
	return record.FromExchange(ex, buf)
}
