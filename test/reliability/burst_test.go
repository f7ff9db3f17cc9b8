//go:build unix

package reliability

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// Item 3: a burst of 12,500 captured calls offered in 10 s (1,250 calls/s) through the gateway on
// loopback, over 250 rollouts, 48 clients at a time. Every call is answered exactly, and exactly
// 12,500 lines are on disk, each once. (A peer gateway dropped 4% of its log rows under this load.)
// The offered rate is a schedule, not a pass mark: on a slow machine (or under -race) calls queue
// and the burst takes longer, and the test still demands every line.

func TestBurst(t *testing.T) {
	calls, window := 12500, 10*time.Second
	if testing.Short() {
		calls, window = 1250, time.Second
	}
	const rollouts, clients = 250, 48
	up := capturetest.NewServer(t, echoHandler)
	g := startGateway(t, up.URL, nil)
	g.ctr.MaxIdleConnsPerHost = clients
	g.utr.MaxIdleConnsPerHost = clients

	type answered struct {
		rollout, nonce string
	}
	var mu sync.Mutex
	got := make(map[string]answered, calls)
	latencies := make([]time.Duration, calls)
	var next atomic.Int64
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	interval := window / time.Duration(calls)
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= calls {
					return
				}
				// Offer call i at its slot of the schedule (or at once when behind it).
				time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
				id := fmt.Sprintf("burst-%03d", i%rollouts)
				nonce := fmt.Sprintf("b%05d", i)
				t0 := time.Now()
				mcid, err := echoCall(t, g.client, g.srv.URL, id, nonce, i%4 == 3, 300+i%700)
				latencies[i] = time.Since(t0)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				got[mcid] = answered{id, nonce}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	g.drain()
	if len(got) != calls {
		t.Fatalf("%d distinct model call ids for %d calls", len(got), calls)
	}

	lines := 0
	for r := range rollouts {
		id := fmt.Sprintf("burst-%03d", r)
		entries, err := g.store.Read(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			var x struct {
				ModelCallID string `json:"model_call_id"`
			}
			if err := json.Unmarshal(e.Data, &x); err != nil {
				t.Fatalf("%s line %d: %v", id, e.Line, err)
			}
			a, ok := got[x.ModelCallID]
			if !ok || a.rollout != id {
				t.Fatalf("%s line %d: model call %s is not a call made for this rollout, or appears twice", id, e.Line, x.ModelCallID)
			}
			delete(got, x.ModelCallID)
			lines++
		}
	}
	if lines != calls || len(got) != 0 {
		t.Fatalf("%d lines on disk for %d answered calls: %d lost", lines, calls, len(got))
	}
	slices.Sort(latencies)
	t.Logf("%d calls offered over %v, done in %v (%.0f calls/s), %d clients, %d rollouts: %d answered, %d lines, 0 lost; latency p50 %v p99 %v max %v",
		calls, window, elapsed.Round(time.Millisecond), float64(calls)/elapsed.Seconds(), clients, rollouts, calls, lines,
		latencies[calls/2].Round(time.Microsecond), latencies[calls*99/100].Round(time.Microsecond), latencies[calls-1].Round(time.Microsecond))
}
