//go:build unix

package reliability

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// Item 2: several gateway processes (the real proxy command) and writer goroutines append to one
// shared rollout and to many rollouts at once. Every call is answered exactly, and every line lands
// once, whole, in the rollout it belongs to: none lost, interleaved or duplicated. Some calls
// stream more than the 1 MiB spool threshold, so their lines go out in several writes under the
// lock, where interleaving would show.

// sentLine is what the test knows about a line it caused: its rollout and the nonce in its request.
type sentLine struct {
	rollout, nonce string
}

// concurrencyRollout spreads calls over one shared rollout (a third) and 37 others.
func concurrencyRollout(k int) string {
	if k%3 == 0 {
		return "shared"
	}
	return fmt.Sprintf("r-%02d", k%37)
}

func TestManyProcessesAppend(t *testing.T) {
	procs, perProc, writers, perWriter := 8, 500, 4, 250
	if testing.Short() {
		procs, perProc, writers, perWriter = 3, 60, 2, 40
	}
	const clientsPerProc = 4
	up := capturetest.NewServer(t, echoHandler)
	dir := filepath.Join(t.TempDir(), "capture")
	store := openStore(t, capture.Open, dir)
	proxies := make([]*proxyProc, procs)
	for i := range proxies {
		proxies[i] = startProxy(t, up.URL, dir, nil)
	}
	client := &http.Client{Transport: withSecrets{&http.Transport{MaxIdleConnsPerHost: clientsPerProc}}}
	defer client.CloseIdleConnections()

	var mu sync.Mutex
	want := map[string]sentLine{} // model_call_id -> what the line must say
	record := func(mcid string, l sentLine) error {
		mu.Lock()
		defer mu.Unlock()
		if _, dup := want[mcid]; dup {
			return fmt.Errorf("model call id %s announced twice", mcid)
		}
		want[mcid] = l
		return nil
	}
	errs := make(chan error, procs*clientsPerProc+writers)
	var wg sync.WaitGroup
	start := time.Now()
	var bigCalls int
	for p, px := range proxies {
		for c := range clientsPerProc {
			wg.Go(func() {
				for k := c; k < perProc; k += clientsPerProc {
					id := concurrencyRollout(k)
					nonce := fmt.Sprintf("p%d-k%d", p, k)
					pad, stream := 200+k%3000, k%2 == 1
					if k%100 == 37 {
						pad, stream = 1<<20+k, true // spooled: written in pieces under the lock
					}
					mcid, err := echoCall(t, client, px.url, id, nonce, stream, pad)
					if err == nil {
						err = record(mcid, sentLine{id, nonce})
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		for k := range perProc {
			if k%100 == 37 {
				bigCalls++
			}
		}
	}
	for w := range writers {
		wg.Go(func() {
			for k := range perWriter {
				id := concurrencyRollout(k * 7)
				mcid := capture.NewModelCallID()
				nonce := fmt.Sprintf("w%d-k%d", w, k)
				ex := okExchange(mcid, 1)
				ex.Request = json.RawMessage(fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":%q}]}`, nonce))
				if err := store.AppendExchange(id, ex); err != nil {
					errs <- err
					return
				}
				if err := record(mcid, sentLine{id, nonce}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var logs strings.Builder
	for _, px := range proxies {
		px.stop()
		logs.WriteString(px.stderr.String())
	}
	assertNoSecretsIn(t, dir, logs.String())

	ids, err := store.Rollouts()
	if err != nil {
		t.Fatal(err)
	}
	var lines int
	var bytesOnDisk int64
	for _, id := range ids {
		p, _ := store.CapturePath(id)
		if st, err := os.Stat(p); err == nil {
			bytesOnDisk += st.Size()
		}
		entries, err := store.Read(id) // strict: one damaged (interleaved, torn) line fails it
		if err != nil {
			t.Fatalf("rollout %s: %v", id, err)
		}
		for _, e := range entries {
			var x struct {
				ModelCallID string `json:"model_call_id"`
				Request     struct {
					Messages []struct {
						Content string `json:"content"`
					} `json:"messages"`
				} `json:"request"`
				ResponseRaw *string         `json:"response_raw"`
				Response    json.RawMessage `json:"response"`
			}
			if err := json.Unmarshal(e.Data, &x); err != nil {
				t.Fatalf("%s line %d: %v", id, e.Line, err)
			}
			w, ok := want[x.ModelCallID]
			if !ok {
				t.Fatalf("%s line %d: model call %s was never made, or appears twice", id, e.Line, x.ModelCallID)
			}
			delete(want, x.ModelCallID)
			if w.rollout != id || len(x.Request.Messages) != 1 || x.Request.Messages[0].Content != w.nonce {
				t.Fatalf("%s line %d: belongs to rollout %s with nonce %s", id, e.Line, w.rollout, w.nonce)
			}
			if strings.HasPrefix(w.nonce, "p") && !strings.Contains(str(x.ResponseRaw)+string(x.Response), w.nonce) {
				t.Fatalf("%s line %d: the response is not the answer to %s", id, e.Line, w.nonce)
			}
			lines++
		}
	}
	if len(want) != 0 {
		for mcid, w := range want {
			t.Errorf("lost: model call %s (rollout %s, nonce %s)", mcid, w.rollout, w.nonce)
			break
		}
		t.Fatalf("%d lines lost", len(want))
	}
	assertNoClaimsIn(t, dir)
	total := procs*perProc + writers*perWriter
	if lines != total {
		t.Fatalf("%d lines, want %d", lines, total)
	}
	t.Logf("%d proxy processes x %d calls (%d of them streams > 1 MiB) + %d writer goroutines x %d appends, in %v: %d lines in %d rollouts, %d bytes, 0 lost, 0 damaged",
		procs, perProc, bigCalls, writers, perWriter, elapsed.Round(time.Millisecond), lines, len(ids), bytesOnDisk)
}
