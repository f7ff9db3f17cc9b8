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
