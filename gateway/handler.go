package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/dialect"
	"github.com/modelcalls/modelcalls/rollout"
	"github.com/modelcalls/modelcalls/tokens"
)

// Defaults of the Handler fields (docs/gateway.md says why).
const (
	// DefaultUpstreamTimeout bounds the wait for the upstream's response headers: the 10 minutes the
	// OpenAI and Anthropic SDKs use as their default request timeout.
	DefaultUpstreamTimeout = 10 * time.Minute
	// DefaultIdleTimeout bounds the wait for each read of the upstream's body: Codex's default
	// stream idle timeout.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultMaxRequestBytes is the largest request body forwarded on an observed path (64 MiB).
	DefaultMaxRequestBytes = 64 << 20
	// DefaultSpoolThreshold is how much of a response body is kept in memory before the rest is
	// spooled to a temp file (1 MiB).
	DefaultSpoolThreshold = 1 << 20
	// DefaultRequestBodyTimeout is the longest wait for the next bytes of a captured call's request
	// body (1 minute): a client that stops sending mid-body is cut off after it.
	DefaultRequestBodyTimeout = time.Minute
	// DefaultMaxCaptureBytes is how many decoded response body bytes one capture keeps (64 MiB,
	// like the request limit).
	DefaultMaxCaptureBytes = 64 << 20
	// maxParseBytes bounds a non-streamed response body parsed as JSON for the capture line.
	maxParseBytes = 64 << 20
)

// Handler is the capture gateway: an http.Handler that reverse-proxies every request to Upstream and
// captures calls to the observed paths made under a /ng-rollout/<id> prefix. Configure it
// by setting fields before the first request; fields must not change afterwards. The zero value of
// every field but Upstream is usable.
//
// Besides proxying, the Handler answers GET /healthz (200 while running), GET /readyz (200, or 503
// once BeginShutdown or Shutdown was called) and GET /metrics (Prometheus text format, on the Handler's own registry),
// unless NoAdminEndpoints is set; AdminHandler serves the same endpoints on a listener of their own
// (what `modelcalls proxy --admin-listen` does, so that the proxy port forwards every path).
type Handler struct {
	// Upstream is the base URL calls are forwarded to: scheme, host and an optional base path, to
	// which the request path (prefix stripped) is appended. Required.
	Upstream *url.URL

	// Store receives one line per captured call. Nil disables capture: prefixes are still stripped
	// and rollout ids validated.
	Store *capture.Store

	// ModelServerName is model_ref.name of every captured call ({"type":"responses_api_models",
	// "name":...}); "" writes model_ref null, as NeMo Gym does for a server without a name.
	ModelServerName string

	// Transport performs upstream requests. Nil uses a clone of http.DefaultTransport with
	// compression handling off (the client's Accept-Encoding goes upstream as sent and compressed
	// bodies come back as sent) and 256 idle connections per host.
	Transport http.RoundTripper

	// UpstreamTimeout bounds the time from forwarding a captured call to the upstream's response
	// headers; past it the gateway answers 504 upstream_timeout itself. Zero means
	// DefaultUpstreamTimeout, negative means no limit. Uncaptured requests are not limited.
	UpstreamTimeout time.Duration

	// IdleTimeout bounds each read of a captured call's response body; past it the upstream request
	// is cancelled and the call is captured with error_category "timeout". Zero means
	// DefaultIdleTimeout, negative means no limit.
	IdleTimeout time.Duration

	// MaxRequestBytes is the largest request body accepted on an observed path; larger requests are
	// answered 413 request_too_large without contacting the upstream. Zero means
	// DefaultMaxRequestBytes, negative means no limit. Captured request bodies are held in memory
	// (the capture line stores them parsed), so this also bounds per-call request memory.
	MaxRequestBytes int64

	// RequestBodyTimeout bounds the wait for each read of a captured call's request body (the
	// gateway reads it whole before forwarding); past it the call is not forwarded, the client gets
	// 408 request_timeout (with Connection: close on HTTP/1), and the line records that answer
	// (status 408, error category "timeout", response_source local, upstream_attempted false). Zero
	// means DefaultRequestBodyTimeout, negative means no limit.
	RequestBodyTimeout time.Duration

	// SpoolThreshold is how many response body bytes of a captured call are kept in memory; the
	// rest goes to a temp file in SpoolDir. Zero means DefaultSpoolThreshold.
	SpoolThreshold int64

	// MaxCaptureBytes is how many decoded response body bytes one capture keeps (and, when below
	// 16 MiB, the largest SSE event it reassembles). The client always gets every byte; past the limit the capture
	// keeps the first MaxCaptureBytes as response_raw (and what they reconstruct), stops decoding
	// a compressed non-streamed body, and marks the line error_category "capture_too_large". Zero
	// means DefaultMaxCaptureBytes, negative means no limit.
	MaxCaptureBytes int64

	// SpoolDir is where spooled bodies go; "" means os.TempDir(). Spool files are unlinked when
	// created (where the OS allows), so nothing is left behind.
	SpoolDir string

	// Logger receives the gateway's log records; nil means slog.Default(). Request headers are
	// never logged.
	Logger *slog.Logger

	// NoAdminEndpoints forwards /healthz, /readyz and /metrics to the upstream instead of answering
	// them.
	NoAdminEndpoints bool

	// Tokens, when set, asks that engine for the token ids and logprobs of every captured Chat
	// Completions and Completions call: the members it needs (tokens.Engine.RequestFields) are
	// appended to the forwarded request when the client did not set them, and the capture line
	// keeps the request the client sent plus a token_capture object naming what was added, or why
	// nothing was (a streamed llama-server Chat call with tools, which the server refuses logprobs
	// on). For llama-server the prompt ids are fetched from the same server beside the call: a
	// Chat request through /apply-template and /tokenize, a Completions text prompt through
	// /tokenize. The response reaches the client unchanged, the ids and logprobs the engine added
	// included. A request with a Content-Encoding is forwarded as sent. "" changes nothing.
	Tokens tokens.Engine

	// AllowedOrigins are the web origins (scheme://host[:port]) besides the gateway's own whose
	// requests are served; any other request a browser marks as cross-site (an Origin header, or
	// Sec-Fetch-Site: cross-site) gets 403 cross_site_request, and is neither forwarded nor captured
	// (origin.go). Clients that send no Origin (SDKs, harnesses) are not affected. An entry that is
	// not an origin makes every request fail with 500, as a bad Upstream does.
	AllowedOrigins []string

	// OnCaptured, when set, is called once for every captured call whose capture line is durable
	// (not for calls whose write failed), on the call's goroutine, once the chunk that ended the call
	// has been written to the client (for a local answer, before it is written): it never delays the
	// terminal event, but it holds the handler, so it must return at once (live OTLP export only
	// enqueues). See CapturedCall.
	OnCaptured func(CapturedCall)

	once     sync.Once
	initErr  error
	proxy    *httputil.ReverseProxy
	metrics  *metrics
	log      *slog.Logger
	modelRef *rollout.ModelServerRef
	draining atomic.Bool
	inflight tracker
	warned   sync.Map // routing mistake kind -> struct{}: each is logged once
	fds      fdReserve

	allowedOrigins []string     // AllowedOrigins as compared (ParseOrigin)
	warnedOrigins  sync.Map     // refused origin -> struct{}: each is logged once at warn
	warnedCount    atomic.Int64 // distinct refused origins seen
}

func (h *Handler) init() {
	h.log = h.Logger
	if h.log == nil {
		h.log = slog.Default()
	}
	h.metrics = newMetrics()
	if h.ModelServerName != "" {
		h.modelRef = &rollout.ModelServerRef{Type: rollout.ModelServerRefType, Name: h.ModelServerName}
	}
	if h.Upstream == nil || h.Upstream.Scheme == "" || h.Upstream.Host == "" {
		h.initErr = errors.New("gateway: Upstream must be an absolute URL")
		return
	}
	transport := h.Transport
	if transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DisableCompression = true
		t.MaxIdleConnsPerHost = 256
		transport = t
	}
	h.proxy = &httputil.ReverseProxy{
		Rewrite:        h.rewrite,
		Transport:      transport,
		FlushInterval:  -1,
		BufferPool:     bufferPool{},
		ModifyResponse: h.modifyResponse,
		ErrorHandler:   h.errorHandler,
		ErrorLog:       slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
	}
	h.checkUpstreamPath()
	for _, o := range h.AllowedOrigins {
		n, err := ParseOrigin(o)
		if err != nil {
			h.initErr = fmt.Errorf("gateway: AllowedOrigins: %w", err)
			return
		}
		h.allowedOrigins = append(h.allowedOrigins, n)
	}
}

// Registry returns the Prometheus registry holding the gateway's metrics (metric names in
// metrics.go and docs/gateway.md), e.g. to serve it elsewhere.
func (h *Handler) Registry() *prometheus.Registry {
	h.once.Do(h.init)
	return h.metrics.reg
}

// BeginShutdown marks the start of a shutdown without waiting for anything: from now on /readyz
// answers 503 and new captured calls are refused (503 shutting_down, captured), while the calls in
// flight go on. A server that drains its connections before calling Shutdown calls it first, so
// that a load balancer polling /readyz stops sending calls while the drain runs.
func (h *Handler) BeginShutdown() {
	h.once.Do(h.init)
	h.draining.Store(true)
}

// Shutdown makes the Handler refuse new captured calls (503 shutting_down, captured) and waits
// until every captured call in flight has its capture line durable or its incomplete marker
// written. It returns ctx.Err() if ctx ends first. Uncaptured requests are still forwarded; stop
// the http.Server (Server.Shutdown) to stop accepting connections. Once drained, the Store's kept
// capture files and its claim slot file are closed (Store.Close; it stays usable).
func (h *Handler) Shutdown(ctx context.Context) error {
	h.BeginShutdown()
	err := h.inflight.wait(ctx)
	if err == nil && h.Store != nil {
		h.Store.Close()
	}
	return err
}

// ServeHTTP routes one request: requests a browser marks as cross-site (403, origin.go), admin
// endpoints, invalid rollout ids (400), captured calls, and everything else forwarded uncaptured
// with the prefix stripped.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.once.Do(h.init)
	if h.refuseCrossSite(w, r) {
		return
	}
	if !h.NoAdminEndpoints && h.serveAdmin(w, r) {
		return
	}
	if h.initErr != nil {
		http.Error(w, h.initErr.Error(), http.StatusInternalServerError)
		return
	}
	// The rollout id is taken from the path as the client wrote it (escaped), so an escaped slash
	// or dot inside the id segment is part of the id, and fails validation with a 400, instead
	// of being decoded into a path that silently goes out uncaptured.
	escaped := r.URL.EscapedPath()
	id, rawRest, prefixed := rollout.SplitPath(escaped)
	if !prefixed && strings.HasPrefix(escaped, "/"+rollout.PrefixSegment+"//") {
		// An empty id, as a base URL built from an unset variable gives: meant for a rollout.
		rest := strings.TrimPrefix(escaped, "/"+rollout.PrefixSegment+"/")
		h.invalidRolloutID(w, r, "", rest, rollout.Validate(""))
		return
	}
	route := r
	if prefixed {
		rest, err := url.PathUnescape(rawRest)
		if err == nil {
			err = rollout.Validate(id)
		}
		if err != nil {
			h.invalidRolloutID(w, r, id, rawRest, err)
			return
		}
		u := *r.URL
		u.Path = rest
		u.RawPath = rawRest // keeps the client's escaping of the rest
		// The rollout id rides in the context to the outbound request, for the redirect rewrite.
		route = r.Clone(context.WithValue(r.Context(), prefixKey{}, id))
		route.URL = &u
	}
	// An h2c upgrade request (curl --http2 on http://) is served as the HTTP/1.1 request it also
	// is: the upgrade is declined by ignoring it, and its headers do not go upstream.
	dropH2CUpgrade(route.Header)
	d, observed := dialect.ForPath(route.URL.Path)
	var reason string // why a model call goes uncaptured, for its access log line; "" when not one
	switch {
	case isUpgrade(route.Header):
		h.metrics.uncaptured.WithLabelValues("upgrade").Inc()
	case !prefixed:
		h.metrics.uncaptured.WithLabelValues("unprefixed").Inc()
		if h.checkBuriedPrefix(escaped) {
			reason = "prefix_not_leading"
		} else if observed {
			reason = "unprefixed"
			h.checkUnprefixed(r.Host, route.URL.Path)
		}
	case !observed:
		h.metrics.uncaptured.WithLabelValues("not_observed").Inc()
		if h.checkModelPath(id, route.URL.Path) {
			reason = "not_model_path"
		}
	case h.Store == nil:
		h.metrics.uncaptured.WithLabelValues("no_store").Inc()
		reason = "no_store"
	default:
		guard := h.guardRequestBody(w, route)
		h.serveCaptured(w, route, id, d, guard)
		guard.finish()
		return
	}
	if route.Body != nil && route.Body != http.NoBody {
		if route == r {
			route = r.Clone(r.Context())
		}
		route.Body = &countingBody{rc: route.Body, n: h.metrics.reqBytes}
	}
	hw := &headFlushWriter{ResponseWriter: w}
	if reason == "" {
		h.proxy.ServeHTTP(hw, route)
		return
	}
	start := time.Now()
	h.proxy.ServeHTTP(hw, route)
	h.logUncaptured(r, id, reason, hw.status, time.Since(start))
}

// headFlushWriter is the ResponseWriter the proxy writes a response through. The proxy, flushing
// every chunk (FlushInterval -1), also flushes the headers on their own as soon as they are
// written; for a body of known length (Content-Length set) that is one more write to the client
// than a proxy with the default flush interval makes (it sends the headers with the first chunk),
// and the client reads the headers and the body separately. headFlushWriter drops that early
// flush, so the headers go out with the first chunk; every chunk is still flushed as it is
// written, and a stream (no length, text/event-stream) still gets its headers at once.
type headFlushWriter struct {
	http.ResponseWriter
	wrote  bool // a body chunk was written
	status int  // the status written, 0 before the headers
}

func (w *headFlushWriter) WriteHeader(code int) {
	if w.status == 0 || code >= 200 { // 1xx interim responses are replaced by the final status
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *headFlushWriter) Write(p []byte) (int, error) {
	w.wrote = true
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// FlushError flushes, except before the first chunk of a body of known length. The proxy calls it
// under the same lock as Write (httputil's maxLatencyWriter), from its flush timer too.
func (w *headFlushWriter) FlushError() error {
	if !w.wrote && w.Header().Get("Content-Length") != "" && !isEventStream(w.Header().Get("Content-Type")) {
		return nil
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the writer underneath (deadlines, hijacking).
func (w *headFlushWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// AdminHandler serves the admin endpoints (GET|HEAD /healthz, /readyz, /metrics) and answers 404
// to everything else, for a listener of their own; set NoAdminEndpoints so that the proxy itself
// forwards those paths to the upstream.
func (h *Handler) AdminHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.once.Do(h.init)
		if !h.serveAdmin(w, r) {
			http.NotFound(w, r)
		}
	})
}

// serveAdmin answers the admin endpoints; it reports false for every other request.
func (h *Handler) serveAdmin(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.URL.Path {
	case "/healthz":
		io.WriteString(w, "ok\n")
	case "/readyz":
		if h.draining.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return true
		}
		if h.initErr != nil {
			http.Error(w, h.initErr.Error(), http.StatusServiceUnavailable)
			return true
		}
		io.WriteString(w, "ready\n")
	case "/metrics":
		promhttp.HandlerFor(h.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	default:
		return false
	}
	return true
}

// invalidRolloutID answers a prefixed request whose id is invalid: 400 with a dialect-shaped body
// (OpenAI-shaped off the observed paths), logged and counted, not forwarded and not captured (there
// is no valid file to write to).
func (h *Handler) invalidRolloutID(w http.ResponseWriter, r *http.Request, id, rest string, err error) {
	h.metrics.invalidIDs.Inc()
	d := dialect.ErrorDialect(rest)
	shown := id
	if len(shown) > 64 {
		shown = shown[:64] + "..."
	}
	h.log.Warn("invalid rollout id in request path", "rollout_id", shown, "path", rest, "method", r.Method, "err", err)
	msg := fmt.Sprintf("invalid rollout id %q in /%s/<rollout_id>: it must match ^[A-Za-z0-9][A-Za-z0-9._-]*$ and be at most %d bytes",
		shown, rollout.PrefixSegment, rollout.MaxIDLen)
	writeJSON(w, http.StatusBadRequest, dialect.ErrorBody(d, http.StatusBadRequest, ReasonInvalidRolloutID, localMessage(ReasonInvalidRolloutID, msg)), nil)
}

// rewrite routes the outbound request to Upstream; the inbound path is already stripped. The
// client's headers go upstream as sent (no X-Forwarded-* added; ReverseProxy drops hop-by-hop
// headers and client-sent Forwarded/X-Forwarded-*), Host becomes the upstream's.
func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(h.Upstream)
}

// modifyResponse keeps a redirect's Location inside the gateway (rewriteLocation), names an
// upstream 404 on a model path once (routing.go), starts the capture of a captured call's response,
// and counts relayed bytes of every other response.
func (h *Handler) modifyResponse(res *http.Response) error {
	ctx := res.Request.Context()
	if res.StatusCode >= 300 && res.StatusCode < 400 {
		id, _ := ctx.Value(prefixKey{}).(string)
		h.rewriteLocation(res.Header, id)
	}
	c, _ := ctx.Value(callKey{}).(*call)
	if c != nil && res.StatusCode == http.StatusNotFound {
		msg := "the upstream answered 404 on a model path: check that --upstream is the model server's base URL (scheme://host[:port], plus a base path only if the server has one, without /v1)"
		args := []any{"rollout_id", c.rolloutID, "upstream_path", res.Request.URL.Path, "upstream", h.Upstream.Redacted()}
		if res.Header.Get("x-nemo-gym-local-response-reason") == "replay_not_recorded" {
			// The upstream is a modelcalls replay (it marks its answers with provenance headers): it
			// keys recorded calls by the /ng-rollout/<id> prefix this gateway stripped.
			msg = "the upstream is a modelcalls replay and answered 404 replay_not_recorded: the gateway strips the /" + rollout.PrefixSegment + "/<id> prefix before forwarding, and the replay needs it to find the rollout"
			args = append(args, "fix", "to capture a replayed run use `modelcalls replay --capture-dir-out DIR2` instead of a proxy; or, for one rollout, set --upstream to "+strings.TrimRight(h.Upstream.Redacted(), "/")+rollout.PathPrefix(c.rolloutID))
		}
		h.warnOnce("upstream_404", msg, args...)
	}
	if c == nil {
		if res.StatusCode != http.StatusSwitchingProtocols {
			res.Body = &countingBody{rc: res.Body, n: h.metrics.respBytes}
		}
		return nil
	}
	if res.StatusCode < 200 {
		// A final 1xx on a captured call (101 Switching Protocols; the transport relays and skips the
		// other informational answers itself): the gateway never asked to switch, so it answers 502
		// itself (roundTripFailed) instead of relaying the switch.
		c.upstreamStatus = res.StatusCode
		return fmt.Errorf("%w: %d %s", errUnexpectedStatus, res.StatusCode, http.StatusText(res.StatusCode))
	}
	c.responseStarted(res)
	return nil
}

// errorHandler handles a failed upstream round trip: captured calls get their local answer and
// capture line; other requests get a dialect-shaped 502 or 504 (nothing when the client is gone).
func (h *Handler) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	if c, _ := r.Context().Value(callKey{}).(*call); c != nil {
		c.roundTripFailed(w, err)
		return
	}
	if r.Context().Err() != nil {
		return // the client went away; nobody to answer
	}
	d := dialect.ErrorDialect(r.URL.Path)
	status, reason := http.StatusBadGateway, ReasonUpstreamUnreachable
	if isTimeout(err) {
		status, reason = http.StatusGatewayTimeout, ReasonUpstreamTimeout
	}
	h.log.Warn("upstream request failed", "path", r.URL.Path, "err", err)
	writeJSON(w, status, dialect.ErrorBody(d, status, reason, localMessage(reason, "upstream request failed: "+err.Error())), nil)
}

// writeJSON writes a complete JSON response with extra headers.
func writeJSON(w http.ResponseWriter, status int, body []byte, extra http.Header) {
	hdr := w.Header()
	for k, v := range extra {
		hdr[k] = v
	}
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// isUpgrade reports a protocol upgrade request (e.g. Codex's WebSocket attempt on /v1/responses):
// a Connection header listing "upgrade" and a non-empty Upgrade header.
func isUpgrade(h http.Header) bool {
	if h.Get("Upgrade") == "" {
		return false
	}
	for _, v := range h.Values("Connection") {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// tracker counts captured calls whose capture is not finished, and lets Shutdown wait for zero.
type tracker struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n drops to zero; nil while n is zero
}

func (t *tracker) add() {
	t.mu.Lock()
	if t.n == 0 {
		t.zero = make(chan struct{})
	}
	t.n++
	t.mu.Unlock()
}

func (t *tracker) done() {
	t.mu.Lock()
	t.n--
	if t.n == 0 {
		close(t.zero)
		t.zero = nil
	}
	t.mu.Unlock()
}

func (t *tracker) wait(ctx context.Context) error {
	for {
		t.mu.Lock()
		ch := t.zero
		t.mu.Unlock()
		if ch == nil {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// bufferPool recycles ReverseProxy's 32 KiB copy buffers.
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *(copyBuffers.Get().(*[]byte)) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }
