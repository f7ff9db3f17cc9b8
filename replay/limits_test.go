package replay

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// denseRequest is a Chat request of about size bytes made of many small messages: the shape that
// costs the most per byte when a request is decoded into a tree.
func denseRequest(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"m","messages":[`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":"user","content":"turn %d\nok"}`, i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// TestRequestMemoryFollowsItsSize: answering a large request, matched or missed, allocates at most
// about 3 times its size in all (its bytes as read, and what matching needs besides), however
// small its values are.
func TestRequestMemoryFollowsItsSize(t *testing.T) {
	req := denseRequest(8 << 20)
	store := capturetest.NewStore(t)
	appendLine(t, store, "r1", capture.Exchange{StatusCode: ptr(200), Request: req, Response: []byte(`{"id":"x"}`)})
	s := &Server{Source: store, Timing: Timing{Fast: true}, Logger: capturetest.QuietLogger()}
	s.once.Do(s.init)
	s.state("r1") // the recording is read once, before the measurement
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
	}{
		{"match", req, 200},
		{"miss", bytes.Replace(req, []byte(`"turn 7\nok"`), []byte(`"turn 7\nko"`), 1), MissStatus},
	} {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/ng-rollout/r1/v1/chat/completions", bytes.NewReader(tc.body)))
		runtime.ReadMemStats(&m1)
		ratio := float64(m1.TotalAlloc-m0.TotalAlloc) / float64(len(tc.body))
		t.Logf("%s: %d MiB request, %.2fx allocated", tc.name, len(tc.body)>>20, ratio)
		if w.Code != tc.status {
			t.Fatalf("%s: status %d, want %d: %s", tc.name, w.Code, tc.status, w.Body.Bytes())
		}
		if ratio > 3 {
			t.Errorf("%s: allocated %.1fx the request's size, want at most 3x", tc.name, ratio)
		}
	}
}

// TestRequestLimits: a request body past the size limit gets 413 request_too_large, one that stops
// arriving gets 408 request_timeout after the body timeout; a body that keeps arriving is read.
func TestRequestLimits(t *testing.T) {
	store := capturetest.NewStore(t)
	appendLine(t, store, "r1", capture.Exchange{StatusCode: ptr(200), Request: []byte(`{"model":"m"}`), Response: []byte(`{"id":"x"}`)})
	s := &Server{Source: store, Timing: Timing{Fast: true}, Logger: capturetest.QuietLogger(),
		MaxRequestBytes: 64, RequestBodyTimeout: 150 * time.Millisecond}
	srv := capturetest.NewServer(t, s.ServeHTTP)
	url := srv.URL + "/ng-rollout/r1/v1/chat/completions"
	if status, body := capturetest.Post(t, url, "application/json", strings.NewReader(`{"model":"m","pad":"`+strings.Repeat("x", 100)+`"}`)); status != 413 || !strings.Contains(body, "request_too_large") {
		t.Errorf("large body: %d %s, want 413 request_too_large", status, body)
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	io.WriteString(c, "POST /ng-rollout/r1/v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{\"model\":")
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("stalled body: no answer: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 408 || !strings.Contains(string(b), "request_timeout") || time.Since(start) < 150*time.Millisecond {
		t.Errorf("stalled body: %d %s after %v; want 408 request_timeout after the 150ms timeout", res.StatusCode, b, time.Since(start))
	}
	if status, body := capturetest.Post(t, url, "application/json", strings.NewReader(`{"model":"m"}`)); status != 200 {
		t.Errorf("recorded request: %d %s", status, body)
	}
}
