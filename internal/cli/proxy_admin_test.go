package cli

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// upstreamWithAdminPaths is a model server that serves its own /metrics, /healthz and /readyz
// (vLLM and llama-server serve /metrics) and a chat completion on /v1/chat/completions.
func upstreamWithAdminPaths(t *testing.T) *httptest.Server {
	up := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics", "/healthz", "/readyz":
			io.WriteString(w, "upstream "+r.URL.Path+"\n")
		case "/v1/chat/completions":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"served-model","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`)
		default:
			http.NotFound(w, r)
		}
	})
	return up
}

// stopProxy cancels the command's context and waits for a clean exit.
func stopProxy(t *testing.T, stop context.CancelFunc, exit <-chan error) {
	t.Helper()
	stop()
	awaitExit(t, exit, 30*time.Second, "proxy did not exit")
}

// awaitExit waits up to d for a command running in the background to return without an error;
// what says what did not happen in time.
func awaitExit(t *testing.T, exit <-chan error, d time.Duration, what string) {
	t.Helper()
	select {
	case err := <-exit:
		if err != nil {
			t.Fatalf("proxy exit: %v", err)
		}
	case <-time.After(d):
		t.Fatal(what)
	}
}

// TestProxyPortForwardsAdminPaths: the proxy port hides none of the upstream's pages; the gateway's
// own endpoints are on --admin-listen only, and off without it.
func TestProxyPortForwardsAdminPaths(t *testing.T) {
	up := upstreamWithAdminPaths(t)
	for _, withAdmin := range []bool{false, true} {
		ctx, stop := context.WithCancel(context.Background())
		args := []string{"proxy", "--upstream", up.URL, "--listen", "127.0.0.1:0", "--capture-dir", t.TempDir()}
		if withAdmin {
			args = append(args, "--admin-listen", "127.0.0.1:0")
		}
		addr, exit, stderr := runProxyCmd(t, ctx, args)
		for _, p := range []string{"/metrics", "/healthz", "/readyz", "/ng-rollout/r1/metrics"} {
			code, body := capturetest.Get(t, "http://"+addr+p)
			want := "upstream " + strings.TrimPrefix(p, "/ng-rollout/r1") + "\n"
			if code != 200 || body != want {
				t.Errorf("admin=%v GET %s on the proxy port: %d %.80q, want the upstream's %q", withAdmin, p, code, body, want)
			}
		}
		m := regexp.MustCompile(`admin_url=(\S+)`).FindStringSubmatch(stderr.String())
		if !withAdmin {
			if m != nil && m[1] != `""` {
				t.Errorf("admin endpoints without --admin-listen: %s", m[1])
			}
			stopProxy(t, stop, exit)
			continue
		}
		if m == nil {
			t.Fatalf("no admin_url:\n%s", stderr.String())
		}
		admin := m[1]
		if code, body := capturetest.Get(t, admin+"/healthz"); code != 200 || body != "ok\n" {
			t.Errorf("admin /healthz: %d %q", code, body)
		}
		if code, body := capturetest.Get(t, admin+"/readyz"); code != 200 || body != "ready\n" {
			t.Errorf("admin /readyz: %d %q", code, body)
		}
		if code, body := capturetest.Get(t, admin+"/metrics"); code != 200 || !strings.Contains(body, "modelcalls_gateway_calls_in_flight") {
			t.Errorf("admin /metrics: %d, no gateway series", code)
		}
		if code, _ := capturetest.Get(t, admin+"/v1/chat/completions"); code != 404 {
			t.Errorf("admin listener forwards: %d", code)
		}
		stopProxy(t, stop, exit)
	}
}

// TestProxyAccessLog: one info line per captured call with rollout, dialect, model, status,
// tokens, latency, TTFT and outcome, as text and as JSON.
func TestProxyAccessLog(t *testing.T) {
	up := upstreamWithAdminPaths(t)
	for _, format := range []string{"text", "json"} {
		ctx, stop := context.WithCancel(context.Background())
		addr, exit, stderr := runProxyCmd(t, ctx, []string{"proxy", "--upstream", up.URL, "--listen", "127.0.0.1:0",
			"--capture-dir", t.TempDir(), "--log-format", format})
		r, err := http.Post("http://"+addr+"/ng-rollout/r7/v1/chat/completions", "application/json", strings.NewReader(`{"model":"asked-model","messages":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		capturetest.Get(t, "http://"+addr+"/v1/models") // uncaptured: no access line
		stopProxy(t, stop, exit)

		var lines []string
		for _, l := range strings.Split(stderr.String(), "\n") {
			if strings.Contains(l, "model call") && !strings.Contains(l, "listening") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 {
			t.Fatalf("%s: %d access lines, want 1:\n%s", format, len(lines), stderr.String())
		}
		l := lines[0]
		if format == "text" {
			for _, want := range []string{"level=INFO", `msg="model call"`, "rollout_id=r7", "dialect=chat", "model=served-model",
				"status=200", "tokens_in=11", "tokens_out=7", "latency_ms=", "ttft_ms=", "outcome=ok", "capture=ok"} {
				if !strings.Contains(l, want) {
					t.Errorf("text access line lacks %q: %s", want, l)
				}
			}
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("json access line %q: %v", l, err)
		}
		for k, v := range map[string]any{"level": "INFO", "msg": "model call", "rollout_id": "r7", "dialect": "chat",
			"model": "served-model", "status": 200.0, "tokens_in": 11.0, "tokens_out": 7.0, "outcome": "ok", "capture": "ok"} {
			if rec[k] != v {
				t.Errorf("json access line %s = %v, want %v", k, rec[k], v)
			}
		}
		for _, k := range []string{"latency_ms", "ttft_ms", "model_call_id"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("json access line lacks %s", k)
			}
		}
	}
}

// TestProxyRoutingMistakes: each kind of routing mistake is named once at warn, with a fix.
func TestProxyRoutingMistakes(t *testing.T) {
	up := upstreamWithAdminPaths(t)
	ctx, stop := context.WithCancel(context.Background())
	addr, exit, stderr := runProxyCmd(t, ctx, []string{"proxy", "--upstream", up.URL + "/v1", "--listen", "127.0.0.1:0",
		"--capture-dir", t.TempDir()})
	for range 3 {
		for _, p := range []string{"/ng-rollout/r1/chat/completions", "/ng-rollout/r1/v1/chat/completions", "/base/ng-rollout/r1/v1/chat/completions", "/v1/chat/completions"} {
			r, err := http.Post("http://"+addr+p, "application/json", strings.NewReader(`{"model":"m"}`))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
	}
	stopProxy(t, stop, exit)
	log := stderr.String()
	for kind, want := range map[string]string{
		"upstream_path_v1":         "give the upstream without /v1",
		"prefixed_path_missing_v1": "/ng-rollout/r1/v1",
		"upstream_404":             "upstream_path=/v1/v1/chat/completions",
		"prefix_not_leading":       "before_prefix=/base",
		"unprefixed_model_call":    "/ng-rollout/ROLLOUT_ID/v1",
	} {
		n := strings.Count(log, "kind="+kind)
		if n != 1 {
			t.Errorf("kind %s logged %d times, want once:\n%s", kind, n, log)
			continue
		}
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "kind="+kind) && (!strings.Contains(l, "level=WARN") || !strings.Contains(l, want)) {
				t.Errorf("kind %s: want a warn line containing %q: %s", kind, want, l)
			}
		}
	}
	// Every uncaptured model call has its access line at info: the prefixed one missing /v1, the
	// buried prefix and the unprefixed one, three times each.
	for reason, path := range map[string]string{"not_model_path": "/ng-rollout/r1/chat/completions",
		"prefix_not_leading": "/base/ng-rollout/r1/v1/chat/completions", "unprefixed": "/v1/chat/completions"} {
		if n := strings.Count(log, `level=INFO msg="uncaptured model call" method=POST path=`+path+" "); n != 3 {
			t.Errorf("%d access lines for the uncaptured calls on %s, want 3:\n%s", n, path, log)
		}
		if !strings.Contains(log, "reason="+reason+" status=") {
			t.Errorf("no access line with reason=%s", reason)
		}
	}
}

// TestProxyStartNotes: a capture dir the proxy had to create is said at info (a typo in the path
// otherwise goes unnoticed), and an upstream that accepts no connections is warned about once at
// start, while the gateway still starts and answers 502.
func TestProxyStartNotes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	dir := filepath.Join(t.TempDir(), "typo")
	ctx, stop := context.WithCancel(context.Background())
	addr, exit, stderr := runProxyCmd(t, ctx, []string{"proxy", "--upstream", closed, "--listen", "127.0.0.1:0", "--capture-dir", dir})
	// Both notes come before the listening line runProxyCmd waited for.
	log := stderr.String()
	res, err := http.Post("http://"+addr+"/ng-rollout/r1/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	stopProxy(t, stop, exit)
	if !strings.Contains(log, `level=INFO msg="created the capture dir, which did not exist" capture_dir=`+dir) {
		t.Errorf("no info line naming the created capture dir:\n%s", log)
	}
	if n := strings.Count(log, "the upstream does not accept connections"); n != 1 || !strings.Contains(log, "level=WARN") {
		t.Errorf("%d warnings about the unreachable upstream, want 1:\n%s", n, log)
	}
	if res.StatusCode != http.StatusBadGateway {
		t.Errorf("call through the gateway: %d, want 502", res.StatusCode)
	}
	if n := strings.Count(stderr.String(), "the upstream does not accept connections"); n != 1 {
		t.Errorf("%d warnings after a call, want still 1", n)
	}
}
