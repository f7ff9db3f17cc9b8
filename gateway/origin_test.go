package gateway_test

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestCrossSiteRequestsRefused: a web page's request (text/plain POST, no preflight) is refused with
// 403 and neither forwarded nor captured; the gateway's own origin, --allow-origin origins and
// clients without an Origin (SDKs) are served and captured as before.
func TestCrossSiteRequestsRefused(t *testing.T) {
	e := newEnv(t, capturetest.Replay(200, "application/json", []byte(`{"id":"c","object":"chat.completion","model":"m","choices":[]}`)),
		func(h *gateway.Handler) { h.AllowedOrigins = []string{"https://UI.example:443/"} })
	own := e.gw.URL
	for _, tc := range []struct {
		name    string
		headers map[string]string
		refused bool
	}{
		{"sdk, no origin", nil, false},
		{"evil origin", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, true},
		{"evil origin without fetch metadata", map[string]string{"Origin": "https://evil.example"}, true},
		{"another local port", map[string]string{"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"}, true},
		{"opaque origin", map[string]string{"Origin": "null"}, true},
		{"cross-site without origin", map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
		{"own origin", map[string]string{"Origin": own, "Sec-Fetch-Site": "same-origin"}, false},
		{"own origin, upper case", map[string]string{"Origin": strings.ToUpper(own)}, false},
		{"allowed origin", map[string]string{"Origin": "https://ui.example", "Sec-Fetch-Site": "cross-site"}, false},
		{"same-site without origin", map[string]string{"Sec-Fetch-Site": "same-site"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "o-" + strings.NewReplacer(" ", "-", ",", "").Replace(tc.name)
			before := len(e.up.Requests())
			req, _ := http.NewRequest(http.MethodPost, e.url(id, "/v1/chat/completions"), strings.NewReader(`{"model":"m","messages":[]}`))
			req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			res, err := rawClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			forwarded := len(e.up.Requests()) - before
			_, statErr := os.Stat(e.store.Dir() + "/" + id + ".capture.jsonl")
			if tc.refused {
				if res.StatusCode != http.StatusForbidden || !strings.Contains(string(b), gateway.ReasonCrossSite) {
					t.Errorf("status %d %s; want 403 %s", res.StatusCode, b, gateway.ReasonCrossSite)
				}
				if forwarded != 0 || statErr == nil {
					t.Errorf("refused request forwarded %d times, capture file present %v", forwarded, statErr == nil)
				}
				return
			}
			if res.StatusCode != 200 || forwarded != 1 {
				t.Fatalf("status %d, forwarded %d; want 200, forwarded once", res.StatusCode, forwarded)
			}
			e.one(id)
		})
	}
	// Once per origin at warn, one access line per refusal.
	e2 := 0
	for _, l := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(l, "refused a cross-site request") && strings.Contains(l, "origin=https://evil.example") {
			e2++
		}
	}
	if e2 != 1 {
		t.Errorf("%d warn lines for https://evil.example, want 1:\n%s", e2, e.logs.String())
	}
	if n := strings.Count(e.logs.String(), `msg="cross-site request refused"`); n != 5 {
		t.Errorf("%d access log lines for refusals, want 5", n)
	}
}

func TestParseOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://UI.example":      "https://ui.example",
		"https://ui.example:443/": "https://ui.example",
		"http://127.0.0.1:80":     "http://127.0.0.1",
		"http://[::1]:8080":       "http://[::1]:8080",
		"null":                    "",
		"ui.example":              "",
		"https://ui.example/path": "",
		"vscode-webview://abc123": "vscode-webview://abc123",
		"//ui.example":            "",
		"":                        "",
	} {
		got, err := gateway.ParseOrigin(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("ParseOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
