package gateway

import (
	"net/http"
	"time"

	"github.com/modelcalls/modelcalls/capture"
)

// CapturedCall is one captured call whose capture line is durable, as Handler.OnCaptured receives
// it (live OTLP export builds its span from it).
type CapturedCall struct {
	// RolloutID is the rollout the line was appended to.
	RolloutID string
	// Exchange is the exchange as written, except for a streamed call's reconstruction, which the
	// line gets through ResponseTo: here it is in Response, with every text that spilled to a temp
	// file (past Handler.SpoolThreshold) cut to its first dialect.SummaryTextBytes bytes. It is
	// shared with the gateway: read it during the callback only, never modify it; Request and
	// Response stay valid afterwards, ResponseRawFrom does not.
	Exchange *capture.Exchange
	// Start and End are the call's monotonic start and end (End - Start is latency_ms).
	Start, End time.Time
	// Traceparent is the client's W3C traceparent request header, "" when it sent none.
	Traceparent string
}

// noteTrace keeps what OnCaptured needs from the request headers (nothing without OnCaptured).
func (c *call) noteTrace(h http.Header) {
	if c.h.OnCaptured != nil {
		c.traceparent = h.Get("traceparent")
	}
}

// captured calls OnCaptured for a call whose line is durable. It runs from settle, on the call's
// goroutine, after the chunk that ended the call went to the client; OnCaptured must only hand the
// call off.
func (c *call) captured(ex *capture.Exchange) {
	if c.h.OnCaptured == nil {
		return
	}
	end := c.start.Add(time.Duration((ex.LatencyMS) * float64(time.Millisecond)))
	c.h.OnCaptured(CapturedCall{RolloutID: c.rolloutID, Exchange: ex, Start: c.start, End: end, Traceparent: c.traceparent})
}
