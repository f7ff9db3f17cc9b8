package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/dialect"
)

// maxEventBytes is the largest SSE event a capture reassembles (or MaxCaptureBytes when that is
// smaller): a line or an event longer than this is not held in memory; it is left out of the
// reassembly and the line says capture_too_large. The largest events real servers send are a
// Responses envelope that repeats the whole output (a 128K-token answer is about 0.5 MiB), so
// 16 MiB leaves a wide margin while an upstream sending a newline-less line costs at most this.
const maxEventBytes = 16 << 20

// callKey keys the *call in the context of a captured call's outbound request.
type callKey struct{}

// Causes the gateway cancels an upstream request with.
var (
	errUpstreamTimeout = errors.New("upstream did not send response headers in time")
	errIdleTimeout     = errors.New("upstream body read timed out")
	errClientGone      = errors.New("client went away")
	// errUnexpectedStatus rejects an upstream answer the gateway does not relay on a captured call:
	// a final 1xx (101 Switching Protocols to a request that asked for no switch).
	errUnexpectedStatus = errors.New("upstream answered with a status the gateway does not relay")
)

// failure is why a call ended without a complete response; its non-empty values are error
// categories: NeMo Gym's connection, timeout and exception, and our "cancelled".
type failure string

const (
	failNone       failure = ""
	failCancelled  failure = capture.CategoryCancelled  // the client went away before the terminal event / end of body
	failConnection failure = capture.CategoryConnection // the upstream connection failed
	failTimeout    failure = capture.CategoryTimeout    // a gateway timeout or a transport timeout
	failException  failure = capture.CategoryException  // the proxy ended the call some other way
)

// call is the state of one captured call. Everything runs on the request's handler goroutine, except
// consume, which the inflater's goroutine runs while the handler goroutine waits for it.
type call struct {
	h                *Handler
	rolloutID        string
	modelCallID      string
	dialect          dialect.Dialect
	start            time.Time // wall clock plus monotonic reading
	session          *string
	assistantMessage *string
	logicalRequest   *string         // client_logical_request_id
	parentCall       *string         // client_parent_call_id
	pathModel        *string         // the model the path names (Gemini's), nil when none
	claim            *capture.Claim  // set by the claiming goroutine before it closes claimed
	claimed          chan struct{}   // closed once the claim exists (or failed)
	request          json.RawMessage // for a large body, set by the goroutine that closes requestParsed
	requestRaw       *string
	requestCompact   bool          // request has no white space outside its strings
	requestParsed    chan struct{} // set when request is worked out by a goroutine (a large body)

	ctx         context.Context // the outbound request's context (cancelled with a cause)
	cancel      context.CancelCauseFunc
	clientCtx   context.Context // the inbound request's context: done when the client went away
	headerTimer *time.Timer
	idleTimer   *time.Timer

	status        int // upstream (or local) status; 0 before headers
	prov          provenance
	streaming     bool
	contentLength int64 // upstream Content-Length, -1 when unknown
	read          int64 // raw body bytes read from the upstream
	firstByte     bool
	ttft          time.Duration
	body          *spool // decoded body bytes, for response / response_raw; a stream's already escaped (keep)
	kept          int64  // decoded body bytes kept in body (before escaping)
	esc           capture.TextEscaper
	escaped       []byte // scratch for one escaped chunk
	capped        bool   // the decoded body passed MaxCaptureBytes: body holds only its first bytes
	stream        *dialect.Stream
	inflate       *inflater
	decodeErr     error
	terminalHit   bool // the current chunk completed the first terminal event
	finished      bool // the capture line is written (or marked)

	// upstreamStatus is the upstream's status when the gateway answered in its place (a final 1xx),
	// recorded as upstream_status_code beside the local answer (the status above is the client's);
	// 0 otherwise.
	upstreamStatus int

	// clientLeft is set when the client went away while the stream was still being reassembled:
	// the reassembly stops there (reassembling for nobody would only burn CPU), and the line says
	// cancelled. Set by consume or, mid-chunk, by the goroutine of stopOnLeave.
	clientLeft  atomic.Bool
	stopOnLeave func() bool // unregisters the clientCtx hook that stops the reassembly

	// settle's inputs, kept from finish: the exchange as written, the write's result ("ok",
	// "failed" or "lost"), the error category's label, and whether settle still has to run.
	written   *capture.Exchange
	result    string
	category  string
	unsettled bool

	tokens       *tokenCapture      // what Handler.Tokens did to the call (tokens.go), nil when nothing
	render       chan renderResult  // the prompt render of a llama-server call, when one runs
	renderCancel context.CancelFunc // stops that render

	traceparent string          // the client's traceparent header, kept only for OnCaptured (captured.go)
	summary     json.RawMessage // a streamed reconstruction's Summary, for the access log and OnCaptured
}

// serveCaptured handles a call on an observed path under a valid rollout prefix: claim, read the
// request (413 past MaxRequestBytes), forward, capture.
func (h *Handler) serveCaptured(w http.ResponseWriter, r *http.Request, id string, d dialect.Dialect, guard *bodyGuard) {
	c := &call{h: h, rolloutID: id, dialect: d, modelCallID: capture.NewModelCallID(), start: time.Now(), contentLength: -1}
	c.session, c.assistantMessage = clientIDs(r.Header)
	c.logicalRequest, c.parentCall = lineageIDs(r.Header)
	if m := dialect.ModelOfPath(r.URL.Path); m != "" {
		c.pathModel = &m
	}
	c.noteTrace(r.Header)
	h.inflight.add()
	h.metrics.inFlight.Inc()
	defer func() {
		if !c.finished { // a path that neither answered nor captured (should not happen)
			c.finish(outcome{failure: failException})
		}
		c.settle() // in case the proxy never read or closed the body again after the held chunk
	}()
	// The claim is made before the call is forwarded: it is one pwrite into this process's claim
	// slot file (a few µs), so readers see every call from its start until its line is durable.
	c.claimed = make(chan struct{})
	func() {
		defer close(c.claimed)
		if claim, err := h.Store.Claim(id, c.modelCallID); err != nil {
			h.metrics.claimFailures.Inc()
			h.log.Warn("cannot claim capture write; capturing without a claim", "rollout_id", id, "model_call_id", c.modelCallID, "err", err)
		} else {
			c.claim = claim
		}
	}()
	if h.draining.Load() {
		c.answerLocally(w, http.StatusServiceUnavailable, ReasonShuttingDown, false,
			capture.StatusCategory(http.StatusServiceUnavailable), "the capture gateway is shutting down; retry against another instance")
		return
	}

	body, err := c.readRequest(r)
	if errors.Is(err, errTooLarge) {
		c.answerLocally(w, http.StatusRequestEntityTooLarge, ReasonRequestTooLarge, false,
			capture.StatusCategory(http.StatusRequestEntityTooLarge),
			fmt.Sprintf("request body exceeds the capture gateway's limit of %d bytes", h.maxRequestBytes()))
		return
	}
	if err != nil && guard != nil && guard.timedOut {
		// The body stopped arriving: the client is still there and gets 408, recorded as such.
		guard.expire(w)
		c.answerLocally(w, http.StatusRequestTimeout, ReasonRequestTimeout, false,
			capture.StatusCategory(http.StatusRequestTimeout), "the request body stopped arriving; the call was not forwarded")
		return
	}
	if err != nil {
		// The request body did not arrive whole: the client's side of the connection failed.
		h.log.Info("client request body unreadable; call not forwarded", "rollout_id", id, "model_call_id", c.modelCallID, "err", err)
		c.prov = provenance{attempted: ptr(false)}
		c.finish(outcome{failure: failCancelled})
		return
	}
	// What the line stores of the request (validated, decoded when compressed) is worked out before
	// the call is forwarded, except for a large body: that one is checked while the upstream works
	// on the call (finish waits for it), since checking takes longer than the hand-off to another
	// goroutine, which on the bench machine costs about 0.1 ms of latency.
	codings := contentCodings(r.Header)
	if len(body) < asyncRequestCheck {
		c.request, c.requestRaw, c.requestCompact = captureRequest(body, codings, h.maxRequestBytes())
	} else {
		parsed := make(chan struct{})
		c.requestParsed = parsed
		go func() {
			defer close(parsed)
			c.request, c.requestRaw, c.requestCompact = captureRequest(body, codings, h.maxRequestBytes())
		}()
	}
	h.metrics.reqBytes.Add(float64(len(body)))
	// The line keeps the request the client sent; the upstream gets the one asking for token ids.
	fwd := c.askTokens(r, body, codings)

	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(errClientGone) // the handler is done; anything still running upstream is abandoned
	c.ctx, c.cancel, c.clientCtx = ctx, cancel, r.Context()
	out := r.WithContext(context.WithValue(ctx, callKey{}, c))
	out.ContentLength = int64(len(fwd))
	out.TransferEncoding = nil
	out.Body = http.NoBody
	if len(fwd) > 0 {
		out.Body = io.NopCloser(bytes.NewReader(fwd))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(fwd)), nil }
	}
	if t := h.upstreamTimeout(); t > 0 {
		c.headerTimer = time.AfterFunc(t, func() { cancel(errUpstreamTimeout) })
		defer c.headerTimer.Stop()
	}
	h.proxy.ServeHTTP(&headFlushWriter{ResponseWriter: w}, out)
}

// asyncRequestCheck is the request body size from which the storability check runs beside the
// upstream call instead of before it (at the validator's ~0.5-1 GB/s, 256 KiB take 0.25-0.5 ms).
const asyncRequestCheck = 256 << 10

// readRequest reads the whole request body, up to MaxRequestBytes (errTooLarge beyond, without
// reading further when Content-Length already says so).
func (c *call) readRequest(r *http.Request) ([]byte, error) {
	return readBody(r, c.h.maxRequestBytes())
}

// captureRequest stores a request body as NeMo Gym's middleware does: a storable JSON object
// (capture.IsPayloadObject, after undoing any Content-Encoding) becomes request; any other non-empty
// body becomes request_raw (text, invalid UTF-8 replaced when written); an empty body gives neither.
// compact says the request object has no white space outside its strings (the line then copies it
// without a second walk).
func captureRequest(body []byte, codings []string, limit int64) (request json.RawMessage, raw *string, compact bool) {
	if len(body) == 0 {
		return nil, nil, false
	}
	b := body
	if len(codings) > 0 {
		if limit < 0 {
			limit = maxParseBytes
		}
		if dec, err := decodeAll(codings, body, limit); err == nil {
			b = dec
		}
	}
	if capture.IsPayloadObject(b) {
		return json.RawMessage(b), nil, capture.IsCompactJSON(b)
	}
	return nil, ptr(string(b)), false
}

// responseStarted is called with the upstream's response headers: it records status and provenance,
// marks the response with the model call id and wraps the body in the capture tee.
func (c *call) responseStarted(res *http.Response) {
	if c.headerTimer != nil {
		c.headerTimer.Stop()
	}
	c.status = res.StatusCode
	c.prov = relayed(res.Header, res.StatusCode)
	c.streaming = isEventStream(res.Header.Get("Content-Type"))
	c.contentLength = res.ContentLength
	c.body = newSpool(c.h.spoolThreshold(), c.h.SpoolDir)
	if c.streaming {
		c.stream = dialect.NewStream(c.dialect)
		maxEvent := int64(maxEventBytes)
		if limit := c.h.maxCaptureBytes(); limit >= 0 {
			maxEvent = min(maxEvent, limit)
		}
		c.stream.Limit(int(maxEvent), int(c.h.spoolThreshold()), c.h.SpoolDir)
		if c.clientCtx != nil {
			stream := c.stream
			c.stopOnLeave = context.AfterFunc(c.clientCtx, func() {
				c.clientLeft.Store(true)
				stream.Stop()
			})
		}
	}
	if codings := contentCodings(res.Header); len(codings) > 0 {
		inf, err := newInflater(codings, c.consume)
		if err != nil {
			c.decodeErr = err // captured as sent; the line says capture_parse_error
		} else {
			c.inflate = inf
		}
	}
	res.Header[modelCallIDKey] = []string{c.modelCallID} // Set, without canonicalizing the name each call
	if res.Body == http.NoBody || res.ContentLength == 0 {
		// No body (HEAD, 204, 304, Content-Length: 0): the client has the whole response with the
		// headers, so the line must be durable before they go out.
		c.finish(outcome{eof: true})
	}
	res.Body = &teeBody{c: c, rc: res.Body}
}

// isEventStream reports a text/event-stream media type (parameters and letter case ignored).
func isEventStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "text/event-stream"
}

// observe takes one chunk read from the upstream body (as sent, maybe compressed).
func (c *call) observe(p []byte) {
	if !c.firstByte {
		c.firstByte, c.ttft = true, time.Since(c.start)
	}
	c.read += int64(len(p))
	if c.inflate != nil {
		if c.capped && c.stream == nil {
			return // nothing more is kept, and only a stream needs decoding for its terminal event
		}
		c.inflate.Write(p)
	} else {
		c.consume(p)
	}
}

// consume takes decoded body bytes: spool them (up to MaxCaptureBytes) and feed the stream
// reassembly. Past the limit a stream is still decoded, for its terminal event only: the hold
// before that event stays.
func (c *call) consume(p []byte) {
	if c.stream != nil && !c.clientLeft.Load() && c.clientCtx != nil && c.clientCtx.Err() != nil {
		// The client is gone and the proxy has not noticed yet (it notices when it writes this
		// chunk): stop the reassembly now rather than when the AfterFunc goroutine runs.
		c.clientLeft.Store(true)
		c.stream.Stop()
	}
	if !c.capped {
		keep := p
		if limit := c.h.maxCaptureBytes(); limit >= 0 && c.kept+int64(len(p)) > limit {
			keep = p[:limit-c.kept]
			c.capped = true
			c.h.log.Warn("response body exceeds the capture limit; keeping its first bytes", "rollout_id", c.rolloutID,
				"model_call_id", c.modelCallID, "max_capture_bytes", limit)
		}
		c.keep(keep)
		if c.stream != nil && c.stream.Write(keep) {
			c.terminalHit = true
		}
		if !c.capped {
			return
		}
		if c.stream != nil {
			c.stream.Stop()
		}
		p = p[len(keep):]
	}
	if c.stream != nil && c.stream.Write(p) {
		c.terminalHit = true
	}
}

// keep adds decoded body bytes to the capture. A stream's body is only ever written as
// response_raw, so its bytes are escaped for the line's JSON string as they arrive, and kept in that
// form: when the terminal event comes, only its own chunk is left to escape. A spool failure is
// remembered by the spool and reported when the line is written.
func (c *call) keep(p []byte) {
	c.kept += int64(len(p))
	if c.stream == nil {
		c.body.Write(p)
		return
	}
	c.escaped = c.esc.Append(c.escaped[:0], p)
	c.body.Write(c.escaped)
}

// roundTripFailed handles an upstream round trip that produced no response: the client went away
// (cancelled, nothing to answer), or the gateway answers 504 upstream_timeout / 502
// upstream_unreachable itself.
func (c *call) roundTripFailed(w http.ResponseWriter, err error) {
	if errors.Is(err, errUnexpectedStatus) && c.clientCtx.Err() == nil {
		c.answerLocally(w, http.StatusBadGateway, ReasonUpstreamBadStatus, true, capture.StatusCategory(http.StatusBadGateway),
			"the upstream model server switched protocols on a model call: "+err.Error())
		return
	}
	switch c.classify(err) {
	case failCancelled:
		c.prov = provenance{attempted: ptr(true)} // sent, but nobody answered before the client left
		c.finish(outcome{failure: failCancelled})
	case failTimeout:
		c.answerLocally(w, http.StatusGatewayTimeout, ReasonUpstreamTimeout, true, string(failTimeout),
			"the upstream model server did not answer in time: "+err.Error())
	default:
		c.answerLocally(w, http.StatusBadGateway, ReasonUpstreamUnreachable, true, string(failConnection),
			"the upstream model server is unreachable: "+err.Error())
	}
}

// classify names the failure behind an upstream error.
func (c *call) classify(err error) failure {
	if cause := context.Cause(c.ctx); cause == errUpstreamTimeout || cause == errIdleTimeout {
		return failTimeout
	}
	if c.clientCtx.Err() != nil {
		return failCancelled
	}
	if isTimeout(err) {
		return failTimeout
	}
	return failConnection
}

// isTimeout reports a deadline or a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// answerLocally answers the client with a dialect-shaped error the gateway produced itself, after
// capturing it (response_source local): the body reaches the client only once the line is durable.
// Every answer the gateway gives in place of the upstream's goes through here, so the line records
// what the client got: status, local_response_reason and category (plus upstream_status_code when
// the upstream did answer, with a status the gateway does not relay). The line must not be written
// before the gateway knows the answer the client gets; a local answer to a call already written is
// a bug, logged as an error.
func (c *call) answerLocally(w http.ResponseWriter, status int, reason string, attempted bool, category, message string) {
	if c.finished {
		c.h.log.Error("bug: a captured call whose line is written was answered locally; the line records another answer",
			"rollout_id", c.rolloutID, "model_call_id", c.modelCallID, "recorded_status", c.status, "status", status, "reason", reason)
	}
	c.h.log.Warn("answered a captured call locally", "rollout_id", c.rolloutID, "model_call_id", c.modelCallID,
		"status", status, "reason", reason, "detail", message)
	c.status = status
	c.prov = local(reason, attempted)
	if c.upstreamStatus > 0 {
		c.prov.upstreamCode = ptr(c.upstreamStatus)
	}
	body := dialect.ErrorBody(c.dialect, status, reason, localMessage(reason, message))
	c.finish(outcome{localBody: body, localCategory: category})
	writeJSON(w, status, body, http.Header{modelCallIDKey: {c.modelCallID}})
}

// localMessage is the message of a local error body. It starts with the reason code, because the
// Anthropic error shape has no code member to carry it.
func localMessage(reason, text string) string { return reason + ": " + text }

// outcome says how a call ended.
type outcome struct {
	failure failure // failNone when the body ended or the terminal event was seen
	eof     bool    // the whole upstream body was read
	// localBody is set when the gateway answered itself: it is the response object and
	// localCategory the error category.
	localBody     []byte
	localCategory string
}

// finish captures the call exactly once: builds the exchange, appends it (or marks the rollout
// incomplete), releases the claim and counts the call, then settles it (settle: OnCaptured, the
// spool, the access log). Later calls do nothing.
func (c *call) finish(o outcome) { c.conclude(o, false) }

// conclude is finish; held leaves settle to the caller (finishHeld).
func (c *call) conclude(o outcome, held bool) {
	if c.finished {
		return
	}
	c.finished = true
	completed := time.Now()
	if c.requestParsed != nil {
		<-c.requestParsed
	}
	latency := completed.Sub(c.start)
	if c.inflate != nil {
		// At the end of the body this flushes the decoder's last output into the capture; in any
		// other case it only stops the decoder.
		if err := c.inflate.Close(); err != nil && o.eof && !(c.capped && c.stream == nil) {
			c.decodeErr = err
		}
		c.inflate = nil
	}
	if o.eof && c.stream != nil {
		c.stream.End()
	}
	if c.clientLeft.Load() && o.failure == failNone && o.localBody == nil {
		// The client went away before this end of the stream, and the reassembly stopped then:
		// the line says so, with the reconstruction of what came before.
		o.failure = failCancelled
	}

	ex := &capture.Exchange{
		ModelCallID:              c.modelCallID,
		Dialect:                  string(c.dialect),
		ModelRef:                 c.h.modelRef,
		StartedAt:                epochSeconds(c.start),
		CompletedAt:              epochSeconds(completed),
		LatencyMS:                capture.RoundMS(milliseconds(latency)),
		Request:                  c.request,
		RequestRaw:               c.requestRaw,
		ResponseSource:           c.prov.source,
		UpstreamAttempted:        c.prov.attempted,
		UpstreamStatusCode:       c.prov.upstreamCode,
		LocalResponseReason:      c.prov.localReason,
		ClientSessionID:          c.session,
		ClientAssistantMessageID: c.assistantMessage,
		ClientLogicalRequestID:   c.logicalRequest,
		ClientParentCallID:       c.parentCall,
		PayloadsChecked:          true, // request by captureRequest, response by c.response
		RequestCompact:           c.requestCompact,
		TokenCapture:             c.tokenCaptureJSON(),
		PathModel:                c.pathModel,
	}
	if c.firstByte {
		ex.LatencyTTFTMS = ptr(capture.RoundMS(milliseconds(c.ttft)))
	}
	if c.status > 0 {
		ex.StatusCode = ptr(c.status)
	}
	if o.localBody != nil {
		ex.Response = o.localBody
		ex.ErrorCategory = ptr(o.localCategory)
	} else {
		parsed := false
		if c.streaming {
			// The reconstruction goes straight into the line writer: its joined text may be
			// spooled, and is never built in memory.
			if c.body != nil && (o.failure == failNone || o.failure == failCancelled) && c.stream.HasResponse() && c.stream.Err() == nil {
				ex.ResponseTo, parsed = c.stream.WriteResponse, true
			}
		} else {
			ex.Response = c.response(o.failure)
			parsed = ex.Response != nil
		}
		v := verdict{status: c.status, failure: o.failure, streaming: c.streaming, decodeFailed: c.decodeErr != nil, parsed: parsed, tooLarge: c.capped}
		if c.stream != nil {
			v.terminal = c.stream.Terminal()
			v.tooLarge = v.tooLarge || c.stream.Truncated() > 0 || c.stream.OverLimit()
			if c.stream.OverLimit() {
				c.h.log.Warn("stream reassembly over its limits; the line keeps the reconstruction of what came before",
					"rollout_id", c.rolloutID, "model_call_id", c.modelCallID, "max_elements", dialect.MaxElements)
			}
		}
		if c.body != nil {
			v.bodyLen = c.kept
			switch {
			case v.bodyLen == 0:
			case c.stream != nil:
				c.body.Write(c.esc.Flush(c.escaped[:0])) // a UTF-8 sequence cut off at the end
				if b, ok := c.body.Memory(); ok {
					ex.ResponseRawEscaped = &capture.EscapedText{Bytes: b}
				} else {
					ex.ResponseRawEscaped = &capture.EscapedText{From: c.body.Reader()}
				}
			case ex.Response == nil:
				if b, ok := c.body.Memory(); ok {
					ex.ResponseRaw = ptr(string(b))
				} else {
					ex.ResponseRawFrom = c.body.Reader()
				}
			}
		}
		ex.ErrorCategory = errorCategory(v)
	}
	c.write(ex)
	if !held {
		// Every other caller answers after finish returns, or has nothing to answer.
		c.settle()
	}
}

// finishHeld is finish for the chunk a teeBody.Read is about to hand to the proxy: the line is made
// durable now, before the client can read the chunk, and the rest (settle) waits until the proxy
// has written the chunk to the client, so that none of it delays the terminal event.
func (c *call) finishHeld(o outcome) { c.conclude(o, true) }

// response is a non-streamed exchange's response object: none after an upstream failure
// (the call then records what arrived, as NeMo Gym does for a failed downstream) or past the capture limit; the body when it is one JSON object.
func (c *call) response(f failure) json.RawMessage {
	if c.body == nil || (f != failNone && f != failCancelled) {
		return nil
	}
	if c.capped {
		return nil // only a prefix of the body was kept
	}
	b, err := c.body.Bytes(maxParseBytes)
	if err != nil || !capture.IsPayloadObject(b) {
		return nil
	}
	return b
}

// write appends the line, or marks the rollout incomplete when that fails, then releases the claim.
func (c *call) write(ex *capture.Exchange) {
	h := c.h
	<-c.claimed
	var err error
	if c.body != nil && c.body.Err() != nil {
		err = c.body.Err() // the spool lost bytes: the line would be wrong
	} else {
		t0 := time.Now()
		err = h.Store.AppendExchange(c.rolloutID, ex)
		if err == nil {
			h.metrics.writeSeconds.Observe(time.Since(t0).Seconds())
		}
	}
	result := "ok"
	if err != nil {
		result = "failed"
		h.log.Error("capture write failed; marking rollout incomplete", "rollout_id", c.rolloutID, "model_call_id", c.modelCallID, "err", err)
		if merr := h.markIncomplete(c.rolloutID); merr != nil {
			result = "lost"
			h.log.Error("incomplete marker failed too; this call is missing from the capture", "rollout_id", c.rolloutID, "model_call_id", c.modelCallID, "err", merr)
		}
	}
	category := "none"
	if ex.ErrorCategory != nil {
		category = *ex.ErrorCategory
	}
	// The claim's release (one pwrite, about 1 µs) and the counters move with the line, so that a
	// reader or a scrape after the client has its answer sees the call finished.
	if c.claim != nil {
		if err := c.claim.Release(); err != nil {
			h.log.Warn("release capture claim", "rollout_id", c.rolloutID, "model_call_id", c.modelCallID, "err", err)
		}
	}
	h.metrics.writes.WithLabelValues(result).Inc()
	h.metrics.calls.WithLabelValues(string(c.dialect), statusClass(c.status), category).Inc()
	h.metrics.inFlight.Dec()
	c.written, c.result, c.category, c.unsettled = ex, result, category, true
}

// settle does what follows a call's durable line (or incomplete marker) and need not delay the
// client: OnCaptured, the spool and the stream reassembly closed, the access log line, and the
// drain count. It runs once; for a held chunk, after the proxy has written it to the client (the
// next teeBody Read or Close), else at the end of finish.
func (c *call) settle() {
	if !c.unsettled {
		return
	}
	c.unsettled = false
	h, ex := c.h, c.written
	// The access log and OnCaptured read the response's model, usage and ids: for a streamed
	// reconstruction (written through ResponseTo) they get the stream's summary, a second encode
	// made only when one of them is there to read it.
	seen := ex
	if ex.ResponseTo != nil {
		switch {
		case h.OnCaptured != nil:
			// Live span export carries message content up to SummaryTextBytes per text.
			c.summary = c.stream.Summary(dialect.SummaryTextBytes)
		case h.log.Enabled(context.Background(), slog.LevelInfo):
			c.summary = c.stream.Summary(0)
		}
		cp := *ex
		cp.ResponseTo, cp.Response = nil, c.summary
		seen = &cp
	}
	if c.result == "ok" {
		c.captured(seen)
	}
	if c.body != nil {
		c.body.Close()
	}
	if c.stopOnLeave != nil {
		c.stopOnLeave()
	}
	if c.stream != nil {
		c.stream.Close()
	}
	h.logCall(c, seen, c.category, c.result) // the access log line (accesslog.go)
	h.inflight.done()                        // last: Shutdown's drain waits for all of the above
}

// verdict is what the error ladder looks at.
type verdict struct {
	status       int // 0 when no status was seen
	failure      failure
	streaming    bool
	terminal     dialect.Terminal
	decodeFailed bool
	bodyLen      int64
	parsed       bool // a response object was parsed or reconstructed
	tooLarge     bool // the body passed MaxCaptureBytes, a stream event was too large to reassemble, or the stream passed the reassembly's limits
}

// errorCategory is NeMo Gym's error ladder (first rule that applies), plus our cancellation and
// capture limit:
//  1. the client went away before the end → "cancelled";
//  2. the upstream failed mid-call → the status category when the status is >= 400, else
//     "connection" / "timeout";
//  3. status >= 400 → the status category (capture.StatusCategory);
//  4. terminal error event → "upstream_error"; response.incomplete → "incomplete";
//  5. the body passed MaxCaptureBytes (response_raw holds its first bytes), a stream event was
//     too large to reassemble, or the stream passed the reassembly's limits (dialect.MaxElements
//     elements, a part index far beyond the parts that arrived) → "capture_too_large";
//  6. the body could not be decoded (Content-Encoding) → "capture_parse_error";
//  7. a stream without its terminal event → "stream_truncated";
//  8. a non-empty body that gave no response object → "capture_parse_error";
//  9. otherwise null.
func errorCategory(v verdict) *string {
	switch {
	case v.failure == failCancelled:
		return ptr(string(failCancelled))
	case v.failure != failNone:
		if v.status >= 400 {
			return ptr(capture.StatusCategory(v.status))
		}
		return ptr(string(v.failure))
	case v.status >= 400:
		return ptr(capture.StatusCategory(v.status))
	case v.streaming && v.terminal == dialect.TerminalError:
		return ptr(capture.CategoryUpstreamError)
	case v.streaming && v.terminal == dialect.TerminalIncomplete:
		return ptr(capture.CategoryIncomplete)
	case v.tooLarge:
		return ptr(capture.CategoryCaptureTooLarge)
	case v.decodeFailed:
		return ptr(capture.CategoryCaptureParseError)
	case v.streaming && v.terminal == dialect.TerminalNone:
		return ptr(capture.CategoryStreamTruncated)
	case v.bodyLen > 0 && !v.parsed:
		return ptr(capture.CategoryCaptureParseError)
	}
	return nil
}

func epochSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func milliseconds(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (h *Handler) maxRequestBytes() int64 {
	if h.MaxRequestBytes == 0 {
		return DefaultMaxRequestBytes
	}
	return h.MaxRequestBytes
}

func (h *Handler) upstreamTimeout() time.Duration {
	if h.UpstreamTimeout == 0 {
		return DefaultUpstreamTimeout
	}
	return h.UpstreamTimeout
}

func (h *Handler) idleTimeout() time.Duration {
	if h.IdleTimeout == 0 {
		return DefaultIdleTimeout
	}
	return h.IdleTimeout
}

func (h *Handler) maxCaptureBytes() int64 {
	if h.MaxCaptureBytes == 0 {
		return DefaultMaxCaptureBytes
	}
	if h.MaxCaptureBytes < 0 {
		return -1
	}
	return h.MaxCaptureBytes
}

func (h *Handler) spoolThreshold() int64 {
	if h.SpoolThreshold <= 0 {
		return DefaultSpoolThreshold
	}
	return h.SpoolThreshold
}
