package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// errorBodyCode returns error.code (OpenAI shape) or error.type (Anthropic shape) of a local body.
func errorBody(t *testing.T, b []byte) (typ, code, msg string) {
	t.Helper()
	var v struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Code    any    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("error body %q is not JSON: %v", b, err)
	}
	code, _ = v.Error.Code.(string)
	return v.Error.Type, code, v.Error.Message
}

func TestUpstreamDown(t *testing.T) {
	addr := capturetest.ClosedAddr(t) // nothing listens there now
	e := newEnv(t, func(http.ResponseWriter, *http.Request) {}, func(h *gateway.Handler) {
		h.Upstream, _ = url.Parse("http://" + addr)
	})
	resp, body := e.post("down-1", "/v1/messages", `{"model":"claude","max_tokens":1,"messages":[]}`, nil)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
	if !strings.Contains(string(body), `"type":"error"`) || !strings.Contains(string(body), "upstream_unreachable") {
		t.Errorf("body %s is not an Anthropic-shaped upstream_unreachable error", body)
	}
	l := e.one("down-1")
	if resp.Header.Get(gateway.HeaderModelCallID) != l.ModelCallID {
		t.Errorf("model call id header %q, line %q", resp.Header.Get(gateway.HeaderModelCallID), l.ModelCallID)
	}
	checkLocal(t, l, 502, "connection", "upstream_unreachable", true)
	if string(l.Response) != string(body) {
		t.Errorf("response %s, want the local body %s", l.Response, body)
	}
}

// checkLocal checks a line for a response the gateway answered itself.
func checkLocal(t *testing.T, l *capturetest.Line, status int, category, reason string, attempted bool) {
	t.Helper()
	if deref(l.StatusCode) != status || l.Category() != category || deref(l.ResponseSource) != "local" ||
		deref(l.LocalResponseReason) != reason || deref(l.UpstreamAttempted) != attempted || l.Has("upstream_status_code") {
		t.Errorf("line: status %v category %s source %v reason %v attempted %v upstream_status_code present %v; want %d %s local %s %v",
			deref(l.StatusCode), l.Category(), deref(l.ResponseSource), deref(l.LocalResponseReason), deref(l.UpstreamAttempted),
			l.Has("upstream_status_code"), status, category, reason, attempted)
	}
	if l.LatencyTTFTMS != nil || l.Has("response_raw") {
		t.Errorf("local answer with ttft %v / response_raw", deref(l.LatencyTTFTMS))
	}
}

func TestUpstreamTimeout(t *testing.T) {
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stuck:
		case <-r.Context().Done():
		}
	}, func(h *gateway.Handler) { h.UpstreamTimeout = 100 * time.Millisecond })
	resp, body := e.post("slow-1", "/v1/chat/completions", `{"model":"m"}`, nil)
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("status %d, want 504", resp.StatusCode)
	}
	if _, code, _ := errorBody(t, body); code != "upstream_timeout" {
		t.Errorf("error code %q in %s", code, body)
	}
	l := e.one("slow-1")
	checkLocal(t, l, 504, "timeout", "upstream_timeout", true)
	if l.LatencyMS < 100 {
		t.Errorf("latency %v ms, shorter than the timeout", l.LatencyMS)
	}
}

// TestIdleTimeoutMidStream: the upstream goes silent after part of a stream; the call is captured
// as a timeout with the partial raw body and no response: a call that ends in a failure stores
// response null, whatever arrived, and the body that did arrive as response_raw.
func TestIdleTimeoutMidStream(t *testing.T) {
	events := capturetest.SSEEvents(fixture(t, "openai_chat/stream_tool_call_usage_only_chunk.sse"))
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(events[0])
		http.NewResponseController(w).Flush()
		select {
		case <-stuck:
		case <-r.Context().Done():
		}
	}, func(h *gateway.Handler) { h.IdleTimeout = 100 * time.Millisecond })
	resp, err := rawClient().Post(e.url("idle-1", "/v1/chat/completions"), "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Errorf("the client saw a clean end of a stream the upstream never finished")
	}
	if string(got) != string(events[0]) {
		t.Errorf("client got %q, want the first event", got)
	}
	e.drain()
	l := e.one("idle-1")
	if l.Category() != "timeout" || deref(l.StatusCode) != 200 || l.Response != nil && string(l.Response) != "null" {
		t.Errorf("line: category %s status %v response %s", l.Category(), deref(l.StatusCode), l.Response)
	}
	if l.ResponseRaw == nil || *l.ResponseRaw != string(events[0]) {
		t.Errorf("response_raw %v, want the partial stream", deref(l.ResponseRaw))
	}
}

// TestUpstreamErrorStatus: 4xx/5xx JSON error bodies are relayed and captured with their status
// category and the parsed body: status 408/504 timeout, 429 rate_limit, 401/403 auth, 404
// not_found, other 4xx client_error, 5xx and above upstream_error (NeMo Gym's ladder, docs/format.md
// section 3.4).
func TestUpstreamErrorStatus(t *testing.T) {
	for _, tc := range []struct {
		fixture, path string
		status        int
		category      string
	}{
		{"openai_responses/error_429_insufficient_quota.json", "/v1/responses", 429, "rate_limit"},
		{"openai_responses/error_400_invalid_parameter.json", "/v1/responses", 400, "client_error"},
		{"openai_chat/compat_vllm_error_400_context_length.json", "/v1/chat/completions", 400, "client_error"},
		{"anthropic_messages/error_529_overloaded.json", "/v1/messages", 529, "upstream_error"},
		{"anthropic_messages/error_429_rate_limit.json", "/v1/messages", 429, "rate_limit"},
		{"openai_chat/json_text_usage_details.json", "/v1/chat/completions", 401, "auth"},
		{"openai_chat/json_text_usage_details.json", "/v1/chat/completions", 404, "not_found"},
		{"openai_chat/json_text_usage_details.json", "/v1/chat/completions", 408, "timeout"},
		{"openai_chat/json_text_usage_details.json", "/v1/chat/completions", 500, "upstream_error"},
	} {
		t.Run(tc.fixture+"/"+http.StatusText(tc.status), func(t *testing.T) {
			body := fixture(t, tc.fixture)
			e := newEnv(t, capturetest.Replay(tc.status, "application/json", body))
			resp, got := e.post("err-1", tc.path, `{"model":"m"}`, nil)
			if resp.StatusCode != tc.status || string(got) != string(body) {
				t.Fatalf("client got %d %q", resp.StatusCode, got)
			}
			l := e.one("err-1")
			if deref(l.StatusCode) != tc.status || l.Category() != tc.category || deref(l.UpstreamStatusCode) != tc.status || deref(l.ResponseSource) != "upstream" {
				t.Errorf("line: status %v category %s upstream status %v source %v", deref(l.StatusCode), l.Category(), deref(l.UpstreamStatusCode), deref(l.ResponseSource))
			}
			if l.Response == nil || l.Has("response_raw") {
				t.Errorf("error body not captured as the response object (raw present: %v)", l.Has("response_raw"))
			}
		})
	}
}

// TestStreamOutcomes: 200 streams with an error event, truncated streams, and a stream whose last
// event lacks its blank line.
func TestStreamOutcomes(t *testing.T) {
	truncate := func(b []byte) []byte { ev := capturetest.SSEEvents(b); return bytes.Join(ev[:len(ev)/2], nil) }
	for _, tc := range []struct {
		name, fixture, path string
		cut                 func([]byte) []byte
		category            string
		wantResponse        bool
		rawHas              string // the terminal event the raw body must reach
	}{
		{"responses error event then failed", "openai_responses/stream_error_event_then_failed.sse", "/v1/responses", nil, "upstream_error", true, "event: error"},
		{"messages overloaded error event", "anthropic_messages/stream_error_overloaded.sse", "/v1/messages", nil, "upstream_error", false, "overloaded_error"},
		{"chat mid-stream error payload", "openai_chat/stream_keepalive_comments_reasoning_midstream_error.sse", "/v1/chat/completions", nil, "upstream_error", true, "Token limit reached"},
		{"responses truncated", "openai_responses/stream_reasoning_function_call.sse", "/v1/responses", truncate, "stream_truncated", true, ""},
		{"chat truncated", "openai_chat/stream_parallel_tool_calls_usage_only_chunk.sse", "/v1/chat/completions", truncate, "stream_truncated", true, ""},
		{"messages truncated", "anthropic_messages/stream_thinking_signature.sse", "/v1/messages", truncate, "stream_truncated", true, ""},
		{"messages final event without blank line", "anthropic_messages/stream_tool_use_input_json_delta.sse", "/v1/messages", nil, "<null>", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := fixture(t, tc.fixture)
			if tc.cut != nil {
				body = tc.cut(body)
			}
			e := newEnv(t, capturetest.Replay(http.StatusOK, "text/event-stream", body))
			resp, got := e.post("s-1", tc.path, `{"model":"m","stream":true}`, nil)
			if resp.StatusCode != 200 || string(got) != string(body) {
				t.Fatalf("client got %d and %d of %d bytes", resp.StatusCode, len(got), len(body))
			}
			l := e.one("s-1")
			if l.Category() != tc.category || deref(l.StatusCode) != 200 {
				t.Errorf("line: category %s status %v, want %s 200", l.Category(), deref(l.StatusCode), tc.category)
			}
			if (l.Response != nil && string(l.Response) != "null") != tc.wantResponse {
				t.Errorf("response %s, want present=%v", l.Response, tc.wantResponse)
			}
			// The line is written at the first terminal event: response_raw is the body up to the
			// chunk that completed it (what follows is relayed, not captured).
			if l.ResponseRaw == nil || !strings.HasPrefix(string(body), *l.ResponseRaw) || !strings.Contains(*l.ResponseRaw, tc.rawHas) {
				t.Errorf("response_raw is not a prefix of the body holding %q", tc.rawHas)
			}
			if tc.cut != nil || tc.rawHas == "" {
				if l.ResponseRaw == nil || *l.ResponseRaw != string(body) {
					t.Errorf("response_raw is not the whole body")
				}
			}
		})
	}
}

// TestClientDisconnectMidStream: the client leaves before the terminal event; the upstream request
// is cancelled, the line is still written (cancelled, partial raw body and partial reassembly) and
// the claim is released.
func TestClientDisconnectMidStream(t *testing.T) {
	events := capturetest.SSEEvents(fixture(t, "anthropic_messages/stream_thinking_signature.sse"))
	up := newSteppedUpstream()
	e := newEnv(t, up.serve)
	req, _ := http.NewRequest(http.MethodPost, e.url("gone-1", "/v1/messages"), strings.NewReader(`{"model":"m","stream":true}`))
	resp, err := rawClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cr := newClientReader(t, resp.Body)
	partial := ""
	for _, ev := range events[:4] {
		up.chunks <- ev
		cr.expect(t, ev, "event")
		partial += string(ev)
	}
	resp.Body.Close()
	select {
	case <-up.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("upstream request not cancelled when the client left")
	}
	e.drain()
	l := e.one("gone-1")
	if l.Category() != "cancelled" || deref(l.StatusCode) != 200 {
		t.Errorf("line: category %s status %v", l.Category(), deref(l.StatusCode))
	}
	if l.ResponseRaw == nil || *l.ResponseRaw != partial {
		t.Errorf("response_raw %q, want the %d bytes sent", deref(l.ResponseRaw), len(partial))
	}
	if l.Response == nil || !strings.Contains(string(l.Response), `"type":"message"`) {
		t.Errorf("no partial reassembly: %s", l.Response)
	}
	if c, err := e.store.Claims("gone-1"); err != nil || c.Live+c.Stale != 0 {
		t.Errorf("claims after the detached write: %+v %v", c, err)
	}
}

// TestClientDisconnectBeforeHeaders: the client leaves while the upstream has not answered yet.
func TestClientDisconnectBeforeHeaders(t *testing.T) {
	arrived := make(chan struct{})
	gone := make(chan struct{})
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
		close(gone)
	})
	req, _ := http.NewRequest(http.MethodPost, e.url("gone-2", "/v1/responses"), strings.NewReader(`{"model":"m"}`))
	ctx, cancel := context.WithCancel(context.Background())
	req = req.WithContext(ctx)
	errc := make(chan error, 1)
	go func() { _, err := rawClient().Do(req); errc <- err }()
	<-arrived
	cancel()
	<-errc
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("upstream request not cancelled")
	}
	e.drain()
	l := e.one("gone-2")
	if l.Category() != "cancelled" || l.StatusCode != nil || deref(l.UpstreamAttempted) != true || l.Has("response_source") || l.Response != nil && string(l.Response) != "null" {
		t.Errorf("line: category %s status %v attempted %v response %s", l.Category(), deref(l.StatusCode), deref(l.UpstreamAttempted), l.Response)
	}
}

func TestInvalidRolloutID(t *testing.T) {
	e := newEnv(t, capturetest.Replay(200, "application/json", []byte(`{}`)))
	for _, tc := range []struct{ id, path string }{
		{"-leading-dash", "/v1/chat/completions"},
		{".hidden", "/v1/responses"},
		{"a%20b", "/v1/messages"},
		{strings.Repeat("x", 201), "/v1/chat/completions"},
		{"ok%0A", "/v1/chat/completions"},
		{"-x", "/v1/models"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			resp, body := e.post(tc.id, tc.path, `{"model":"m"}`, nil)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400", resp.StatusCode)
			}
			_, code, _ := errorBody(t, body)
			typ, _, _ := errorBody(t, body)
			if code != "invalid_rollout_id" && typ != "invalid_request_error" {
				t.Errorf("body %s does not name invalid_rollout_id", body)
			}
			if !strings.Contains(string(body), "invalid_rollout_id") {
				t.Errorf("body %s does not name the rule", body)
			}
			if resp.Header.Get(gateway.HeaderModelCallID) != "" {
				t.Errorf("uncaptured answer carries a model call id")
			}
		})
	}
	if n := len(e.up.Requests()); n != 0 {
		t.Errorf("upstream saw %d requests", n)
	}
	ents, err := readDir(e.store.Dir())
	if err != nil || len(ents) != 0 {
		t.Errorf("capture dir holds %v (%v), want nothing", ents, err)
	}
	if n := metric(t, e.h.Registry(), gateway.MetricInvalidIDs, nil); n != 6 {
		t.Errorf("%s = %v, want 6", gateway.MetricInvalidIDs, n)
	}
	if !strings.Contains(e.logs.String(), "invalid rollout id") {
		t.Errorf("no log line for the invalid ids")
	}
}

// TestUncapturedForwarding: unprefixed calls, prefixed non-observed paths and HEAD probes are
// forwarded (prefix stripped, query kept) and not captured.
func TestUncapturedForwarding(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodHead {
			w.WriteHeader(404)
			return
		}
		io.WriteString(w, `{"input_tokens":10}`)
	})
	for _, tc := range []struct {
		method, url, wantPath, wantQuery, reason string
	}{
		{"POST", e.url("", "/v1/chat/completions"), "/v1/chat/completions", "", "unprefixed"},
		{"POST", e.url("r1", "/v1/messages/count_tokens?beta=true"), "/v1/messages/count_tokens", "beta=true", "not_observed"},
		{"GET", e.url("r1", "/v1/models"), "/v1/models", "", "not_observed"},
		{"HEAD", e.url("cc-r1", "/api/hello"), "/api/hello", "", "not_observed"},
		{"POST", e.url("r1", "/v1/chat/completions/"), "/v1/chat/completions/", "", "not_observed"},
	} {
		t.Run(tc.method+" "+tc.wantPath, func(t *testing.T) {
			before := len(e.up.Requests())
			req, _ := http.NewRequest(tc.method, tc.url, strings.NewReader(`{"model":"m"}`))
			resp, err := rawClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			reqs := e.up.Requests()
			if len(reqs) != before+1 {
				t.Fatalf("upstream saw %d new requests", len(reqs)-before)
			}
			if r := reqs[before]; r.Path != tc.wantPath || r.RawQuery != tc.wantQuery || r.Method != tc.method {
				t.Errorf("upstream saw %s %s?%s, want %s %s?%s", r.Method, r.Path, r.RawQuery, tc.method, tc.wantPath, tc.wantQuery)
			}
			if resp.Header.Get(gateway.HeaderModelCallID) != "" {
				t.Errorf("uncaptured response carries a model call id")
			}
			if n := metric(t, e.h.Registry(), gateway.MetricUncaptured, map[string]string{"reason": tc.reason}); n == 0 {
				t.Errorf("uncaptured reason %s not counted", tc.reason)
			}
		})
	}
	ents, _ := readDir(e.store.Dir())
	if len(ents) != 0 {
		t.Errorf("capture dir holds %v", ents)
	}
}

// TestObservedPathWithQuery: Claude Code posts /v1/messages?beta=true; the query is ignored for the
// match and forwarded.
func TestObservedPathWithQuery(t *testing.T) {
	body := fixture(t, "anthropic_messages/json_tool_use.json")
	e := newEnv(t, capturetest.Replay(200, "application/json", body))
	resp, _ := e.post("cc-1", "/v1/messages?beta=true", `{"model":"m"}`, nil)
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	if r := e.up.Requests()[0]; r.Path != "/v1/messages" || r.RawQuery != "beta=true" {
		t.Errorf("upstream saw %s?%s", r.Path, r.RawQuery)
	}
	if l := e.one("cc-1"); l.Dialect != "messages" {
		t.Errorf("dialect %s", l.Dialect)
	}
}

// TestUpstream404Warning: an upstream 404 on a captured call is named once; when the upstream is a
// modelcalls replay (its answer declares local_response_reason replay_not_recorded) the warning
// names the stripped rollout prefix and the wirings that work, not the base URL.
func TestUpstream404Warning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason string // x-nemo-gym-local-response-reason of the 404, "" for none
		want   []string
		not    []string
	}{
		{"model server", "", []string{"check that --upstream is the model server's base URL"}, []string{"replay"}},
		{"replay", "replay_not_recorded", []string{"the upstream is a modelcalls replay", "strips the /ng-rollout/<id> prefix",
			"modelcalls replay --capture-dir-out DIR2", "/ng-rollout/r1"}, []string{"model server's base URL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.reason != "" {
					w.Header().Set("x-nemo-gym-response-source", "local")
					w.Header().Set("x-nemo-gym-local-response-reason", tc.reason)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				w.Write([]byte(`{"error":{"message":"not here","type":"invalid_request_error","code":"x"}}`))
			})
			for range 2 {
				if res, _ := e.post("r1", "/v1/chat/completions", `{"model":"m","messages":[]}`, nil); res.StatusCode != http.StatusNotFound {
					t.Fatalf("status %d", res.StatusCode)
				}
			}
			e.drain()
			logs := e.logs.String()
			if n := strings.Count(logs, "kind=upstream_404"); n != 1 {
				t.Fatalf("%d upstream_404 warnings, want 1:\n%s", n, logs)
			}
			for _, w := range tc.want {
				if !strings.Contains(logs, w) {
					t.Errorf("warning lacks %q:\n%s", w, logs)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(logs, w) {
					t.Errorf("warning has %q:\n%s", w, logs)
				}
			}
		})
	}
}
