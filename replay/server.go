package replay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/dialect"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/rollout"
)

// Match is how a request finds its recorded answer.
type Match string

const (
	// Strict answers a request with a recorded call of its rollout whose request is equal after
	// canonicalising (key order and number spelling ignored) and dropping the ignored keys.
	// Identical recorded requests answer in recorded order, each once.
	Strict Match = "strict"
	// Sequence answers the N-th call of a rollout with its N-th recorded call, whatever it sent.
	Sequence Match = "sequence"
)

// DefaultIgnoreKeys are the request members strict matching ignores: values a harness changes
// from run to run without changing what it asks. metadata (Claude Code's metadata.user_id holds
// its session id), user, stream_options (usage reporting, not content), prompt_cache_key (a
// session id in pi and Codex Responses calls), client_metadata (Codex's session and turn ids),
// input.id (the ids of Responses input items: Codex makes up fresh msg_/fco_ ids for its own
// items on every run; ids that came from the model's answers are replayed identically anyway).
var DefaultIgnoreKeys = []string{"metadata", "user", "stream_options", "prompt_cache_key", "client_metadata", "input.id"}

// Miss codes: the code of the error body and the local_response_reason of a re-capture.
const (
	ReasonReplay    = "replay"           // a recorded answer, replayed
	ReasonMiss      = "replay_miss"      // no recorded request matches
	ReasonExhausted = "replay_exhausted" // the matching recorded answers were all served
	ReasonNotCall   = "replay_not_recorded"
)

// MissStatus is the HTTP status of a miss and of an exhausted call: 400, the request is not one
// the capture can answer. Harnesses show a 400's message
// as it is (Claude Code turns a 404 into "an issue with the selected model" and hides it), and the
// OpenAI and Anthropic SDKs do not retry it (they retry 408, 409, 429 and 5xx).
const MissStatus = http.StatusBadRequest

// NotRecordedStatus answers a request that is not a model call under a rollout prefix (Claude
// Code's HEAD /api/hello, /v1/models, count_tokens): 404, as a model server without that endpoint.
const NotRecordedStatus = http.StatusNotFound

// Server answers model calls under /ng-rollout/<rollout_id>/ from the rollout's capture in
// Source. Set the fields, then serve; they must not change afterwards.
type Server struct {
	// Source holds the captures answered from. Required.
	Source *capture.Store
	// Match is Strict (the zero value) or Sequence.
	Match Match
	// Timing paces the answers; the zero value is the recorded pace.
	Timing Timing
	// IgnoreKeys are request parts left out of strict matching: top-level names or dotted paths
	// into nested objects ("metadata.user_id"; a step into an array applies to each element), each
	// dropped; or "PATH~REGEXP", which keeps the member but removes every match of REGEXP (Go
	// syntax) from its string value, or from each string of its array, before comparing
	// ("input.output~Wall time: [0-9.]+ seconds"). Nil means DefaultIgnoreKeys; an empty non-nil
	// slice ignores nothing. CheckIgnoreKeys validates them.
	IgnoreKeys []string
	// Upstream, when set, receives misses, exhausted calls and requests that are not model calls
	// (prefix stripped, as the gateway forwards), instead of an error answer.
	Upstream *url.URL
	// Transport performs forwarded requests; nil uses http.DefaultTransport with compression
	// handling off.
	Transport http.RoundTripper
	// Logger receives one record per miss and per answered call (debug); nil is slog.Default().
	Logger *slog.Logger
	// MaxRequestBytes is the largest request body read (and the largest it may decode to); larger
	// ones are answered 413 request_too_large. Zero means gateway.DefaultMaxRequestBytes (64 MiB),
	// negative means no limit.
	MaxRequestBytes int64
	// RequestBodyTimeout bounds the wait for each read of a request body; past it the request is
	// answered 408 request_timeout (with Connection: close on HTTP/1). Zero means
	// gateway.DefaultRequestBodyTimeout (1 minute), negative means no limit.
	RequestBodyTimeout time.Duration

	// clock paces the answers; nil is real time. Tests set a clock that records each wait.
	clock clock

	once     sync.Once
	log      *slog.Logger
	ignore   []ignoreRule
	proxy    *httputil.ReverseProxy
	metrics  *metrics
	mu       sync.Mutex
	rollouts map[string]*rolloutState
}

// rolloutState is one rollout's recorded calls and what has been answered from them.
type rolloutState struct {
	mu      sync.Mutex
	calls   []*recorded
	next    int // Sequence: index of the next call to answer
	damaged int // unreadable capture lines, skipped
	err     error
}

func (s *Server) init() {
	if s.clock == nil {
		s.clock = wallClock{}
	}
	s.log = s.Logger
	if s.log == nil {
		s.log = slog.Default()
	}
	keys := s.IgnoreKeys
	if keys == nil {
		keys = DefaultIgnoreKeys
	}
	for _, k := range keys {
		if k = strings.TrimSpace(k); k != "" {
			r, err := parseIgnoreRule(k)
			if err != nil {
				s.log.Warn("replay: ignore rule left out", "err", err) // CheckIgnoreKeys says it first
				continue
			}
			s.ignore = append(s.ignore, r)
		}
	}
	s.rollouts = map[string]*rolloutState{}
	s.metrics = newMetrics(s)
	if s.Upstream != nil {
		t := s.Transport
		if t == nil {
			dt := http.DefaultTransport.(*http.Transport).Clone()
			dt.DisableCompression = true
			t = dt
		}
		up := s.Upstream
		s.proxy = &httputil.ReverseProxy{
			Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(up) },
			Transport:     t,
			FlushInterval: -1,
			ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		}
	}
}

// Registry returns the Prometheus registry of the replay's counters (metrics.go).
func (s *Server) Registry() *prometheus.Registry {
	s.once.Do(s.init)
	return s.metrics.reg
}

// ServeHTTP answers one request: a model call under a rollout prefix from the capture, anything
// else forwarded to Upstream or answered NotRecordedStatus.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.once.Do(s.init)
	start := s.clock.Now()
	id, rawRest, prefixed := rollout.SplitPath(r.URL.EscapedPath())
	rest := r.URL.Path
	if prefixed {
		if err := rollout.Validate(id); err != nil {
			// err names the id once ("invalid rollout id \"..%2Fx\": must start with ...").
			s.log.Warn("invalid rollout id in request path", "method", r.Method, "path", r.URL.EscapedPath(), "err", err)
			writeError(w, pathDialect(rawRest), http.StatusBadRequest, "invalid_rollout_id",
				fmt.Sprintf("%v (the path segment after /%s/)", err, rollout.PrefixSegment))
			return
		}
		var err error
		if rest, err = url.PathUnescape(rawRest); err != nil {
			writeError(w, pathDialect(rawRest), http.StatusBadRequest, "invalid_path",
				fmt.Sprintf("the request path after /%s/%s does not unescape: %v", rollout.PrefixSegment, id, err))
			return
		}
	}
	d, observed := dialect.ForPath(rest)
	if !prefixed || !observed {
		s.metrics.add(&s.metrics.notRecorded)
		if s.proxy != nil {
			s.forward(w, r, rest, rawRest, prefixed, nil)
			return
		}
		if !prefixed && observed {
			// A model call without the rollout prefix: most likely a capture gateway (modelcalls
			// proxy) in front of the replay, which strips the prefix before it forwards, as a real
			// model server needs. Name the cause and the two wirings that work.
			msg := unprefixedMessage(r.Method, rest)
			s.log.Warn("replay: model call without a rollout prefix", "method", r.Method, "path", rest,
				"cause", "no /"+rollout.PrefixSegment+"/<id>/ prefix: a capture gateway in front strips it before forwarding",
				"fix", unprefixedFix)
			writeError(w, d, NotRecordedStatus, ReasonNotCall, msg)
			return
		}
		s.log.Debug("replay: not a recorded model call", "method", r.Method, "path", rest, "prefixed", prefixed)
		writeError(w, pathDialect(rest), NotRecordedStatus, ReasonNotCall,
			fmt.Sprintf("%s %s is not a recorded model call: replay answers POST /%s/<rollout_id>/v1/{responses,chat/completions,messages} and /%s/<rollout_id>/v1beta/models/<model>:{generateContent,streamGenerateContent}",
				r.Method, rest, rollout.PrefixSegment, rollout.PrefixSegment))
		return
	}
	body, raw, err := readBody(w, r, s.maxRequestBytes(), s.requestBodyTimeout())
	switch {
	case errors.Is(err, gateway.ErrRequestTooLarge):
		s.log.Warn("replay: request body too large", "rollout_id", id, "max_request_bytes", s.maxRequestBytes())
		writeError(w, d, http.StatusRequestEntityTooLarge, gateway.ReasonRequestTooLarge,
			fmt.Sprintf("the request body exceeds the replay's limit of %d bytes (--max-request-bytes)", s.maxRequestBytes()))
		return
	case errors.Is(err, gateway.ErrRequestTimeout):
		s.log.Info("replay: request body stopped arriving", "rollout_id", id, "request_body_timeout", s.requestBodyTimeout().String())
		writeError(w, d, http.StatusRequestTimeout, gateway.ReasonRequestTimeout, "the request body stopped arriving (--request-body-timeout)")
		return
	case err != nil:
		writeError(w, d, http.StatusBadRequest, "request_unreadable", "cannot read the request body: "+err.Error())
		return
	}
	// A dialect that asks for a stream in the URL (Gemini's :streamGenerateContent?alt=sse) is
	// answered only by a call recorded the same way: the body does not say.
	want := anyStream
	if stream, known := dialect.StreamOnPath(rest, r.URL.RawQuery); known {
		want = jsonAnswer
		if stream {
			want = streamAnswer
		}
	}
	rc, reason, msg := s.match(id, d, want, body)
	if rc == nil {
		if reason == ReasonExhausted {
			s.metrics.add(&s.metrics.exhausted)
		} else {
			s.metrics.add(&s.metrics.misses)
		}
		s.log.Warn("replay miss", "rollout_id", id, "dialect", d, "reason", reason, "forwarded", s.proxy != nil, "detail", msg)
		if s.proxy != nil {
			s.forward(w, r, rest, rawRest, true, raw)
			return
		}
		writeError(w, d, MissStatus, reason, msg)
		return
	}
	s.metrics.add(&s.metrics.served)
	s.log.Debug("replaying recorded call", "rollout_id", id, "model_call_id", rc.modelCallID, "capture_line", rc.line,
		"status", rc.status, "stream", rc.stream)
	s.answer(w, r, rc, start)
}

func (s *Server) maxRequestBytes() int64 {
	if s.MaxRequestBytes == 0 {
		return gateway.DefaultMaxRequestBytes
	}
	return s.MaxRequestBytes
}

func (s *Server) requestBodyTimeout() time.Duration {
	if s.RequestBodyTimeout == 0 {
		return gateway.DefaultRequestBodyTimeout
	}
	return s.RequestBodyTimeout
}

// unprefixedFix is how to wire a capture gateway and a replay together: the gateway strips the
// rollout prefix before it forwards, and the replay needs it to find the rollout.
const unprefixedFix = "to capture a replayed run use `modelcalls replay --capture-dir-out DIR2`; " +
	"or, for one rollout, point the proxy's --upstream at http://REPLAY/" + rollout.PrefixSegment + "/<id>"

// unprefixedMessage is the replay_not_recorded message of a model call that came without the
// /ng-rollout/<id>/ prefix.
func unprefixedMessage(method, path string) string {
	return fmt.Sprintf("%s: %s %s is not a recorded model call: it has no /%s/<id>/ prefix, so replay cannot tell its rollout "+
		"(a capture gateway in front, such as modelcalls proxy, strips the prefix before forwarding); %s",
		ReasonNotCall, method, path, rollout.PrefixSegment, unprefixedFix)
}

// pathDialect is the dialect whose error shape an answer on p takes (dialect.ErrorDialect).
func pathDialect(p string) dialect.Dialect { return dialect.ErrorDialect(p) }

// state returns the rollout's recorded calls, reading its capture on first use.
func (s *Server) state(id string) *rolloutState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.rollouts[id]; ok {
		return st
	}
	st := &rolloutState{}
	entries, damages, err := s.Source.ReadAvailable(id)
	if err == nil {
		st.calls, err = loadRecorded(entries, s.ignore)
	}
	st.err, st.damaged = err, len(damages)
	if err != nil {
		s.log.Error("cannot read the rollout's capture", "rollout_id", id, "err", err)
	} else if len(damages) > 0 {
		s.log.Warn("capture has damaged lines; they are not replayed", "rollout_id", id, "damaged_lines", len(damages))
	}
	s.rollouts[id] = st
	return st
}

// match finds the recorded call that answers body, marking it used. With no answer it returns the
// reason (ReasonMiss or ReasonExhausted) and a message naming the nearest recorded request and the
// first difference.
func (s *Server) match(id string, d dialect.Dialect, want answerKind, body []byte) (*recorded, string, string) {
	st := s.state(id)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err != nil {
		return nil, ReasonMiss, fmt.Sprintf("%s: the capture of rollout %q cannot be read: %v", ReasonMiss, id, st.err)
	}
	if len(st.calls) == 0 {
		return nil, ReasonMiss, fmt.Sprintf("%s: rollout %q has no recorded calls in %s", ReasonMiss, id, s.Source.Dir())
	}
	if s.Match == Sequence {
		if st.next >= len(st.calls) {
			return nil, ReasonExhausted, fmt.Sprintf("%s: rollout %q recorded %d calls and all were answered (match sequence)%s",
				ReasonExhausted, id, len(st.calls), againHint)
		}
		rc := st.calls[st.next]
		st.next++
		rc.used = true
		return rc, "", ""
	}

	// A live request is compared as text (compare): no tree is built for it, so a match costs no
	// memory beyond the request's bytes.
	var req []byte
	if len(body) > 0 && capture.IsPayloadObject(body) {
		req = body
	}
	type candidate struct {
		rc    *recorded
		first *difference
		n     int
	}
	var nearest *candidate
	equal := 0
	for _, rc := range st.calls {
		if rc.cancelled { // a call the recording never completed is not an answer in strict mode
			continue
		}
		c := candidate{rc: rc}
		switch {
		case rc.dialect != d:
			c.first = &difference{path: "dialect", recorded: string(rc.dialect), got: string(d)}
			c.n = maxCount + 1
		case want != anyStream && rc.stream != (want == streamAnswer):
			c.first = &difference{path: "path (stream)", recorded: streamText(rc.stream), got: streamText(want == streamAnswer)}
			c.n = maxCount + 1
		case req != nil && rc.request != nil:
			c.first, c.n = compare(rc.request, req, s.ignore)
		case req == nil && rc.request == nil && bytes.Equal([]byte(deref(rc.requestRaw)), body):
		default:
			c.first = &difference{path: "$", recorded: rawKind(rc), got: bodyKind(req, body)}
			c.n = maxCount
		}
		if c.first == nil {
			if !rc.used {
				rc.used = true
				return rc, "", ""
			}
			equal++
			continue
		}
		if nearest == nil || c.n < nearest.n {
			nearest = &c
		}
	}
	if equal > 0 {
		return nil, ReasonExhausted, fmt.Sprintf("%s: rollout %q recorded this request %s and every answer was served%s",
			ReasonExhausted, id, timesText(equal), againHint)
	}
	if nearest == nil {
		return nil, ReasonMiss, fmt.Sprintf("%s: rollout %q has no completed recorded call (all were cancelled while recording; --match sequence replays them)", ReasonMiss, id)
	}
	f := nearest.first
	return nil, ReasonMiss, fmt.Sprintf("%s: no recorded %s call of rollout %q matches this request; nearest is call %d (capture line %d, model_call_id %s), first difference at %s: recorded %s, request %s",
		ReasonMiss, d, id, nearest.rc.index, nearest.rc.line, nearest.rc.modelCallID, f.path, f.recorded, f.got)
}

// againHint ends an exhausted call's message: a replay serves each recorded answer once, so a
// harness run a second time against the same replay is exhausted from its first call on.
const againHint = "; each recorded answer is served once: restart modelcalls replay to replay the run again"

// answerKind is what a request's URL asks for: an event stream, a JSON answer, or (when the URL
// does not say) either.
type answerKind int

const (
	anyStream answerKind = iota
	streamAnswer
	jsonAnswer
)

func streamText(stream bool) string {
	if stream {
		return "an event stream"
	}
	return "a JSON answer"
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func rawKind(rc *recorded) string {
	switch {
	case rc.request != nil:
		return "a JSON object"
	case rc.requestRaw != nil:
		return fmt.Sprintf("a non-JSON body of %d bytes", len(*rc.requestRaw))
	}
	return "an empty body"
}

func bodyKind(req, body []byte) string {
	switch {
	case req != nil:
		return "a JSON object"
	case len(body) > 0:
		return fmt.Sprintf("a non-JSON body of %d bytes", len(body))
	}
	return "an empty body"
}

// Provenance headers of a replayed answer: a gateway in front (modelcalls proxy, or replay's own
// re-capture) records response_source "local", upstream_attempted false and the reason.
func setProvenance(h http.Header, reason string) {
	h.Set("x-nemo-gym-response-source", "local")
	h.Set("x-nemo-gym-upstream-attempted", "false")
	h.Set("x-nemo-gym-local-response-reason", reason)
}

// answer sends a recorded call: status, content type and the model call id at once for a stream
// (at TTFT otherwise), then each piece of the body on its schedule, then the end of the body at
// the recorded latency. A call recorded as failing mid-body (or cancelled, under Sequence) ends by
// breaking the connection.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, rc *recorded, start time.Time) {
	ctx := r.Context()
	wait := func(offset time.Duration) bool {
		return s.clock.WaitUntil(ctx, start.Add(s.Timing.scale(offset)))
	}
	if rc.status == 0 {
		// Recorded without any response (the client left before the headers): nothing to send.
		wait(rc.latency)
		panic(http.ErrAbortHandler)
	}
	h := w.Header()
	if rc.contentType != "" {
		h.Set("Content-Type", rc.contentType)
	}
	if rc.modelCallID != "" {
		h.Set("x-nemo-gym-model-call-id", rc.modelCallID)
	}
	setProvenance(h, ReasonReplay)
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	pieces := rc.chunks()
	at := schedule(len(pieces), rc.ttft, rc.latency)
	if rc.stream || len(pieces) == 0 {
		if len(pieces) == 0 && !wait(rc.latency) {
			return
		}
		w.WriteHeader(rc.status)
		flush()
	}
	for i, p := range pieces {
		if !wait(at[i]) {
			return
		}
		if i == 0 && !rc.stream {
			w.WriteHeader(rc.status)
		}
		if _, err := w.Write(p); err != nil {
			return
		}
		flush()
	}
	if !wait(rc.latency) {
		return
	}
	if rc.abort {
		panic(http.ErrAbortHandler)
	}
}

// forward sends a request replay has no answer for to Upstream, prefix stripped. body, when not
// nil, is the request body already read.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, rest, rawRest string, prefixed bool, body []byte) {
	s.metrics.add(&s.metrics.forwarded)
	out := r.Clone(r.Context())
	if prefixed {
		u := *r.URL
		u.Path, u.RawPath = rest, rawRest
		out.URL = &u
	}
	if body != nil {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
		out.TransferEncoding = nil
	}
	s.proxy.ServeHTTP(w, out)
}

// writeError answers with the dialect's error shape; the message starts with the code, since the
// Anthropic shape has no code member.
func writeError(w http.ResponseWriter, d dialect.Dialect, status int, code, msg string) {
	if !strings.HasPrefix(msg, code+": ") {
		msg = code + ": " + msg
	}
	body := dialect.ErrorBody(d, status, code, msg)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", fmt.Sprint(len(body)))
	setProvenance(h, code)
	w.WriteHeader(status)
	w.Write(body)
}

// Summary counts what a replay answered.
type Summary struct {
	Served      int64 // calls answered from a capture
	Misses      int64 // calls no recorded request matched
	Exhausted   int64 // calls whose matching recorded answers were all served
	Forwarded   int64 // requests sent to Upstream (misses, exhausted, not model calls)
	NotRecorded int64 // requests that are not model calls under a rollout prefix
	Unused      int64 // recorded answers of the rollouts asked for that were never served
}

func (m Summary) String() string {
	return fmt.Sprintf("served %d, misses %d, exhausted %d, forwarded %d, not model calls %d, recorded answers not asked for %d",
		m.Served, m.Misses, m.Exhausted, m.Forwarded, m.NotRecorded, m.Unused)
}

// Summary returns the counts so far.
func (s *Server) Summary() Summary {
	s.once.Do(s.init)
	return Summary{
		Served:      s.metrics.served.Load(),
		Misses:      s.metrics.misses.Load(),
		Exhausted:   s.metrics.exhausted.Load(),
		Forwarded:   s.metrics.forwarded.Load(),
		NotRecorded: s.metrics.notRecorded.Load(),
		Unused:      s.unused(),
	}
}

// unused counts the recorded answers never served, over the rollouts that were asked for. In
// strict mode calls recorded as cancelled are not answers and do not count.
func (s *Server) unused() int64 {
	s.mu.Lock()
	states := make([]*rolloutState, 0, len(s.rollouts))
	for _, st := range s.rollouts {
		states = append(states, st)
	}
	s.mu.Unlock()
	var n int64
	for _, st := range states {
		st.mu.Lock()
		for _, rc := range st.calls {
			if !rc.used && (s.Match == Sequence || !rc.cancelled) {
				n++
			}
		}
		st.mu.Unlock()
	}
	return n
}

// timesText is "once" or "N times".
func timesText(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}
