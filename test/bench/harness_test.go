package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/sse"
)

func TestPercentileNearestRank(t *testing.T) {
	ten := durations{}
	for i := 10; i >= 1; i-- {
		ten = append(ten, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		name string
		d    durations
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"p50 of 10", ten, 50, 5 * time.Millisecond},
		{"p90 of 10", ten, 90, 9 * time.Millisecond},
		{"p99 of 10", ten, 99, 10 * time.Millisecond},
		{"p100 of 10", ten, 100, 10 * time.Millisecond},
		{"tiny p of 10", ten, 0.1, time.Millisecond},
		{"single", durations{7}, 99, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.pct(tt.p); got != tt.want {
				t.Errorf("pct(%v) = %v, want %v", tt.p, got, tt.want)
			}
			if got := tt.d.pcts(tt.p)[0]; got != tt.want {
				t.Errorf("pcts(%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
	if ten[0] != 10*time.Millisecond {
		t.Error("pct sorted its receiver in place")
	}
}

func TestSplitEvents(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"two", "data: a\n\ndata: b\n\n", []string{"data: a\n\n", "data: b\n\n"}},
		{"unterminated last", "data: a\n\ndata: b\n", []string{"data: a\n\n", "data: b\n\n\n"}},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range splitEvents([]byte(tt.in)) {
				got = append(got, string(e))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("splitEvents(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestFixtureShapes checks that the generated stream is what the report says it is: 200 events that
// an SSE decoder sees as 200 events, ending in [DONE], and that the merge templates are non-empty.
func TestFixtureShapes(t *testing.T) {
	fx, err := loadFixtures()
	if err != nil {
		t.Fatal(err)
	}
	if len(fx.sseEvents) != streamEvents {
		t.Fatalf("stream has %d events, want %d", len(fx.sseEvents), streamEvents)
	}
	evs := sse.Parse(fx.sseBody())
	if len(evs) != streamEvents || evs[len(evs)-1].Data != "[DONE]" {
		t.Fatalf("decoder sees %d events, last %q", len(evs), evs[len(evs)-1].Data)
	}
	if n := len(fx.jsonResponse); n < 1500 || n > 3000 {
		t.Errorf("JSON body is %d bytes, want about 2 KiB", n)
	}
	for _, ev := range sse.Parse(bytes.Join(fx.contentMiddle, nil)) {
		if !json.Valid([]byte(ev.Data)) {
			t.Errorf("content delta is not JSON: %.80s", ev.Data)
		}
	}
	if len(fx.gymLines) < 40 {
		t.Errorf("only %d Gym capture lines", len(fx.gymLines))
	}
}

// TestUpstreamAndClient runs every client measurement once against the upstream directly.
func TestUpstreamAndClient(t *testing.T) {
	fx, up := fixturesAndUpstream(t)
	s := newSubject("direct", up.url, false)
	defer s.closeIdle()
	ctx := context.Background()
	t.Run("json", func(t *testing.T) {
		res, err := s.concurrent(ctx, fx, 4, 50*time.Millisecond, func(int) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		if res.calls == 0 || len(res.lat) != res.calls || res.elapsed < 50*time.Millisecond {
			t.Errorf("calls %d, samples %d, elapsed %v", res.calls, len(res.lat), res.elapsed)
		}
	})
	t.Run("paced stream", func(t *testing.T) {
		sr, err := s.stream(ctx, up, fx, "", 200*time.Microsecond)
		if err != nil {
			t.Fatal(err)
		}
		if len(sr.delivery) != streamEvents || len(sr.sendGaps) != streamEvents-1 || sr.ttft <= 0 {
			t.Fatalf("delivery %d, send gaps %d, ttft %v", len(sr.delivery), len(sr.sendGaps), sr.ttft)
		}
		if g := sr.sendGaps.pct(1); g < 200*time.Microsecond {
			t.Errorf("upstream wrote events %v apart, pace is 200µs", g)
		}
	})
	for _, shape := range []string{shapeRecorded, shapeContent} {
		t.Run("big stream "+shape, func(t *testing.T) {
			n, d, err := s.bigStream(ctx, fx, "", 1<<20, shape)
			if err != nil {
				t.Fatal(err)
			}
			if n < 1<<20-bigWriteSize || n > 1<<20+bigWriteSize || d <= 0 {
				t.Errorf("read %d bytes in %v", n, d)
			}
		})
	}
}

// TestHeldDetection feeds the stream through a proxy that holds every event until the next one
// arrives, and checks that the client sees them as held.
func TestHeldDetection(t *testing.T) {
	fx, up := fixturesAndUpstream(t)
	holder, err := serve(holdingProxy{target: up.url})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.close()
	s := newSubject("holder", holder.url, false)
	defer s.closeIdle()
	sr, err := s.stream(context.Background(), up, fx, "", 200*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	if sr.held < streamEvents/2 {
		t.Errorf("held %d of %d events, want most", sr.held, streamEvents-1)
	}
}

// holdingProxy forwards a stream but writes each chunk only when the next one arrived.
type holdingProxy struct{ target string }

func (h holdingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, h.target+r.URL.Path, r.Body)
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	var pending []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if pending != nil {
				w.Write(pending)
				w.(http.Flusher).Flush()
			}
			pending = bytes.Clone(buf[:n])
		}
		if err != nil {
			break
		}
	}
	w.Write(pending)
}

// fixturesAndUpstream loads the fixtures and starts the bench upstream on them, closed at cleanup.
func fixturesAndUpstream(t *testing.T) (*fixtures, *upstream) {
	t.Helper()
	fx, err := loadFixtures()
	if err != nil {
		t.Fatal(err)
	}
	up, err := startUpstream(fx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.close)
	return fx, up
}

// TestDurableProxy checks the durable floor subject: the client gets the recorded body (call checks
// status and length), and every call left exactly one line, request then response, in its
// rollout's file before the answer.
func TestDurableProxy(t *testing.T) {
	fx, up := fixturesAndUpstream(t)
	dir := t.TempDir()
	d, err := newDurableProxy(up.url, dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve(d)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	defer d.close()
	s := newSubject(sBareSync, srv.url, true)
	defer s.closeIdle()
	if _, err := s.sequential(context.Background(), fx, "floor-a", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.concurrent(context.Background(), fx, 4, 20*time.Millisecond, func(w int) string { return fmt.Sprintf("floor-%d", w) }); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "floor-a.lines"))
	if err != nil {
		t.Fatal(err)
	}
	want := string(fx.jsonRequest) + " " + string(fx.jsonResponse) + "\n"
	if got := string(b); got != strings.Repeat(want, 3) {
		t.Errorf("floor-a.lines holds %d bytes, want the 3 calls' lines (%d bytes)", len(got), 3*len(want))
	}
	files, _ := filepath.Glob(filepath.Join(dir, "floor-*.lines"))
	if len(files) != 5 {
		t.Errorf("%d rollout files, want 5: %v", len(files), files)
	}
}
