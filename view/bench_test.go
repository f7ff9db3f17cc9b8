package view_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/rollout"
	"github.com/modelcalls/modelcalls/view"
)

// writeLargeDir writes n rollouts of two Chat Completions calls each (a tool call, then the answer),
// as capture lines encoded by the store's encoder. The files are written directly, without the
// store's per-line fsync: the benchmark measures the viewer, not the writer.
func writeLargeDir(tb testing.TB, dir string, n int) {
	tb.Helper()
	t0 := float64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix())
	models := []string{"gpt-5-mini", "claude-sonnet-4-5", "qwen3-32b"}
	var buf []byte
	for i := range n {
		buf = buf[:0]
		for c := range 2 {
			start := t0 + float64(i)*0.01 + float64(c)
			lat := 200 + float64((i*7+c*13)%1800)
			ttft := lat / 4
			status := 200
			ex := &capture.Exchange{
				ModelCallID: fmt.Sprintf("%032x", i*2+c), Dialect: "chat",
				ModelRef:  &rollout.ModelServerRef{Type: rollout.ModelServerRefType, Name: "bench"},
				StartedAt: start, CompletedAt: start + lat/1000, LatencyMS: lat, LatencyTTFTMS: &ttft, StatusCode: &status,
				Request: json.RawMessage(`{"model":"` + models[i%3] + `","messages":[{"role":"user","content":"task ` + strconv.Itoa(i) + `"}]}`),
				Response: json.RawMessage(`{"id":"c` + strconv.Itoa(i) + `","model":"` + models[i%3] + `","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],` +
					`"usage":{"prompt_tokens":` + strconv.Itoa(100+i%900) + `,"completion_tokens":` + strconv.Itoa(10+i%90) + `,"total_tokens":1}}`),
			}
			line, err := capture.EncodeExchange(ex)
			if err != nil {
				tb.Fatal(err)
			}
			buf = append(append(buf, line...), '\n')
		}
		capturetest.WriteFile(tb, filepath.Join(dir, fmt.Sprintf("r%06d%s", i, capture.CaptureSuffix)), buf, 0o640)
	}
}

// BenchmarkRolloutListFirstPage measures, on a capture dir of 100,000 rollouts (override with
// MODELCALLS_VIEW_BENCH_ROLLOUTS), the time from starting the viewer to serving the rollout
// list's first page (the page, its script and /api/rollouts with 50 rows), and the time until the
// whole dir is indexed.
//
//	go test ./view/ -run '^$' -bench RolloutListFirstPage -benchtime 1x
func BenchmarkRolloutListFirstPage(b *testing.B) {
	n := 100000
	if v := os.Getenv("MODELCALLS_VIEW_BENCH_ROLLOUTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	genStart := time.Now()
	writeLargeDir(b, dir, n)
	b.Logf("wrote %d rollouts in %v", n, time.Since(genStart).Round(time.Millisecond))
	var first, full time.Duration
	for b.Loop() {
		start := time.Now()
		srv, ts, stop := serveViewer(b, view.Options{Dirs: []string{dir}})
		get := func(path string) []byte {
			resp, err := http.Get(ts.URL + path)
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
			}
			return body
		}
		get("/")
		get("/static/app.js")
		// Ask for the first page until it is full, waking on each index change.
		for {
			_, changed := srv.Index().Version()
			var page struct {
				Rows []json.RawMessage `json:"rows"`
			}
			if err := json.Unmarshal(get("/api/rollouts?sort=id&limit=50"), &page); err != nil {
				b.Fatal(err)
			}
			if len(page.Rows) == 50 {
				break
			}
			<-changed
		}
		first = time.Since(start)
		for {
			_, changed := srv.Index().Version()
			if srv.Index().Progress().Complete {
				break
			}
			<-changed
		}
		full = time.Since(start)
		stop()
	}
	b.ReportMetric(first.Seconds(), "s-first-page")
	b.ReportMetric(full.Seconds(), "s-full-index")
	b.ReportMetric(0, "ns/op")
}
