//go:build unix

package reliability

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// Upstream-driven memory and disk: whatever the upstream sends, a real `modelcalls proxy` process
// stays within a bounded resident size, its capture line and spool stay within the capture limit,
// and the client still gets every byte as sent.

// procHWMKiB is the peak resident size of process pid, in KiB.
func procHWMKiB(t testing.TB, pid int) int64 { return procStatus(t, pid, "VmHWM") >> 10 }

// gzipBomb returns a gzip body (concatenated members) that decodes to n spaces (a byte the line
// stores unescaped, so the line's size is the kept size; zeros would be stored as \u0000).
func gzipBomb(t testing.TB, n int64) []byte {
	t.Helper()
	const member = 16 << 20
	var one bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&one, gzip.BestCompression)
	zw.Write(bytes.Repeat([]byte(" "), member))
	zw.Close()
	return bytes.Repeat(one.Bytes(), int(n/member))
}

// passThrough calls the proxy and returns the status and the SHA-256 and length of the body as
// received (no transparent decompression).
func passThrough(t *testing.T, url string, body []byte) (int, [32]byte, int64) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept-Encoding", "gzip") // set by hand: the client does not decode
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, res.Body)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return res.StatusCode, sum, n
}

// TestGzipBombCaptureCapped: a 1 MB gzip body that decodes to 1 GiB reaches the client as sent,
// while the capture keeps the default 64 MiB of decoded bytes, says capture_too_large, stays a
// line NeMo Gym reads (one exchange, response null, response_raw the first 64 MiB), and the
// proxy process neither decodes the rest into memory nor spools it.
func TestGzipBombCaptureCapped(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 64 MiB")
	}
	bomb := gzipBomb(t, 1<<30)
	want := sha256.Sum256(bomb)
	t.Logf("gzip body %d bytes, decoding to 1 GiB", len(bomb))
	up := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Length", strconv.Itoa(len(bomb)))
		w.Write(bomb)
	})
	dir := filepath.Join(t.TempDir(), "capture")
	kept, args := 64<<20, []string(nil) // the default limit
	if raceOn {
		// Race-instrumented, reading back a 64 MiB line takes minutes: the same bomb against a
		// lower limit.
		kept, args = 8<<20, []string{"--max-capture-bytes", strconv.Itoa(8 << 20)}
	}
	p := startProxy(t, up.URL, dir, args)
	idle := procHWMKiB(t, p.cmd.Process.Pid)

	status, sum, n := passThrough(t, p.url+"/ng-rollout/bomb/v1/chat/completions", chatRequest("bomb", false))
	if status != http.StatusOK || sum != want || n != int64(len(bomb)) {
		t.Fatalf("client got status %d, %d bytes (want %d), body as sent: %v", status, n, len(bomb), sum == want)
	}
	peak := procHWMKiB(t, p.cmd.Process.Pid)
	p.stop()

	st, err := os.Stat(filepath.Join(dir, "bomb.capture.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > int64(kept)+64<<10 {
		t.Fatalf("capture line is %d bytes: the 1 GiB decoded body was kept past the %d MiB limit", st.Size(), kept>>20)
	}
	store := openStore(t, capture.Open, dir)
	x := capturetest.Lines(t, store, "bomb")
	if len(x) != 1 || str(x[0].ErrorCategory) != "capture_too_large" || string(x[0].Response) != "null" ||
		x[0].ResponseRaw == nil || len(*x[0].ResponseRaw) != kept {
		t.Fatalf("line: %d exchanges, category %s, response %.40s, response_raw %d bytes", len(x), str(x[0].ErrorCategory),
			x[0].Response, len(deref(x[0].ResponseRaw)))
	}
	if growth := peak - idle; growth > 160<<10 {
		t.Fatalf("proxy grew by %d MiB for one gzip bomb (idle %d KiB, peak %d KiB)", growth>>10, idle, peak)
	}
	t.Logf("line %d MiB, proxy RSS idle %d MiB, peak %d MiB", st.Size()>>20, idle>>10, peak>>10)
}

// TestNewlinelessSSELine: an upstream SSE line of 256 MiB without a line break passes to the
// client whole, while the proxy holds at most 16 MiB of it (the largest event it reassembles, or
// the capture limit when that is lower): the capture keeps the first bytes up to the limit as response_raw,
// says capture_too_large, and the [DONE] after the line still ends the stream (the terminal hold
// works past the limit).
func TestNewlinelessSSELine(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 256 MiB")
	}
	lineBytes := 256 << 20
	cases := []struct {
		name      string
		args      []string
		kept      int
		maxGrowth int64 // KiB
	}{
		{"default limit", nil, 64 << 20, 96 << 10},
		{"16 MiB limit", []string{"--max-capture-bytes", strconv.Itoa(16 << 20)}, 16 << 20, 96 << 10},
	}
	if raceOn {
		// Race-instrumented, the proxy passes a few MB/s: a 64 MiB line against an 8 MiB limit.
		lineBytes = 64 << 20
		cases = cases[1:]
		cases[0].name, cases[0].args, cases[0].kept = "8 MiB limit", []string{"--max-capture-bytes", strconv.Itoa(8 << 20)}, 8<<20
		cases[0].maxGrowth = 160 << 10 // the race detector's shadow memory roughly doubles the heap
	}
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	h := sha256.New()
	h.Write([]byte("data: "))
	for range lineBytes / len(chunk) {
		h.Write(chunk)
	}
	h.Write([]byte("\n\ndata: [DONE]\n\n"))
	var want [32]byte
	copy(want[:], h.Sum(nil))
	up := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		sseHeaders(w)
		w.Write([]byte("data: "))
		for range lineBytes / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		w.Write([]byte("\n\ndata: [DONE]\n\n"))
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "capture")
			p := startProxy(t, up.URL, dir, tc.args)
			idle := procHWMKiB(t, p.cmd.Process.Pid)

			status, sum, n := passThrough(t, p.url+"/ng-rollout/longline/v1/chat/completions", chatRequest("longline", true))
			if status != http.StatusOK || sum != want {
				t.Fatalf("client got status %d, %d bytes, body as sent: %v", status, n, sum == want)
			}
			peak := procHWMKiB(t, p.cmd.Process.Pid)
			p.stop()

			store := openStore(t, capture.Open, dir)
			x := capturetest.Lines(t, store, "longline")
			if len(x) != 1 || str(x[0].ErrorCategory) != "capture_too_large" || x[0].ResponseRaw == nil || len(*x[0].ResponseRaw) != tc.kept {
				t.Fatalf("line: %d exchanges, category %s, response_raw %d bytes, want %d", len(x), str(x[0].ErrorCategory),
					len(deref(x[0].ResponseRaw)), tc.kept)
			}
			if growth := peak - idle; growth > tc.maxGrowth {
				t.Fatalf("proxy grew by %d MiB for one %d MiB line (idle %d KiB, peak %d KiB)", growth>>10, lineBytes>>20, idle, peak)
			}
			t.Logf("proxy RSS idle %d MiB, peak %d MiB", idle>>10, peak>>10)
		})
	}
}
