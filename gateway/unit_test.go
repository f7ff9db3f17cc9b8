package gateway

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/dialect"
)

func TestRewriteLocation(t *testing.T) {
	type testCase struct {
		upstream, id, loc, want string
	}
	// Same origin, under the base path: into the prefix.
	cases := []testCase{
		{"http://up:8000", "r1", "http://up:8000/v1/responses/abc", "/ng-rollout/r1/v1/responses/abc"},
		{"http://up:8000/", "r1", "http://UP:8000/v1/x?a=1#f", "/ng-rollout/r1/v1/x?a=1#f"},
		{"http://up", "r1", "http://up:80/v1/x", "/ng-rollout/r1/v1/x"},
		{"https://up", "r1", "https://up:443/v1/x", "/ng-rollout/r1/v1/x"},
		{"http://up/api", "r1", "http://up/api/v1/x", "/ng-rollout/r1/v1/x"},
		{"http://up/api", "r1", "http://up/api", "/ng-rollout/r1/"},
		{"http://up/api", "r1", "//up/api/v1/x", "/ng-rollout/r1/v1/x"},
		{"http://up/api", "r1", "/api/v1/x", "/ng-rollout/r1/v1/x"},
		{"http://up", "r1", "/v1/a%2Fb", "/ng-rollout/r1/v1/a%2Fb"},
		{"http://up", "", "http://up/v1/x", "/v1/x"}, // unprefixed: the gateway's own root
		{"http://up/api", "", "/api/v1/x", "/v1/x"},  // unprefixed under a base path
	}
	// Passed through: the Location stays as the upstream sent it.
	for _, tc := range []struct{ upstream, id, loc string }{
		{"http://up", "", "/v1/x"},
		{"http://up", "r1", "http://other/v1/x"},
		{"http://up:8000", "r1", "http://up:8001/v1/x"},
		{"http://up", "r1", "https://up/v1/x"},
		{"http://up/api", "r1", "http://up/apix/v1"},
		{"http://up/api", "r1", "http://up/login"},
		{"http://up", "r1", "next?page=2"},
		{"http://up", "r1", "http://user@up/v1/x"},
		{"http://up", "r1", "mailto:a@b"},
	} {
		cases = append(cases, testCase{tc.upstream, tc.id, tc.loc, tc.loc})
	}
	for _, tc := range cases {
		u, _ := url.Parse(tc.upstream)
		h := &Handler{Upstream: u}
		hdr := http.Header{"Location": {tc.loc}}
		h.rewriteLocation(hdr, tc.id)
		if got := hdr.Get("Location"); got != tc.want {
			t.Errorf("upstream %s id %q Location %q: got %q, want %q", tc.upstream, tc.id, tc.loc, got, tc.want)
		}
	}
}

func TestDropH2CUpgrade(t *testing.T) {
	for _, tc := range []struct {
		in          http.Header
		upgrade     bool // still an upgrade request afterwards
		connection  string
		hasSettings bool
	}{
		{http.Header{"Upgrade": {"h2c"}, "Connection": {"Upgrade, HTTP2-Settings"}, "Http2-Settings": {"AAMA"}}, false, "", false},
		{http.Header{"Upgrade": {"H2C"}, "Connection": {"keep-alive, Upgrade, HTTP2-Settings"}, "Http2-Settings": {"AAMA"}}, false, "keep-alive", false},
		{http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"}}, true, "Upgrade", false},
		{http.Header{"Upgrade": {"h2c, websocket"}, "Connection": {"Upgrade"}}, true, "Upgrade", false},
		{http.Header{"Connection": {"keep-alive"}}, false, "keep-alive", false},
	} {
		h := tc.in.Clone()
		dropH2CUpgrade(h)
		if isUpgrade(h) != tc.upgrade || h.Get("Connection") != tc.connection || (h.Get("Http2-Settings") != "") != tc.hasSettings {
			t.Errorf("%v -> %v", tc.in, h)
		}
	}
}

// TestRoutingMistakeChecks: each check names its kind of routing mistake once at warn, with a fix,
// and stays silent on paths that are not that mistake. checkModelPath gets the path after a rollout
// prefix; checkBuriedPrefix gets an unprefixed path that holds one after other segments (named only
// when a model path follows it); checkUnprefixed gets a model path that came with no prefix, and
// names the base URL to give the client on the gateway's address.
func TestRoutingMistakeChecks(t *testing.T) {
	modelPath := func(h *Handler, path string) { h.checkModelPath("r1", path) }
	buriedPrefix := func(h *Handler, path string) { h.checkBuriedPrefix(path) }
	unprefixed := func(h *Handler, path string) { h.checkUnprefixed("127.0.0.1:8080", path) }
	for _, tc := range []struct {
		check      func(*Handler, string)
		path, kind string // kind "": nothing logged
	}{
		{modelPath, "/chat/completions", "prefixed_path_missing_v1"},
		{modelPath, "/responses", "prefixed_path_missing_v1"},
		{modelPath, "/messages", "prefixed_path_missing_v1"},
		{modelPath, "/v1/v1/chat/completions", "prefixed_path_extra_segments"},
		{modelPath, "/api/v1/messages", "prefixed_path_extra_segments"},
		{modelPath, "/v1/models", ""},
		{modelPath, "/v1/messages/count_tokens", ""},
		{buriedPrefix, "/base/ng-rollout/r1/v1/chat/completions", "prefix_not_leading"},
		{buriedPrefix, "/a/b/ng-rollout/r1/v1/messages", "prefix_not_leading"},
		{buriedPrefix, "/base/ng-rollout/r1/v1/models", ""},     // not a model call: nothing captured is lost
		{buriedPrefix, "/base/ng-rollout/r1", ""},               // no path after the id
		{buriedPrefix, "/v1/chat/completions", ""},              // plainly unprefixed
		{buriedPrefix, "/base/ng-rollouts/r1/v1/responses", ""}, // another segment
		{unprefixed, "/v1/chat/completions", "unprefixed_model_call"},
	} {
		var logs strings.Builder
		u, _ := url.Parse("http://up")
		h := &Handler{Upstream: u, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		h.once.Do(h.init)
		tc.check(h, tc.path)
		tc.check(h, tc.path)
		got := logs.String()
		if tc.kind == "" {
			if got != "" {
				t.Errorf("%s: logged %s", tc.path, got)
			}
			continue
		}
		if strings.Count(got, "kind="+tc.kind) != 1 || !strings.Contains(got, "level=WARN") || !strings.Contains(got, "fix=") ||
			!strings.Contains(got, map[bool]string{true: "http://127.0.0.1:8080/ng-rollout/ROLLOUT_ID/v1", false: "rollout_id=r1"}[tc.kind == "unprefixed_model_call"]) {
			t.Errorf("%s: want one warn line of kind %s with the rollout and a fix, got %s", tc.path, tc.kind, got)
		}
	}
}

func TestErrorCategory(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    verdict
		want string // "" means null
	}{
		{"clean json", verdict{status: 200, bodyLen: 10, parsed: true}, ""},
		{"empty 200", verdict{status: 200}, ""},
		{"429", verdict{status: 429, bodyLen: 10, parsed: true}, "rate_limit"},
		{"500 unparsed", verdict{status: 500, bodyLen: 10}, "upstream_error"},
		{"stream complete", verdict{status: 200, streaming: true, terminal: dialect.TerminalComplete, bodyLen: 10, parsed: true}, ""},
		{"stream error event", verdict{status: 200, streaming: true, terminal: dialect.TerminalError, bodyLen: 10, parsed: true}, "upstream_error"},
		{"stream incomplete", verdict{status: 200, streaming: true, terminal: dialect.TerminalIncomplete, parsed: true, bodyLen: 1}, "incomplete"},
		{"stream truncated", verdict{status: 200, streaming: true, bodyLen: 10, parsed: true}, "stream_truncated"},
		{"stream truncated nothing parsed", verdict{status: 200, streaming: true, bodyLen: 10}, "stream_truncated"},
		{"status beats terminal", verdict{status: 400, streaming: true, terminal: dialect.TerminalError}, "client_error"},
		{"parse error", verdict{status: 200, bodyLen: 5}, "capture_parse_error"},
		{"decode failed", verdict{status: 200, bodyLen: 5, decodeFailed: true}, "capture_parse_error"},
		{"decode failed stream", verdict{status: 200, streaming: true, decodeFailed: true}, "capture_parse_error"},
		{"cancelled beats status", verdict{status: 429, failure: failCancelled}, "cancelled"},
		{"cancelled before headers", verdict{failure: failCancelled}, "cancelled"},
		{"connection mid-body", verdict{status: 200, failure: failConnection, bodyLen: 3}, "connection"},
		{"timeout mid-body", verdict{status: 200, failure: failTimeout}, "timeout"},
		{"failure keeps status category", verdict{status: 403, failure: failConnection}, "auth"},
		{"exception", verdict{failure: failException}, "exception"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := errorCategory(tc.v)
			if (got == nil) != (tc.want == "") || got != nil && *got != tc.want {
				t.Errorf("errorCategory(%+v) = %v, want %q", tc.v, deref(got), tc.want)
			}
		})
	}
}

func deref(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestRelayedProvenance(t *testing.T) {
	h := http.Header{}
	p := relayed(h, 201)
	if *p.source != SourceUpstream || !*p.attempted || *p.upstreamCode != 201 || p.localReason != nil {
		t.Errorf("undeclared: %+v", p)
	}
	h.Set(HeaderLocalResponseReason, "request_too_large")
	p = relayed(h, 413)
	if p.source != nil || p.attempted != nil || p.upstreamCode != nil || *p.localReason != "request_too_large" {
		t.Errorf("only a reason declared: source %v attempted %v code %v", p.source, p.attempted, p.upstreamCode)
	}
	h.Set(HeaderLocalResponseReason, string(bytes.Repeat([]byte("x"), 201)))
	h.Set(HeaderUpstreamStatusCode, "1000")
	h.Set(HeaderUpstreamAttempted, "FALSE")
	p = relayed(h, 500)
	if p.localReason != nil || p.upstreamCode != nil || p.attempted == nil || *p.attempted {
		t.Errorf("bounds: reason %v code %v attempted %v", p.localReason, p.upstreamCode, p.attempted)
	}
}

func TestClientIDs(t *testing.T) {
	for _, tc := range []struct {
		h                http.Header
		session, message any
	}{
		{http.Header{}, nil, nil},
		{http.Header{"X-Session-Id": {""}, "Session-Id": {"s2"}}, "s2", nil},
		{http.Header{"X-Session-Id": {"", "s1"}}, "s1", nil},
		{http.Header{"X-Claude-Code-Session-Id": {"a", "b"}, "Session_id": {"c"}}, nil, nil},
		{http.Header{"X-Assistant-Message-Id": {"m", "m"}}, nil, "m"},
	} {
		s, m := clientIDs(tc.h)
		if deref(s) != tc.session || deref(m) != tc.message {
			t.Errorf("clientIDs(%v) = %v, %v; want %v, %v", tc.h, deref(s), deref(m), tc.session, tc.message)
		}
	}
}

func TestIsUpgrade(t *testing.T) {
	for _, tc := range []struct {
		h    http.Header
		want bool
	}{
		{http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}, true},
		{http.Header{"Connection": {"keep-alive, upgrade"}, "Upgrade": {"websocket"}}, true},
		{http.Header{"Connection": {"keep-alive"}, "Upgrade": {"websocket"}}, false},
		{http.Header{"Connection": {"Upgrade"}}, false},
		{http.Header{}, false},
	} {
		if got := isUpgrade(tc.h); got != tc.want {
			t.Errorf("isUpgrade(%v) = %v", tc.h, got)
		}
	}
}

func TestIsEventStream(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream": true, "text/event-stream; charset=utf-8": true, "Text/Event-Stream": true,
		"application/json": false, "": false, "text/event-streams": false,
	} {
		if got := isEventStream(ct); got != want {
			t.Errorf("isEventStream(%q) = %v", ct, got)
		}
	}
}

func TestSpool(t *testing.T) {
	dir := t.TempDir()
	s := newSpool(8, dir)
	s.Write([]byte("abcd"))
	s.Write([]byte("efgh"))
	if b, ok := s.Memory(); !ok || string(b) != "abcdefgh" {
		t.Fatalf("in memory at the threshold: %q %v", b, ok)
	}
	s.Write([]byte("ij"))
	if _, ok := s.Memory(); ok {
		t.Fatal("still in memory past the threshold")
	}
	s.Write([]byte("kl"))
	got, _ := io.ReadAll(s.Reader())
	if string(got) != "abcdefghijkl" || s.Size() != 12 {
		t.Fatalf("reader %q size %d", got, s.Size())
	}
	if b, err := s.Bytes(100); err != nil || string(b) != "abcdefghijkl" {
		t.Fatalf("Bytes = %q, %v", b, err)
	}
	if _, err := s.Bytes(5); err != errTooLarge {
		t.Fatalf("Bytes past max: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("spool file visible in %s: %v", dir, ents)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSpoolCreateFails(t *testing.T) {
	s := newSpool(1, "/nonexistent/dir/for/spool")
	if _, err := s.Write([]byte("abc")); err == nil || s.Err() == nil {
		t.Fatal("no error when the temp file cannot be created")
	}
	if _, err := s.Write([]byte("d")); err == nil {
		t.Fatal("writes after a failure succeed")
	}
	s.Close()
}

func TestStatusClass(t *testing.T) {
	for code, want := range map[int]string{0: "none", 200: "2xx", 404: "4xx", 529: "5xx", 101: "1xx"} {
		if got := statusClass(code); got != want {
			t.Errorf("statusClass(%d) = %s", code, got)
		}
	}
}
