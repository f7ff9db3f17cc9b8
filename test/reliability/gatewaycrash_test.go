//go:build unix

package reliability

import (
	"fmt"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/rollout"
)

// A gateway process that stops while calls are in flight: SIGTERM drains them (each call is
// answered and its line lands before the process exits); SIGKILL loses the calls in flight, but not
// silently: their claims stay behind, and a merge reports the rollout incomplete with their count.

// heldUpstream answers with echoHandler, but holds requests that carry X-Hold until release is
// closed, announcing each on arrived.
func heldUpstream(t *testing.T, n int) (url string, arrived chan struct{}, release chan struct{}) {
	arrived, release = make(chan struct{}, n), make(chan struct{})
	up := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-t.Context().Done():
				return
			}
		}
		echoHandler(w, r)
	})
	return up.URL, arrived, release
}

// awaitArrived waits until n held calls reached the upstream.
func awaitArrived(t *testing.T, arrived <-chan struct{}, n int) {
	t.Helper()
	for range n {
		select {
		case <-arrived:
		case <-within():
			t.Fatal("held calls did not reach the upstream")
		}
	}
}

// heldCalls starts n calls through base for rollout id that the upstream holds, and returns a
// channel with each call's error (nil when it was answered exactly).
func heldCalls(t *testing.T, client *http.Client, base, id string, n int) chan error {
	errs := make(chan error, n)
	for i := range n {
		go func() {
			nonce := fmt.Sprintf("held-%d", i)
			req, _ := http.NewRequest(http.MethodPost, base+rollout.PathPrefix(id)+"/v1/chat/completions", bytesReader(echoRequest(nonce, i%2 == 0, 100)))
			req.Header.Set("X-Hold", "1")
			res, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer res.Body.Close()
			b, err := readAllString(res)
			if err == nil && (res.StatusCode != 200 || b != string(echoAnswer(nonce, i%2 == 0, 100))) {
				err = fmt.Errorf("held call %d: %d %.100q", i, res.StatusCode, b)
			}
			errs <- err
		}()
	}
	return errs
}

// heldProxy is a proxy process in front of heldUpstream, capturing into dir, with a client of its
// own that sends the secret headers.
type heldProxy struct {
	*proxyProc
	dir     string
	client  *http.Client
	arrived chan struct{}
	release chan struct{} // closing it lets the held calls through
}

// startHeldProxy starts a heldProxy whose upstream can hold n calls at once.
func startHeldProxy(t *testing.T, n int) *heldProxy {
	t.Helper()
	upURL, arrived, release := heldUpstream(t, n)
	dir := filepath.Join(t.TempDir(), "capture")
	p := startProxy(t, upURL, dir, nil)
	return &heldProxy{proxyProc: p, dir: dir, client: secretsClient(t), arrived: arrived, release: release}
}

// hold starts n calls for rollout id that the upstream holds (see heldCalls) and returns once
// all of them reached it.
func (p *heldProxy) hold(t *testing.T, id string, n int) chan error {
	t.Helper()
	errs := heldCalls(t, p.client, p.url, id, n)
	awaitArrived(t, p.arrived, n)
	return errs
}

func TestProxyDrainsOnSIGTERM(t *testing.T) {
	const n = 20
	p := startHeldProxy(t, n)
	const id = "drain-0"
	if _, err := echoCall(t, p.client, p.url, id, "before", false, 10); err != nil {
		t.Fatal(err)
	}
	errs := p.hold(t, id, n)
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.expect("draining")
	close(p.release)
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("a call in flight at SIGTERM: %v", err)
		}
	}
	if err := p.wait(); err != nil {
		t.Fatalf("proxy exit: %v\n%s", err, tail(p.stderr.String(), 2000))
	}
	store := openStore(t, capture.Open, p.dir)
	if xs := capturetest.Lines(t, store, id); len(xs) != n+1 {
		t.Fatalf("%d lines after the drain, want %d", len(xs), n+1)
	}
	assertNoClaimsIn(t, p.dir)
	assertNoSecretsIn(t, p.dir, p.stderr.String())
}

func TestProxyKilledWithCallsInFlight(t *testing.T) {
	const n = 7
	p := startHeldProxy(t, n)
	const id = "killed-0"
	for i := range 3 {
		if _, err := echoCall(t, p.client, p.url, id, fmt.Sprintf("before-%d", i), i == 1, 10); err != nil {
			t.Fatal(err)
		}
	}
	errs := p.hold(t, id, n)
	store := openStore(t, capture.Open, p.dir)
	awaitClaims(t, store, id, n)
	p.kill()
	for range n {
		if err := <-errs; err == nil {
			t.Error("a call in flight when the gateway died was answered")
		}
	}
	m, err := modelcalls.NewMerger([]string{p.dir}, modelcalls.MergeOptions{DrainTimeout: waitFor})
	if err != nil {
		t.Fatal(err)
	}
	a := mergeOne(t, m, `{"_ng_rollout_id":"killed-0"}`)
	g := gapCodes(a.Gaps)
	if len(a.Calls) != 3 || g[rollout.GapCaptureIncomplete] != fmt.Sprintf("stale_claims=%d", n) {
		t.Fatalf("merge after the crash: %d calls, gaps %+v; want 3 calls and incomplete stale_claims=%d", len(a.Calls), a.Gaps, n)
	}
}
