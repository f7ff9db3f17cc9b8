package otelexport

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
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

// emitExchange emits the span of one captured call from its exchange.
func (e *Exporter) emitExchange(ex *capture.Exchange, rolloutID, traceparent string) {
	rec, err := liveRecord(ex)
	if err != nil {
		e.invalid.Add(1)
		e.cInv.Inc()
		e.log.warn("otlp export: captured call not exportable", "rollout_id", rolloutID, "model_call_id", ex.ModelCallID, "err", err)
		return
	}
	e.Emit(context.Background(), rolloutID, rec, traceparent)
}

// liveRecord is the record modelcalls.BuildRecord reads from ex's capture line (call index 0), so
// a live span equals the one `export otlp` builds from the file, without writing the whole line and
// reading it back: the fields read from the payloads (response id, model, status, finish reason,
// usage, tool calls) come from BuildRecord over a line holding only dialect, request and response;
// the envelope's fields are taken from ex as the line would carry them (strings with invalid UTF-8
// replaced as the encoder does, a NaN or infinite time as null). TestLiveRecordMatchesLine holds the
// two ways equal.
func liveRecord(ex *capture.Exchange) (*modelcalls.ModelCallRecord, error) {
	if ex.ModelRef != nil && ex.ModelRef.Type != capture.ModelRefType {
		return nil, fmt.Errorf("%w: model_ref.type must be %q, got %q", modelcalls.ErrInvalidExchange, capture.ModelRefType, ex.ModelRef.Type)
	}
	line, err := capture.EncodeExchange(&capture.Exchange{
		Dialect: ex.Dialect, Request: ex.Request, Response: ex.Response, PayloadsChecked: ex.PayloadsChecked,
	})
	if err != nil {
		return nil, err
	}
	rec, err := modelcalls.BuildRecord(line, 0)
	if err != nil {
		return nil, err
	}
	rec.ModelCallID = new(lineString(ex.ModelCallID))
	rec.Dialect = new(lineString(ex.Dialect))
	if ex.ModelRef != nil {
		rec.ModelRef = &capture.ModelRef{Type: ex.ModelRef.Type, Name: lineString(ex.ModelRef.Name)}
	}
	rec.StartedAt = lineFloat(ex.StartedAt)
	rec.CompletedAt = lineFloat(ex.CompletedAt)
	rec.LatencyTotalMS = lineFloat(ex.LatencyMS)
	if ex.LatencyTTFTMS != nil {
		rec.LatencyTTFTMS = lineFloat(*ex.LatencyTTFTMS)
	}
	rec.StatusCode = ex.StatusCode
	rec.ErrorCategory = lineStringPtr(ex.ErrorCategory)
	if s := lineStringPtr(ex.ResponseSource); s != nil && (*s == "upstream" || *s == "local") {
		rec.ResponseSource = s
	}
	rec.UpstreamAttempted = ex.UpstreamAttempted
	rec.UpstreamStatusCode = ex.UpstreamStatusCode
	rec.LocalResponseReason = lineStringPtr(ex.LocalResponseReason)
	rec.ClientSessionID = lineStringPtr(ex.ClientSessionID)
	rec.ClientAssistantMessageID = lineStringPtr(ex.ClientAssistantMessageID)
	rec.RequestRaw = lineStringPtr(ex.RequestRaw)
	return rec, nil
}

// lineString is s as it reads back from a capture line: the encoder replaces invalid UTF-8.
func lineString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out, _ := jsonString(jsonscan.AppendString(nil, s))
	return out
}

func lineStringPtr(s *string) *string {
	if s == nil {
		return nil
	}
	return new(lineString(*s))
}

// lineFloat is f as it reads back from a capture line: null (nil) when NaN or infinite, else exact
// (the encoder writes the shortest form that parses back to f).
func lineFloat(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
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
	forTopMembers(req, func(key, v []byte) {
		var name string
		switch {
		case keyIs(key, "model"):
			name = "model"
		case keyIs(key, "stream"):
			name = "stream"
		default:
			return
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, name...)
		out = append(out, '"', ':')
		out = append(out, v...)
	})
	return append(out, '}')
}
