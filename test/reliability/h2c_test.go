//go:build unix

package reliability

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/rollout"
)

// Every HTTP version a client may speak on http:// is captured: HTTP/1.0, HTTP/1.1, an h2c
// upgrade offer (curl --http2: declined, answered in HTTP/1.1, the offer not passed upstream) and
// HTTP/2 cleartext with prior knowledge (curl --http2-prior-knowledge, Go's UnencryptedHTTP2). A
// WebSocket upgrade still passes through uncaptured.

// headerUpstream answers like echoHandler, remembers the upgrade-related headers of each request,
// and answers a WebSocket upgrade with capturetest.EchoUpgrade.
type headerUpstream struct {
	mu   sync.Mutex
	seen map[string]http.Header // rollout nonce -> the request headers that matter here
}

func (u *headerUpstream) start(t *testing.T) string {
	u.seen = map[string]http.Header{}
	srv := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			capturetest.EchoUpgrade(w)
			return
		}
		h := http.Header{}
		for _, k := range []string{"Upgrade", "Http2-Settings", "Connection"} {
			if v, ok := r.Header[k]; ok {
				h[k] = v
			}
		}
		u.mu.Lock()
		u.seen[r.URL.Path+" "+r.Header.Get("X-Case")] = h
		u.mu.Unlock()
		echoHandler(w, r)
	})
	return srv.URL
}

// rawHTTP sends req (a whole HTTP/1.x request) on a new connection to the proxy at base and
// returns the response's status line and body.
func rawHTTP(t *testing.T, base, req string) (statusLine string, body []byte) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, req)
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer res.Body.Close()
	body, _ = io.ReadAll(res.Body)
	return fmt.Sprintf("%s %d", res.Proto, res.StatusCode), body
}

func TestHTTPVersionsAreCaptured(t *testing.T) {
	up := &headerUpstream{}
	dir := t.TempDir()
	p := startProxy(t, up.start(t), dir, nil)
	store := openStore(t, capture.OpenExisting, dir)
	path := func(id string) string { return rollout.PathPrefix(id) + "/v1/chat/completions" }
	type result struct {
		status string // "HTTP/x.y code"
		body   []byte
	}
	h2 := func(stream bool) func(t *testing.T, id string) result {
		return func(t *testing.T, id string) result {
			var protos http.Protocols
			protos.SetUnencryptedHTTP2(true)
			tr := &http.Transport{Protocols: &protos}
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, p.url+path(id), bytes.NewReader(echoRequest(id, stream, 0)))
			req.Header.Set("Content-Type", "application/json")
			res, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("h2c prior knowledge: %v", err)
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			return result{fmt.Sprintf("%s %d", res.Proto, res.StatusCode), b}
		}
	}
	curl := func(args ...string) func(t *testing.T, id string) result {
		return func(t *testing.T, id string) result {
			bin, err := exec.LookPath("curl")
			if err != nil {
				t.Skip("curl not installed")
			}
			out, err := exec.Command(bin, append(args, "-sS", "-X", "POST", "-H", "Content-Type: application/json",
				"--data-binary", string(echoRequest(id, false, 0)), "-w", "\n%{http_version} %{http_code}", p.url+path(id))...).CombinedOutput()
			if err != nil {
				t.Fatalf("curl %v: %v\n%s", args, err, out)
			}
			i := bytes.LastIndexByte(out, '\n')
			ver, code, _ := strings.Cut(string(out[i+1:]), " ")
			if ver == "2" {
				ver = "2.0"
			}
			return result{"HTTP/" + ver + " " + code, out[:i]}
		}
	}
	for _, tc := range []struct {
		name      string
		stream    bool
		run       func(t *testing.T, id string) result
		wantProto string
	}{
		{"http1.0", false, func(t *testing.T, id string) result {
			b := echoRequest(id, false, 0)
			s, body := rawHTTP(t, p.url, fmt.Sprintf("POST %s HTTP/1.0\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path(id), len(b), b))
			return result{s, body}
		}, ""},
		{"http1.1", true, func(t *testing.T, id string) result {
			res, err := http.Post(p.url+path(id), "application/json", bytes.NewReader(echoRequest(id, true, 0)))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			return result{fmt.Sprintf("%s %d", res.Proto, res.StatusCode), b}
		}, "HTTP/1.1"},
		{"h2c-upgrade", false, func(t *testing.T, id string) result {
			b := echoRequest(id, false, 0)
			s, body := rawHTTP(t, p.url, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: gateway\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nX-Case: h2c-upgrade\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path(id), len(b), b))
			return result{s, body}
		}, "HTTP/1.1"},
		{"h2c-prior-knowledge", false, h2(false), "HTTP/2.0"},
		{"h2c-prior-knowledge-stream", true, h2(true), "HTTP/2.0"},
		{"curl-http2-upgrade", false, curl("--http2"), "HTTP/1.1"},
		{"curl-http2-prior-knowledge", false, curl("--http2-prior-knowledge"), "HTTP/2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "v-" + tc.name
			got := tc.run(t, id)
			want := echoAnswer(id, tc.stream, 0)
			t.Logf("%s: %s, %d bytes", tc.name, got.status, len(got.body))
			if !strings.HasSuffix(got.status, " 200") || (tc.wantProto != "" && !strings.HasPrefix(got.status, tc.wantProto+" ")) {
				t.Errorf("answer %s, want %s 200", got.status, tc.wantProto)
			}
			if !bytes.Equal(got.body, want) {
				t.Errorf("body %.200q, want the upstream's %.200q", got.body, want)
			}
			xs := capturetest.Lines(t, store, id)
			if len(xs) != 1 || num(xs[0].StatusCode) != "200" || xs[0].ErrorCategory != nil {
				t.Fatalf("%d capture lines for the call (want 1, status 200, clean): %+v", len(xs), xs)
			}
		})
	}
	up.mu.Lock()
	seen := up.seen["/v1/chat/completions h2c-upgrade"]
	up.mu.Unlock()
	if seen == nil {
		t.Errorf("the upstream never got the h2c-upgrade call")
	} else if len(seen) != 0 {
		t.Errorf("the h2c upgrade offer reached the upstream: %v", seen)
	}

	t.Run("websocket-passthrough", func(t *testing.T) {
		c, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: gateway\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", rollout.PathPrefix("ws")+"/v1/responses")
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("websocket upgrade: %v %v", res, err)
		}
		io.WriteString(c, "ping\n")
		line, err := br.ReadString('\n')
		if err != nil || line != "echo ping\n" {
			t.Fatalf("after the upgrade: %q %v", line, err)
		}
		if has, _, _ := store.Stat("ws"); has {
			t.Errorf("a WebSocket passthrough was captured")
		}
	})
	p.stop()
}
