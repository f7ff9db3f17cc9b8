package otelexport

import (
	"context"
	"encoding/json"

	"github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
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
		return true
	default:
		e.queueBytes.Add(-size)
		e.countDropped(1, "queue_full")
		return false
	}
}

// worker turns queued calls into spans: the line as the store wrote it, read back with
// modelcalls.BuildRecord, so a live span equals the one `export otlp` builds from the file.
func (e *Exporter) worker() {
	defer close(e.workerDone)
	for c := range e.queue {
		e.queueBytes.Add(-c.bytes)
		e.handle(c)
	}
}

// newLiveCall is the queue entry of a captured call: a shallow copy of ex without response_raw.
func (e *Exporter) newLiveCall(rolloutID string, ex *capture.Exchange, traceparent string) liveCall {
	cp := *ex
	cp.ResponseRaw, cp.ResponseRawFrom = nil, nil
	size := int64(len(cp.Request) + len(cp.Response))
	if cp.RequestRaw != nil {
		size += int64(len(*cp.RequestRaw))
	}
	return liveCall{rolloutID: rolloutID, ex: &cp, traceparent: traceparent, bytes: size}
}

// handle turns one queued call into its span and metrics (the worker's work per call).
func (e *Exporter) handle(c liveCall) {
	if !e.cfg.Content {
		c.ex.Request = slimRequest(c.ex.Request)
	}
	e.emitExchange(c.ex, c.rolloutID, c.traceparent)
}

// emitExchange reads the exchange back as its capture line and emits its span.
func (e *Exporter) emitExchange(ex *capture.Exchange, rolloutID, traceparent string) {
	line, err := capture.EncodeExchange(ex)
	var rec *modelcalls.ModelCallRecord
	if err == nil {
		rec, err = modelcalls.BuildRecord(line, 0)
	}
	if err != nil {
		e.invalid.Add(1)
		e.cInv.Inc()
		e.log.warn("otlp export: captured call not exportable", "rollout_id", rolloutID, "model_call_id", ex.ModelCallID, "err", err)
		return
	}
	e.Emit(context.Background(), rolloutID, rec, traceparent)
}

// slimRequest keeps of a request object only the members a span reads without content (model,
// stream), so the worker does not re-encode and re-read an agent's whole prompt: the span comes
// out the same as from the full line. Anything but an object is returned as it is.
func slimRequest(req json.RawMessage) json.RawMessage {
	if len(req) == 0 || req[0] != '{' {
		return req
	}
	out := make([]byte, 0, 64)
	out = append(out, '{')
	forTopMembers(req, func(key string, v []byte) {
		if key != "model" && key != "stream" {
			return
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, key...)
		out = append(out, '"', ':')
		out = append(out, v...)
	})
	return append(out, '}')
}
