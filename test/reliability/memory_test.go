//go:build unix

package reliability

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// Request bodies announced but not sent: memory grows with the bytes received, never with the
// Content-Length announced, and a body that stops arriving is cut off by the request body timeout.

// procStatus is the size key (VmRSS: resident now, VmHWM: peak resident) of process pid in bytes,
// from /proc/<pid>/status.
func procStatus(t testing.TB, pid int, key string) int64 {
	t.Helper()
	b := capturetest.ReadFile(t, fmt.Sprintf("/proc/%d/status", pid))
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s %q: %v", key, v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}

// rssBytes is the resident set size of process pid.
func rssBytes(t testing.TB, pid int) int64 { return procStatus(t, pid, "VmRSS") }

// announce opens a connection to the proxy at base and sends the headers of a captured call
// announcing a body of size bytes, then the first n bytes of it.
func announce(t testing.TB, base, id string, size, n int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /ng-rollout/%s/v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		id, size, strings.Repeat("{", n))
	return c
}

// TestAnnouncedBodiesCostNoMemory: 40 connections of a real proxy process each announce a 60 MiB
// body (within the 64 MiB request limit) and send one byte. The proxy's RSS must not grow with
// what was announced (40 x 60 MiB = 2.4 GiB); then the clients leave and every call is captured as
// cancelled, its claim released.
func TestAnnouncedBodiesCostNoMemory(t *testing.T) {
	up := &recordingUpstream{}
	dir := t.TempDir()
	p := startProxy(t, up.start(t), dir, nil)
	store := openStore(t, capture.OpenExisting, dir)
	const conns, announced = 40, 60 << 20
	before := rssBytes(t, p.cmd.Process.Pid)
	var cs []net.Conn
	for range conns {
		cs = append(cs, announce(t, p.url, "mem", announced, 1))
	}
	// Every call has its claim once the gateway is reading its body. There is no event for "the
	// buffer is allocated": the RSS is sampled over a short window after that.
	awaitClaims(t, store, "mem", conns)
	peak := before
	for range 20 {
		peak = max(peak, rssBytes(t, p.cmd.Process.Pid))
		time.Sleep(25 * time.Millisecond)
	}
	growth := peak - before
	t.Logf("RSS before %d MiB, peak with %d connections announcing %d MiB each: %d MiB (growth %d MiB)",
		before>>20, conns, announced>>20, peak>>20, growth>>20)
	if growth > 200<<20 {
		t.Errorf("RSS grew by %d MiB for %d one-byte bodies: memory follows the announced Content-Length", growth>>20, conns)
	}
	for _, c := range cs {
		c.Close()
	}
	awaitClaims(t, store, "mem", 0)
	p.stop()
	xs := capturetest.Lines(t, store, "mem")
	if len(xs) != conns {
		t.Fatalf("%d lines for %d calls", len(xs), conns)
	}
	for _, x := range xs {
		if str(x.ErrorCategory) != "cancelled" || x.UpstreamAttempted == nil || *x.UpstreamAttempted {
			t.Fatalf("line: category %s, upstream_attempted %v; want cancelled, false", str(x.ErrorCategory), x.UpstreamAttempted)
		}
	}
	if up.hits.Load() != 0 {
		t.Errorf("the upstream got %d of the unfinished calls", up.hits.Load())
	}
	assertNoClaimsIn(t, dir)
}

// TestStalledRequestBody: a client that sends part of its body and stops is cut off after the
// request body timeout: it gets 408 request_timeout, the call is not forwarded and its line records
// that answer (status 408, timeout, local request_timeout), and its claim is released, while the
// connection stays otherwise untouched before.
func TestStalledRequestBody(t *testing.T) {
	up := &recordingUpstream{}
	dir := t.TempDir()
	p := startProxy(t, up.start(t), dir, []string{"--request-body-timeout", "300ms"})
	store := openStore(t, capture.OpenExisting, dir)
	c := announce(t, p.url, "stall", 1000, 10)
	defer c.Close()
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	res.Body.Close()
	took := time.Since(start)
	t.Logf("stalled body answered %d after %v (timeout 300ms)", res.StatusCode, took.Round(time.Millisecond))
	if res.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status %d, want 408", res.StatusCode)
	}
	if took < 300*time.Millisecond {
		t.Errorf("answered after %v, before the 300ms timeout", took)
	}
	awaitClaims(t, store, "stall", 0)
	xs := capturetest.Lines(t, store, "stall")
	if len(xs) != 1 || str(xs[0].ErrorCategory) != "timeout" || xs[0].StatusCode == nil || *xs[0].StatusCode != 408 ||
		str(xs[0].LocalResponseReason) != "request_timeout" || xs[0].UpstreamAttempted == nil || *xs[0].UpstreamAttempted {
		t.Fatalf("lines %+v; want one line of the 408 request_timeout (timeout) with upstream_attempted false", xs)
	}
	// A body that keeps arriving, slower than the whole timeout but never stalling that long, is
	// not cut off: the timeout is per read.
	c2 := announce(t, p.url, "slow", 12, 0)
	defer c2.Close()
	body := `{"model":"m"}`[:12]
	for i := range 4 {
		time.Sleep(120 * time.Millisecond)
		c2.Write([]byte(body[i*3 : i*3+3]))
	}
	c2.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err = http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("slow but steady body: %d, want the upstream's 200", res.StatusCode)
	}

	// The same stall on HTTP/2 (prior knowledge): the stream's read deadline cuts it off.
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos}
	defer tr.CloseIdleConnections()
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte(`{"model":`))
	req, _ := http.NewRequest(http.MethodPost, p.url+"/ng-rollout/stall-h2/v1/chat/completions", pr)
	req.ContentLength = 1000
	res, err = tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("h2 stalled body: %v", err)
	}
	res.Body.Close()
	t.Logf("HTTP/2 stalled body: %s %d", res.Proto, res.StatusCode)
	if res.StatusCode != http.StatusRequestTimeout || res.ProtoMajor != 2 {
		t.Errorf("h2 stalled body: %s %d, want HTTP/2.0 408", res.Proto, res.StatusCode)
	}
	awaitClaims(t, store, "stall-h2", 0)
	if xs := capturetest.Lines(t, store, "stall-h2"); len(xs) != 1 || str(xs[0].ErrorCategory) != "timeout" || xs[0].StatusCode == nil || *xs[0].StatusCode != 408 {
		t.Errorf("h2 stalled body lines %+v; want one line of the 408 (timeout)", xs)
	}
	p.stop()
	if got := up.hits.Load(); got != 1 {
		t.Errorf("upstream hits %d, want 1 (only the steady body)", got)
	}
	if !strings.Contains(p.stderr.String(), "rollout_id=stall") {
		t.Errorf("no log line names the rollout of the stalled call")
	}
}
