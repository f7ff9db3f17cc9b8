package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestViewAndReplayRefuseOtherHosts: a DNS-rebinding page reaches view and replay on loopback with
// its own name in Host; both answer it 403 and answer loopback names, their listen address and
// --allowed-host names as before.
func TestViewAndReplayRefuseOtherHosts(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		args   []string
		addrRe string // where the address is printed (stdout for view, the log for replay)
		path   string
		method string
	}{
		{"view", []string{"view", "--capture-dir", dir, "--listen", "127.0.0.1:0", "--allowed-host", "box.lan"},
			`on http://([^/\s]+)/`, "/api/overview", http.MethodGet},
		{"replay", []string{"replay", "--capture-dir", dir, "--listen", "127.0.0.1:0", "--allowed-host", "box.lan"},
			`replay listening" addr=(\S+)`, "/ng-rollout/r1/v1/chat/completions", http.MethodPost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, stop := startInProcess(t, tc.args, tc.addrRe)
			defer stop()
			for _, h := range []struct {
				host      string
				forbidden bool
			}{
				{"", false}, // the address itself
				{"localhost", false},
				{"box.lan:8080", false},
				{"rebind.evil.example", true},
				{"rebind.evil.example:" + strings.Split(addr, ":")[1], true},
			} {
				req, _ := http.NewRequest(tc.method, "http://"+addr+tc.path, strings.NewReader(`{"model":"m","messages":[]}`))
				if h.host != "" {
					req.Host = h.host
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if forbidden := res.StatusCode == http.StatusForbidden; forbidden != h.forbidden {
					t.Errorf("Host %q: %d %s; want forbidden %v", h.host, res.StatusCode, b, h.forbidden)
				}
				if h.forbidden && !strings.Contains(string(b), "--allowed-host") {
					t.Errorf("Host %q: the 403 does not name --allowed-host: %s", h.host, b)
				}
			}
		})
	}
}

// startInProcess runs `modelcalls <args>` in this process until stop, and returns the address its
// stdout or log names (the first group of addrRe).
func startInProcess(t *testing.T, args []string, addrRe string) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	root := NewRootCommand(&Streams{In: strings.NewReader(""), Out: outW, ErrOut: outW})
	root.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); outW.Close() }()
	addrs := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(addrRe)
		sc := bufio.NewScanner(outR)
		sent := false
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addrs <- m[1]
				sent = true
			}
		}
	}()
	select {
	case a := <-addrs:
		return a, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: %v", args[0], err)
			}
		}
	case err := <-done:
		cancel()
		t.Fatalf("%s exited: %v", args[0], err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("%s: no address printed", args[0])
	}
	return "", nil
}

// TestProxyAllowOrigin: the proxy refuses a web page's cross-site call and serves --allow-origin
// origins and SDKs; a value that is not an origin is a usage error, and run takes the flag only for
// a gateway of its own.
func TestProxyAllowOrigin(t *testing.T) {
	up := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[]}`)
	})
	dir := t.TempDir()
	addr, stop := startInProcess(t, []string{"proxy", "--upstream", up.URL, "--capture-dir", dir, "--listen", "127.0.0.1:0",
		"--allow-origin", "https://ui.example"}, `msg="modelcalls proxy listening" addr=(\S+)`)
	defer stop()
	for origin, want := range map[string]int{"": 200, "https://ui.example": 200, "https://evil.example": 403} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/ng-rollout/o1/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[]}`))
		req.Header.Set("Content-Type", "text/plain")
		if origin != "" {
			req.Header.Set("Origin", origin)
			req.Header.Set("Sec-Fetch-Site", "cross-site")
		}
		if status, b := capturetest.Do(t, req); status != want {
			t.Errorf("Origin %q: %d %s, want %d", origin, status, b, want)
		}
	}
	checkExits(t, []exitCase{
		{"not an origin", []string{"proxy", "--upstream", up.URL, "--capture-dir", dir, "--allow-origin", "ui.example"}, ExitUsage, "--allow-origin"},
		{"run with --gateway", []string{"run", "--rollout", "r1", "--gateway", "http://127.0.0.1:9", "--allow-origin", "https://ui.example", "--", "true"}, ExitUsage, "--allow-origin goes with --upstream"},
	})
}
