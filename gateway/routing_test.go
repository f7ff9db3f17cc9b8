package gateway

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
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

func TestCheckModelPath(t *testing.T) {
	for _, tc := range []struct {
		path, kind string
	}{
		{"/chat/completions", "prefixed_path_missing_v1"},
		{"/responses", "prefixed_path_missing_v1"},
		{"/messages", "prefixed_path_missing_v1"},
		{"/v1/v1/chat/completions", "prefixed_path_extra_segments"},
		{"/api/v1/messages", "prefixed_path_extra_segments"},
		{"/v1/models", ""},
		{"/v1/messages/count_tokens", ""},
	} {
		var logs strings.Builder
		u, _ := url.Parse("http://up")
		h := &Handler{Upstream: u, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		h.once.Do(h.init)
		h.checkModelPath("r1", tc.path)
		h.checkModelPath("r1", tc.path)
		got := logs.String()
		if tc.kind == "" {
			if got != "" {
				t.Errorf("%s: logged %s", tc.path, got)
			}
			continue
		}
		if strings.Count(got, "kind="+tc.kind) != 1 || !strings.Contains(got, "level=WARN") || !strings.Contains(got, "fix=") {
			t.Errorf("%s: want one warn line of kind %s with a fix, got %s", tc.path, tc.kind, got)
		}
	}
}
