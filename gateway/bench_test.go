package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// bigStream serves a chat-completions SSE stream of about size bytes, built on the fly from one
// repeated event, written (and flushed) in 16 KiB batches, ending with [DONE].
func bigStream(size int64, event []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		batch := bytes.Repeat(event, max(1, (16<<10)/len(event)))
		rc := http.NewResponseController(w)
		for sent := int64(0); sent < size; sent += int64(len(batch)) {
			if _, err := w.Write(batch); err != nil {
				return
			}
			rc.Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}
}

// peakSampler tracks the largest heap in use while running.
type peakSampler struct {
	stop chan struct{}
	done chan struct{}
	base uint64
	peak uint64
}

func startPeakSampler() *peakSampler {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p := &peakSampler{stop: make(chan struct{}), done: make(chan struct{}), base: ms.HeapAlloc, peak: ms.HeapAlloc}
	go func() {
		defer close(p.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				runtime.ReadMemStats(&ms)
				p.peak = max(p.peak, ms.HeapAlloc)
			}
		}
	}()
	return p
}

// growthMiB stops sampling and returns the peak heap growth over the baseline, in MiB.
func (p *peakSampler) growthMiB() float64 {
	close(p.stop)
	<-p.done
	return float64(p.peak-p.base) / (1 << 20)
}

// procStatusKB reads a "Name:  N kB" field of /proc/self/status (0 when unavailable).
func procStatusKB(name string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+":") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				n, _ := strconv.ParseFloat(f[1], 64)
				return n
			}
		}
	}
	return 0
}

// Benchmark100MiBStream sends a 100 MiB SSE stream through the gateway and reports how much the
// heap (sampled every 5 ms) and the resident set grew. "flat" events add nothing to the stream
// reassembly (the gateway's own buffering is what is measured); "content" events each carry a text
// delta, so the reassembled message (which the capture line stores) grows with the stream.
func Benchmark100MiBStream(b *testing.B) {
	const size = 100 << 20
	for _, bc := range []struct {
		name  string
		event string
	}{
		{"flat", `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":null}]}` + "\n\n"},
		{"content", `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"lorem ipsum dolor sit amet, "},"finish_reason":null}]}` + "\n\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := newEnv(b, bigStream(size, []byte(bc.event)), func(h *gateway.Handler) {
				h.SpoolDir = b.TempDir()
				h.MaxCaptureBytes = 256 << 20 // recorded whole, above the 64 MiB default
			})
			client := rawClient()
			var peakHeap, rssGrowth float64
			b.SetBytes(size)
			b.ResetTimer()
			for i := range b.N {
				id := "big-" + strconv.Itoa(i)
				// Return freed memory to the OS and reset the kernel's peak-RSS mark (Linux), so
				// VmHWM reports this run's peak over a lean baseline.
				debug.FreeOSMemory()
				os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
				rssBase := procStatusKB("VmRSS")
				ps := startPeakSampler()
				resp, err := client.Post(e.url(id, "/v1/chat/completions"), "application/json", strings.NewReader(`{"stream":true}`))
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n < size {
					b.Fatalf("read %d bytes, %v", n, err)
				}
				peakHeap = max(peakHeap, ps.growthMiB())
				if hwm := procStatusKB("VmHWM"); hwm > 0 {
					rssGrowth = max(rssGrowth, (hwm-rssBase)/1024)
				}
				b.StopTimer()
				if l := e.one(id); l.ErrorCategory != nil || l.ResponseRaw == nil || int64(len(*l.ResponseRaw)) != n {
					b.Fatalf("line: category %s, raw present %v, want %d bytes", l.Category(), l.ResponseRaw != nil, n)
				}
				e.store.Clear(id)
				b.StartTimer()
			}
			b.ReportMetric(peakHeap, "peak-heap-growth-MiB")
			b.ReportMetric(rssGrowth, "peak-rss-growth-MiB")
		})
	}
}

// Benchmark100MiBStreamBare is the same 100 MiB stream through a bare httputil.ReverseProxy: the
// throughput baseline for Benchmark100MiBStream.
func Benchmark100MiBStreamBare(b *testing.B) {
	const size = 100 << 20
	event := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"lorem ipsum dolor sit amet, "},"finish_reason":null}]}` + "\n\n"
	up := capturetest.NewUpstream(b, bigStream(size, []byte(event)))
	bare := bareProxy(b, up)
	client := rawClient()
	b.SetBytes(size)
	for range b.N {
		resp, err := client.Post(bare.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{}`))
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, resp.Body); err != nil || n < size {
			b.Fatalf("read %d bytes, %v", n, err)
		}
		resp.Body.Close()
	}
}

// bareProxy is a bare httputil.ReverseProxy in front of up, flushing every write: the baseline the
// gateway's benchmarks compare with.
func bareProxy(b *testing.B, up *capturetest.Upstream) *httptest.Server {
	upURL, _ := url.Parse(up.URL)
	bare := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(upURL) },
		FlushInterval: -1,
	})
	b.Cleanup(bare.Close)
	return bare
}

// gatewayAndBare starts an upstream that answers every call with body (200, JSON), a gateway in
// front of it that logs nowhere, and a bare proxy in front of it.
func gatewayAndBare(b *testing.B, body []byte) (*env, *httptest.Server) {
	up := capturetest.NewUpstream(b, capturetest.Replay(200, "application/json", body))
	return newEnvFor(b, up, func(h *gateway.Handler) { h.Logger = capturetest.Logger(io.Discard) }), bareProxy(b, up)
}

// BenchmarkPerCall compares one small JSON call through the capturing gateway (which includes the
// capture line's append and fsync) with the same call through a bare httputil.ReverseProxy, and
// through the gateway uncaptured (no prefix).
func BenchmarkPerCall(b *testing.B) {
	body := fixture(b, "openai_chat/json_text_usage_details.json")
	e, bare := gatewayAndBare(b, body)
	for _, bc := range []struct{ name, url string }{
		{"bare-reverseproxy", bare.URL + "/v1/chat/completions"},
		{"gateway-uncaptured", e.url("", "/v1/chat/completions")},
		{"gateway-captured", e.url("bench-1", "/v1/chat/completions")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				resp, err := client.Post(bc.url, "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if n != int64(len(body)) {
					b.Fatalf("read %d bytes", n)
				}
			}
		})
	}
}

// BenchmarkPerCallParallel is BenchmarkPerCall with 64 concurrent clients (32 per GOMAXPROCS on 2
// cores), each on its own rollout, with the request and response sizes of `make bench`'s row 2 (a
// real agent's 5.5 KB Responses request, a recorded 2 KB response): the CPU profile of row 2.
func BenchmarkPerCallParallel(b *testing.B) {
	body := fixture(b, "openai_responses/json_reasoning_text_function_call_cached.json")
	req := capturetest.ReadFile(b, "../test/bench/testdata/request_responses.json")
	e, bare := gatewayAndBare(b, body)
	for _, bc := range []struct {
		name string
		url  func(w int) string
	}{
		{"bare-reverseproxy", func(int) string { return bare.URL + "/v1/responses" }},
		{"gateway-captured", func(w int) string { return e.url("par-"+strconv.Itoa(w), "/v1/responses") }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
			defer client.CloseIdleConnections()
			var next atomic.Int64
			b.SetParallelism(64 / runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				u := bc.url(int(next.Add(1)))
				buf := make([]byte, 32<<10)
				for pb.Next() {
					resp, err := client.Post(u, "application/json", bytes.NewReader(req))
					if err != nil {
						b.Error(err)
						return
					}
					n, _ := io.CopyBuffer(io.Discard, resp.Body, buf)
					resp.Body.Close()
					if n != int64(len(body)) {
						b.Errorf("read %d bytes", n)
						return
					}
				}
			})
		})
	}
}
