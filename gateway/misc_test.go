package gateway_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestCaptureDirNotWritable: when the capture line cannot be written the call still succeeds, the
// rollout is marked incomplete, and the failure is logged and counted; when even the marker cannot
// be written the loss is logged and counted as such; a claim that cannot be created does not stop
// the call either. (Paths are blocked with directories, which stops root too.)
func TestCaptureDirNotWritable(t *testing.T) {
	body := fixture(t, "openai_chat/json_text_usage_details.json")
	block := func(t *testing.T, p string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(p, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("line fails, marker written", func(t *testing.T) {
		e := newEnv(t, capturetest.Replay(200, "application/json", body))
		block(t, mustPath(e.store.CapturePath("nw-1")), nil)
		resp, got := e.post("nw-1", "/v1/chat/completions", `{}`, nil)
		if resp.StatusCode != 200 || !bytes.Equal(got, body) {
			t.Fatalf("call failed: %d", resp.StatusCode)
		}
		if _, marker, _ := e.store.Stat("nw-1"); !marker {
			t.Error("no incomplete marker")
		}
		if n := metric(t, e.h.Registry(), gateway.MetricCaptureWrites, map[string]string{"result": "failed"}); n != 1 {
			t.Errorf("failed writes = %v", n)
		}
		if !strings.Contains(e.logs.String(), "capture write failed") {
			t.Error("failure not logged")
		}
		if c, _ := e.store.Claims("nw-1"); c.Live != 0 {
			t.Error("claim not released after the failed write")
		}
	})
	t.Run("marker fails too", func(t *testing.T) {
		e := newEnv(t, capturetest.Replay(200, "application/json", body))
		block(t, mustPath(e.store.CapturePath("nw-2")), nil)
		block(t, mustPath(e.store.MarkerPath("nw-2")), nil)
		if resp, _ := e.post("nw-2", "/v1/chat/completions", `{}`, nil); resp.StatusCode != 200 {
			t.Fatalf("call failed: %d", resp.StatusCode)
		}
		if n := metric(t, e.h.Registry(), gateway.MetricCaptureWrites, map[string]string{"result": "lost"}); n != 1 {
			t.Errorf("lost writes = %v", n)
		}
		if !strings.Contains(e.logs.String(), "incomplete marker failed too") {
			t.Error("loss not logged")
		}
	})
	t.Run("claim fails", func(t *testing.T) {
		e := newEnv(t, capturetest.Replay(200, "application/json", body))
		p := e.store.Dir() + "/.claim-slots" // a file where the claim slot dir belongs: claims fail
		capturetest.WriteFile(t, p, nil, 0o640)
		if resp, _ := e.post("nw-3", "/v1/chat/completions", `{}`, nil); resp.StatusCode != 200 {
			t.Fatalf("call failed: %d", resp.StatusCode)
		}
		if n := metric(t, e.h.Registry(), gateway.MetricClaimFailures, nil); n != 1 {
			t.Errorf("claim failures = %v", n)
		}
		if l := e.one("nw-3"); l.ErrorCategory != nil {
			t.Errorf("category %s", l.Category())
		}
	})
}

func TestRequestTooLarge(t *testing.T) {
	e := newEnv(t, capturetest.Replay(200, "application/json", []byte(`{}`)), func(h *gateway.Handler) { h.MaxRequestBytes = 100 })
	big := `{"model":"m","input":"` + strings.Repeat("x", 200) + `"}`
	for _, chunked := range []bool{false, true} {
		var r io.Reader = strings.NewReader(big)
		if chunked {
			r = io.MultiReader(r) // hides the length: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPost, e.url("big-1", "/v1/responses"), r)
		resp, err := rawClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "request_too_large") {
			t.Errorf("chunked=%v: %d %s", chunked, resp.StatusCode, b)
		}
	}
	if n := len(e.up.Requests()); n != 0 {
		t.Errorf("upstream saw %d requests", n)
	}
	ls := e.lines("big-1")
	if len(ls) != 2 {
		t.Fatalf("%d lines, want 2", len(ls))
	}
	for _, l := range ls {
		checkLocal(t, l, 413, "client_error", "request_too_large", false)
	}
	// At the limit is fine.
	if resp, _ := e.post("big-1", "/v1/responses", `{"model":"`+strings.Repeat("y", 100-12)+`"}`, nil); resp.StatusCode != 200 {
		t.Errorf("a body of exactly the limit got %d", resp.StatusCode)
	}
}

func TestShuttingDown(t *testing.T) {
	e := newEnv(t, capturetest.Replay(200, "application/json", []byte(`{}`)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	resp, body := e.post("sd-1", "/v1/chat/completions", `{}`, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "shutting_down") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	checkLocal(t, e.one("sd-1"), 503, "upstream_error", "shutting_down", false)
	if code, _ := capturetest.Get(t, e.gw.URL+"/readyz"); code != 503 {
		t.Errorf("readyz while draining: %d", code)
	}
	if n := len(e.up.Requests()); n != 0 {
		t.Errorf("upstream saw %d requests", n)
	}
}

// TestBeginShutdown: once BeginShutdown is called, /readyz answers 503 and a new captured call is
// refused (503 shutting_down, captured), while a call already in flight goes on to its end and is
// captured as usual.
func TestBeginShutdown(t *testing.T) {
	events := capturetest.SSEEvents(fixture(t, "openai_chat/stream_tool_call_usage_only_chunk.sse"))
	up := newSteppedUpstream()
	e := newEnv(t, up.serve)
	req, _ := http.NewRequest(http.MethodPost, e.url("bs-1", "/v1/chat/completions"), strings.NewReader(`{"model":"m","stream":true}`))
	_, cr := startCall(t, req)
	up.chunks <- events[0]
	cr.expect(t, events[0], "first event")
	if code, _ := capturetest.Get(t, e.gw.URL+"/readyz"); code != 200 {
		t.Fatalf("readyz before: %d", code)
	}

	e.h.BeginShutdown()
	if code, _ := capturetest.Get(t, e.gw.URL+"/readyz"); code != 503 {
		t.Errorf("readyz after BeginShutdown: %d, want 503", code)
	}
	r2, body := e.post("bs-2", "/v1/chat/completions", `{}`, nil)
	if r2.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "shutting_down") {
		t.Errorf("new call: %d %s", r2.StatusCode, body)
	}
	checkLocal(t, e.one("bs-2"), 503, "upstream_error", "shutting_down", false)

	for _, ev := range events[1:] {
		up.chunks <- ev
		cr.expect(t, ev, "event")
	}
	close(up.chunks)
	close(up.release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if l := e.one("bs-1"); l.ErrorCategory != nil || deref(l.StatusCode) != 200 {
		t.Errorf("the call in flight: category %s status %v", l.Category(), deref(l.StatusCode))
	}
	if n := len(e.up.Requests()); n != 1 {
		t.Errorf("upstream saw %d requests, want the one in flight", n)
	}
}

// TestDeclaredProvenance: a Gym model server behind the gateway declares its own provenance; it is
// recorded as declared (unusable values become null) and the headers still reach the client.
func TestDeclaredProvenance(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		headers                   map[string]string
		source, reason            any
		attempted, upstreamStatus any
	}{
		{"local timeout", map[string]string{
			gateway.HeaderResponseSource: "local", gateway.HeaderUpstreamAttempted: "true",
			gateway.HeaderLocalResponseReason: "upstream_timeout",
		}, "local", "upstream_timeout", true, nil},
		{"relayed by gym", map[string]string{
			gateway.HeaderResponseSource: "upstream", gateway.HeaderUpstreamAttempted: "true",
			gateway.HeaderUpstreamStatusCode: "529",
		}, "upstream", nil, true, 529},
		{"unusable values", map[string]string{
			gateway.HeaderResponseSource: "somewhere", gateway.HeaderUpstreamAttempted: "maybe",
			gateway.HeaderUpstreamStatusCode: "5xx",
		}, nil, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.headers {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(504)
				io.WriteString(w, `{"error":{"message":"slow","type":"server_error","code":"upstream_timeout"}}`)
			})
			resp, _ := e.post("pv-1", "/v1/responses", `{}`, nil)
			for k, v := range tc.headers {
				if resp.Header.Get(k) != v {
					t.Errorf("header %s not relayed", k)
				}
			}
			l := e.one("pv-1")
			if deref(l.ResponseSource) != tc.source || deref(l.LocalResponseReason) != tc.reason ||
				deref(l.UpstreamAttempted) != tc.attempted || deref(l.UpstreamStatusCode) != tc.upstreamStatus {
				t.Errorf("recorded source %v reason %v attempted %v upstream status %v", deref(l.ResponseSource),
					deref(l.LocalResponseReason), deref(l.UpstreamAttempted), deref(l.UpstreamStatusCode))
			}
			if deref(l.StatusCode) != 504 || l.Category() != "timeout" {
				t.Errorf("status %v category %s", deref(l.StatusCode), l.Category())
			}
		})
	}
}

func TestClientIDHeaders(t *testing.T) {
	e := newEnv(t, capturetest.Replay(200, "application/json", fixture(t, "anthropic_messages/json_tool_use.json")))
	for i, tc := range []struct {
		header         http.Header
		session, reply any
	}{
		{http.Header{"X-Claude-Code-Session-Id": {"cc-sess"}}, "cc-sess", nil},
		{http.Header{"Session_id": {"pi-sess"}}, "pi-sess", nil},
		{http.Header{"Session-Id": {"codex-sess"}, "X-Assistant-Message-Id": {"msg-7"}}, "codex-sess", "msg-7"},
		{http.Header{"X-Session-Id": {"first"}, "Session-Id": {"second"}}, "first", nil},
		{http.Header{"X-Session-Id": {"a", "b"}, "Session-Id": {"c"}}, nil, nil},
		{http.Header{"X-Session-Id": {"a", "a"}}, "a", nil},
		{http.Header{"X-Assistant-Message-Id": {"m1", "m2"}}, nil, nil},
	} {
		id := "cid-" + string(rune('a'+i))
		req, _ := http.NewRequest(http.MethodPost, e.url(id, "/v1/messages"), strings.NewReader(`{}`))
		for k, vs := range tc.header {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		resp, err := rawClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		l := e.one(id)
		if deref(l.ClientSessionID) != tc.session || deref(l.ClientAssistantMessageID) != tc.reply {
			t.Errorf("headers %v: session %v message %v, want %v %v", tc.header, deref(l.ClientSessionID), deref(l.ClientAssistantMessageID), tc.session, tc.reply)
		}
	}
}

// TestRequestAndResponseBodies: a request body that is a JSON object is stored as request, any other
// non-empty body as request_raw text (request null), an empty one as neither; the response body is
// stored as response when it parses as an object, and as response_raw text when it is non-empty and
// streamed or did not parse (NeMo Gym's rules, docs/format.md section 3.2).
func TestRequestAndResponseBodies(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"model":"zipped"}`))
	zw.Close()
	// Bodies of 256 KiB and more are checked while the upstream works on the call.
	bigJSON := `{"model":"m","pad":"` + strings.Repeat("x", 300<<10) + `"}`
	bigText := strings.Repeat("not json ", 300<<10/9)
	// White space outside strings is dropped from the stored request, inside strings kept; the
	// compactness is found when the request is checked (before forwarding, or beside the upstream
	// call for a large body), so the line copies a compact one as is.
	prettyJSON := "{\n  \"model\": \"m\",\n  \"messages\": [ {\"role\": \"user\", \"content\": \"a b\\n c\"} ]\n}\n"
	prettyCompacted := `{"model":"m","messages":[{"role":"user","content":"a b\n c"}]}`
	bigPretty := "{ \"model\" : \"m\", \"pad\" : \"" + strings.Repeat("x y", 100<<10) + "\" }"
	bigPrettyCompacted := `{"model":"m","pad":"` + strings.Repeat("x y", 100<<10) + `"}`
	for _, tc := range []struct {
		name            string
		reqBody         string
		reqEncoding     string
		status          int
		ctype, respBody string
		wantRequest     string // "" means null
		wantRequestRaw  any
		wantResponse    bool
		wantRaw         any
		category        string
	}{
		{"json object", `{"model":"m"}`, "", 200, "application/json", `{"ok":true}`, `{"model":"m"}`, nil, true, nil, "<null>"},
		{"compact json object, spaces in strings", prettyCompacted, "", 200, "application/json", `{"ok":true}`, prettyCompacted, nil, true, nil, "<null>"},
		{"pretty json object", prettyJSON, "", 200, "application/json", `{"ok":true}`, prettyCompacted, nil, true, nil, "<null>"},
		{"large pretty json object", bigPretty, "", 200, "application/json", `{"ok":true}`, bigPrettyCompacted, nil, true, nil, "<null>"},
		{"not json", `{not-json`, "", 422, "application/json", `{"detail":"bad"}`, "", "{not-json", true, nil, "client_error"},
		{"json array", `[]`, "", 200, "application/json", `{}`, "", "[]", true, nil, "<null>"},
		{"large json object", bigJSON, "", 200, "application/json", `{"ok":true}`, bigJSON, nil, true, nil, "<null>"},
		{"large text", bigText, "", 200, "application/json", `{"ok":true}`, "", bigText, true, nil, "<null>"},
		{"empty request", ``, "", 200, "application/json", `{}`, "", nil, true, nil, "<null>"},
		{"gzip request", gz.String(), "gzip", 200, "application/json", `{}`, `{"model":"zipped"}`, nil, true, nil, "<null>"},
		{"plain text reply", `{}`, "", 200, "text/plain", "hello", `{}`, nil, false, "hello", "capture_parse_error"},
		{"empty reply", `{}`, "", 200, "application/json", "", `{}`, nil, false, nil, "<null>"},
		{"invalid utf-8 reply", `{}`, "", 200, "application/json", "{\"a\":\"\xff\"}", `{}`, nil, false, "{\"a\":\"\ufffd\"}", "capture_parse_error"},
		{"NaN reply", `{}`, "", 200, "application/json", `{"a":NaN}`, `{}`, nil, false, `{"a":NaN}`, "capture_parse_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, capturetest.Replay(tc.status, tc.ctype, []byte(tc.respBody)))
			h := map[string]string{}
			if tc.reqEncoding != "" {
				h["Content-Encoding"] = tc.reqEncoding
			}
			e.post("b-1", "/v1/chat/completions", tc.reqBody, h)
			if got := e.up.Requests()[0].Body; string(got) != tc.reqBody {
				t.Errorf("upstream got request %q, want %q", got, tc.reqBody)
			}
			l := e.one("b-1")
			if tc.wantRequest == "" && l.Request != nil && string(l.Request) != "null" || tc.wantRequest != "" && string(l.Request) != tc.wantRequest {
				t.Errorf("request %s, want %q", l.Request, tc.wantRequest)
			}
			if deref(l.RequestRaw) != tc.wantRequestRaw || l.Has("request_raw") != (tc.wantRequestRaw != nil) {
				t.Errorf("request_raw %v, want %v", deref(l.RequestRaw), tc.wantRequestRaw)
			}
			if (l.Response != nil && string(l.Response) != "null") != tc.wantResponse {
				t.Errorf("response %s, want present=%v", l.Response, tc.wantResponse)
			}
			if deref(l.ResponseRaw) != tc.wantRaw || l.Has("response_raw") != (tc.wantRaw != nil) {
				t.Errorf("response_raw %v, want %v", deref(l.ResponseRaw), tc.wantRaw)
			}
			if l.Category() != tc.category {
				t.Errorf("category %s, want %s", l.Category(), tc.category)
			}
		})
	}
}

func TestAdminEndpoints(t *testing.T) {
	e := newEnv(t, capturetest.Replay(200, "application/json", fixture(t, "openai_chat/json_text_usage_details.json")))
	e.post("m-1", "/v1/chat/completions", `{}`, nil)
	e.post("", "/v1/chat/completions", `{}`, nil)
	get := func(path string) (int, string) { return capturetest.Get(t, e.gw.URL+path) }
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("healthz %d %q", code, body)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("readyz %d", code)
	}
	code, body := get("/metrics")
	if code != 200 {
		t.Fatalf("metrics %d", code)
	}
	for _, want := range []string{
		`modelcalls_gateway_calls_total{dialect="chat",error_category="none",status_class="2xx"} 1`,
		`modelcalls_gateway_capture_writes_total{result="ok"} 1`,
		`modelcalls_gateway_capture_write_seconds_count 1`,
		`modelcalls_gateway_calls_in_flight 0`,
		`modelcalls_gateway_uncaptured_requests_total{reason="unprefixed"} 1`,
		`modelcalls_gateway_relayed_bytes_total{direction="request"} 4`, // two 2-byte bodies, captured and not
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// 2 responses of the fixture's size went back to clients.
	if n := metric(t, e.h.Registry(), gateway.MetricBytes, map[string]string{"direction": "response"}); n != float64(2*len(fixture(t, "openai_chat/json_text_usage_details.json"))) {
		t.Errorf("response bytes %v", n)
	}
	// With NoAdminEndpoints the paths go upstream.
	e2 := newEnv(t, capturetest.Replay(200, "application/json", []byte(`{"up":1}`)), func(h *gateway.Handler) { h.NoAdminEndpoints = true })
	if _, b := capturetest.Get(t, e2.gw.URL+"/healthz"); b != `{"up":1}` {
		t.Errorf("healthz with NoAdminEndpoints answered %q", b)
	}
}

// TestWebSocketUpgrade: Codex's WebSocket attempt on /v1/responses is forwarded (prefix stripped),
// switched, relayed both ways, and not captured.
func TestWebSocketUpgrade(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "want upgrade", 400)
			return
		}
		capturetest.EchoUpgrade(w)
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.gw.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /ng-rollout/cx-r2/v1/responses HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSession-Id: s1\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	io.WriteString(conn, "ping\n")
	got, err := br.ReadString('\n')
	if err != nil || got != "echo ping\n" {
		t.Fatalf("relayed %q, %v", got, err)
	}
	if r := e.up.Requests()[0]; r.Path != "/v1/responses" {
		t.Errorf("upstream path %s", r.Path)
	}
	if ents, _ := readDir(e.store.Dir()); len(ents) != 0 {
		t.Errorf("upgrade captured: %v", ents)
	}
}

// clientFixture is the shape of testdata/clients/*.json (at the repository root).
type clientFixture struct {
	Client    string `json:"client"`
	Exchanges []struct {
		Request struct {
			Method  string            `json:"method"`
			Path    string            `json:"path"`
			Headers map[string]string `json:"headers"`
			Body    json.RawMessage   `json:"body"`
		} `json:"request"`
		Response struct {
			Status int    `json:"status"`
			Body   string `json:"body"`
		} `json:"response_from_capture_stub"`
	} `json:"exchanges"`
}

// TestClientFixtures replays the requests real harnesses and SDKs sent (Claude Code, Codex with its
// WebSocket attempts, opencode, pi, the Go SDKs) through the gateway: each reaches the upstream with
// the prefix stripped and its query kept; exactly the observed, non-upgrade calls are captured, with
// the client's session id when it sent one in a recognised header.
func TestClientFixtures(t *testing.T) {
	for _, name := range []string{"claude-code", "codex-builtin-openai", "opencode", "pi", "sdk-go-openai", "sdk-go-anthropic"} {
		t.Run(name, func(t *testing.T) {
			var cf clientFixture
			if err := json.Unmarshal(capturetest.ReadTestdata(t, "clients", name+".json"), &cf); err != nil {
				t.Fatal(err)
			}
			n := 0
			up := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				x := cf.Exchanges[n]
				n++
				ct := "application/json"
				if strings.HasPrefix(x.Response.Body, "event:") || strings.HasPrefix(x.Response.Body, "data:") {
					ct = "text/event-stream"
				}
				w.Header().Set("Content-Type", ct)
				w.WriteHeader(x.Response.Status)
				io.WriteString(w, x.Response.Body)
			})
			e := newEnvFor(t, up)
			wantLines := map[string]int{}
			wantSession := map[string]string{}
			for _, x := range cf.Exchanges {
				rq := x.Request
				var body io.Reader = http.NoBody
				if len(rq.Body) > 0 && string(rq.Body) != "null" {
					body = bytes.NewReader(rq.Body)
				}
				req, _ := http.NewRequest(rq.Method, e.gw.URL+rq.Path, body)
				for k, v := range rq.Headers {
					switch strings.ToLower(k) {
					case "host", "content-length", "connection", "upgrade", "accept-encoding":
						continue
					}
					req.Header.Set(k, v)
				}
				upgrade := strings.EqualFold(rq.Headers["upgrade"], "websocket")
				if upgrade {
					req.Header.Set("Connection", "Upgrade")
					req.Header.Set("Upgrade", "websocket")
				}
				resp, err := rawClient().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				wantBody := x.Response.Body
				if rq.Method == http.MethodHead {
					wantBody = ""
				}
				if resp.StatusCode != x.Response.Status || string(got) != wantBody {
					t.Errorf("%s %s: got %d (%d bytes), want %d", rq.Method, rq.Path, resp.StatusCode, len(got), x.Response.Status)
				}
				id, rest, _ := strings.Cut(strings.TrimPrefix(rq.Path, "/ng-rollout/"), "/")
				path, _, _ := strings.Cut("/"+rest, "?")
				observed := path == "/v1/responses" || path == "/v1/chat/completions" || path == "/v1/messages"
				if observed && !upgrade {
					wantLines[id]++
					for _, h := range []string{"x-session-id", "x-claude-code-session-id", "session-id", "session_id"} {
						if v, ok := rq.Headers[h]; ok {
							wantSession[id] = v
							break
						}
					}
				}
			}
			seen := up.Requests()
			for i, x := range cf.Exchanges {
				_, rest, _ := strings.Cut(strings.TrimPrefix(x.Request.Path, "/ng-rollout/"), "/")
				path, query, _ := strings.Cut("/"+rest, "?")
				if seen[i].Path != path || seen[i].RawQuery != query {
					t.Errorf("upstream saw %s?%s for %s", seen[i].Path, seen[i].RawQuery, x.Request.Path)
				}
			}
			for id, want := range wantLines {
				ls := e.lines(id)
				if len(ls) != want {
					t.Errorf("rollout %s: %d lines, want %d", id, len(ls), want)
				}
				for _, l := range ls {
					if deref(l.ClientSessionID) != anyOrNil(wantSession[id]) || l.ErrorCategory != nil || l.Response == nil {
						t.Errorf("rollout %s: session %v (want %q) category %s", id, deref(l.ClientSessionID), wantSession[id], l.Category())
					}
				}
			}
			ids, err := e.store.Rollouts()
			if err != nil || len(ids) != len(wantLines) {
				t.Errorf("capture dir holds rollouts %v (%v), want %d", ids, err, len(wantLines))
			}
		})
	}
}

func anyOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// TestSpooledBody: a body past the spool threshold goes through the temp file, and response_raw is
// streamed from it into the line; a spool that cannot be created marks the rollout incomplete while
// the call itself succeeds.
func TestSpooledBody(t *testing.T) {
	body := fixture(t, "anthropic_messages/stream_thinking_signature.sse")
	e := newEnv(t, capturetest.Replay(200, "text/event-stream", body), func(h *gateway.Handler) {
		h.SpoolThreshold = 1024
		h.SpoolDir = t.TempDir()
	})
	_, got := e.post("sp-1", "/v1/messages", `{}`, nil)
	if !bytes.Equal(got, body) {
		t.Fatal("body changed")
	}
	l := e.one("sp-1")
	if l.ResponseRaw == nil || *l.ResponseRaw != string(body) || l.ErrorCategory != nil {
		t.Errorf("spooled response_raw differs (category %s)", l.Category())
	}
	if ents, _ := readDir(e.h.SpoolDir); len(ents) != 0 {
		t.Errorf("spool files left: %v", ents)
	}

	bad := newEnv(t, capturetest.Replay(200, "text/event-stream", body), func(h *gateway.Handler) {
		h.SpoolThreshold = 1024
		h.SpoolDir = "/nonexistent/spool/dir"
	})
	if resp, got := bad.post("sp-2", "/v1/messages", `{}`, nil); resp.StatusCode != 200 || !bytes.Equal(got, body) {
		t.Fatal("the call failed because the spool failed")
	}
	if has, marker, _ := bad.store.Stat("sp-2"); has || !marker {
		t.Errorf("capture file %v, marker %v; want only the marker", has, marker)
	}
}

// TestDeepRequest: a request nested deeper than a capture line can hold is forwarded unchanged and
// captured as request_raw, not lost.
func TestDeepRequest(t *testing.T) {
	e := newEnv(t, capturetest.Replay(200, "application/json", []byte(`{"ok":1}`)))
	for i, depth := range []int{100, 9999, 10000, 10001} {
		body := `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
		id := "deep-" + strconv.Itoa(i)
		resp, _ := e.post(id, "/v1/chat/completions", body, nil)
		if resp.StatusCode != 200 || string(e.up.Requests()[i].Body) != body {
			t.Fatalf("depth %d: call failed or body changed", depth)
		}
		l := e.one(id)
		if l.Request == nil || string(l.Request) == "null" {
			if deref(l.RequestRaw) != body {
				t.Errorf("depth %d: neither request nor request_raw holds the body", depth)
			}
		}
	}
}

// TestLineageHeaders: the lineage headers a harness declares reach the line as
// client_logical_request_id and client_parent_call_id; different repeated values give neither.
func TestLineageHeaders(t *testing.T) {
	e := newEnv(t, capturetest.Replay(200, "application/json", fixture(t, "anthropic_messages/json_tool_use.json")))
	for i, tc := range []struct {
		header          http.Header
		logical, parent any
	}{
		{http.Header{}, nil, nil},
		{http.Header{"X-Nemo-Gym-Logical-Request-Id": {"req-1"}, "X-Modelcalls-Parent-Call-Id": {"0123456789abcdef0123456789abcdef"}}, "req-1", "0123456789abcdef0123456789abcdef"},
		{http.Header{"X-Nemo-Gym-Logical-Request-Id": {"a", "b"}, "X-Modelcalls-Parent-Call-Id": {"p", "p"}}, nil, "p"},
	} {
		id := "lin-" + string(rune('a'+i))
		req, _ := http.NewRequest(http.MethodPost, e.url(id, "/v1/messages"), strings.NewReader(`{}`))
		for k, vs := range tc.header {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		resp, err := rawClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		l := e.one(id)
		if deref(l.ClientLogicalRequestID) != tc.logical || deref(l.ClientParentCallID) != tc.parent {
			t.Errorf("headers %v: logical %v parent %v, want %v %v", tc.header, deref(l.ClientLogicalRequestID), deref(l.ClientParentCallID), tc.logical, tc.parent)
		}
	}
}
