package cli

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestReplayRequestLimits: replay serves with the proxy's request hygiene, set by the same flags:
// a body past --max-request-bytes gets 413, a connection past --max-connections gets 503.
func TestReplayRequestLimits(t *testing.T) {
	addr, stop := startInProcess(t, []string{"replay", "--capture-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--max-request-bytes", "32", "--max-connections", "1", "--request-body-timeout", "5s", "--keepalive-timeout", "30s"},
		`replay listening" addr=(\S+)`)
	defer stop()
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	io.WriteString(first, "POST /ng-rollout/r1/v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 64\r\n\r\n"+strings.Repeat("x", 64))
	first.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(first)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "request_too_large") {
		t.Errorf("body past --max-request-bytes: %d %s", res.StatusCode, b)
	}
	// first holds the only slot (413 on a body read whole keeps the connection): a second one is refused.
	second, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	io.WriteString(second, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
	second.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err = http.ReadResponse(bufio.NewReader(second), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("connection past --max-connections: %d, want 503", res.StatusCode)
	}
}
