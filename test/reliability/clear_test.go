//go:build unix

package reliability

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/internal/cli"
)

// `clear` while a call of the rollout is in flight in a gateway process: clear waits for the live
// claim and, when it is still live at the end, leaves the rollout alone and exits 1; with --force it
// clears and says where the call's line will go. The old call's line then lands in
// <id>.capture.orphaned.jsonl, never in the retry's fresh capture, and is not lost.
func TestClearDuringLiveCall(t *testing.T) {
	p := startHeldProxy(t, 1)
	released := false
	defer func() {
		if !released {
			close(p.release)
		}
	}()
	dir, client := p.dir, p.client
	const id = "cleared-0"
	if _, err := echoCall(t, client, p.url, id, "attempt1-done", false, 10); err != nil {
		t.Fatal(err)
	}
	errs := p.hold(t, id, 1) // nonce held-0, in flight until released
	store := openStore(t, capture.OpenExisting, dir)
	awaitClaims(t, store, id, 1)
	rec := `{"_ng_rollout_id":"` + id + `"}` + "\n"

	code, out, errOut := runCLIClear(rec, "--capture-dir", dir, "--wait", "100ms")
	if code != cli.ExitFailure || !strings.Contains(errOut, "rollout "+id+": not cleared: 1 capture writes still in flight") {
		t.Fatalf("clear with a call in flight: exit %d, stdout %q, stderr %q; want exit 1 and the rollout named", code, out, errOut)
	}
	if n := len(capturetest.Lines(t, store, id)); n != 1 {
		t.Fatalf("clear without --force touched the capture: %d lines, want 1", n)
	}

	code, out, errOut = runCLIClear(rec, "--capture-dir", dir, "--force", "--wait", "0")
	orphan, _ := store.OrphanPath(id)
	if code != cli.ExitOK || !strings.Contains(errOut, orphan) || out != "cleared 1 rollout (1 listed, 0 had nothing to clear)\n" {
		t.Fatalf("clear --force: exit %d, stdout %q, stderr %q; want exit 0 and the orphan file named", code, out, errOut)
	}
	if c, err := store.Claims(id); err != nil || c.Live != 0 || c.Cleared != 1 {
		t.Fatalf("claims after the forced clear: %+v %v; want the in-flight call counted as cleared, not live", c, err)
	}
	// The retry's merge does not wait for the earlier attempt's call.
	if quiet, err := modelcalls.AwaitQuiescence(context.Background(), id, []string{dir}, 0, 0); err != nil || !quiet {
		t.Fatalf("quiescence after the forced clear: %v %v", quiet, err)
	}

	// The retry runs while the earlier attempt's call is still in flight; then that call finishes.
	if _, err := echoCall(t, client, p.url, id, "attempt2-a", false, 10); err != nil {
		t.Fatal(err)
	}
	close(p.release)
	released = true
	if err := <-errs; err != nil {
		t.Fatalf("the call in flight during clear was not answered: %v", err)
	}
	if _, err := echoCall(t, client, p.url, id, "attempt2-b", true, 10); err != nil {
		t.Fatal(err)
	}
	p.stop()

	var nonces []string
	for _, ex := range capturetest.Lines(t, store, id) {
		nonces = append(nonces, nonceOf(ex.Request))
	}
	if strings.Join(nonces, ",") != "attempt2-a,attempt2-b" {
		t.Errorf("the retry's capture holds %v; want only attempt2-a,attempt2-b", nonces)
	}
	b, err := os.ReadFile(orphan)
	if err != nil || bytes.Count(b, []byte("\n")) != 1 || !bytes.Contains(b, []byte("held-0")) {
		t.Errorf("orphan file %q (%v); want the one line of the call that was in flight", b, err)
	}
	if _, m, _ := store.Stat(id); m {
		t.Error("the retry's capture is marked incomplete")
	}
	assertNoClaimsIn(t, dir)
}

// runCLIClear runs `modelcalls clear` through the command line's entry point with stdin in.
func runCLIClear(in string, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = cli.Main(append([]string{"clear"}, args...), strings.NewReader(in), &out, &errOut)
	return code, out.String(), errOut.String()
}

// nonceOf finds the echo nonce in a captured request ("" when none).
func nonceOf(req []byte) string {
	for _, n := range []string{"attempt1-done", "attempt2-a", "attempt2-b", "held-0"} {
		if bytes.Contains(req, []byte(`"`+n+`"`)) || bytes.Contains(req, []byte(n)) {
			return n
		}
	}
	return fmt.Sprintf("unknown(%.60s)", req)
}

// Every rollout used to leave an empty <id>.capture.claims/ directory behind. Claims now live in
// one slot file per gateway process, which the gateway removes when it drains; the capture dir keeps
// only the (empty) slot directory, one per capture dir.
func TestNoClaimsLeftBehind(t *testing.T) {
	up := capturetest.NewServer(t, echoHandler)
	dir := filepath.Join(t.TempDir(), "capture")
	p := startProxy(t, up.URL, dir, nil)
	client := secretsClient(t)
	for r := range 5 {
		faultCalls(t, client, p.url, fmt.Sprintf("left-%d", r), 3, 10)
	}
	p.stop()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.Name() == capture.ClaimSlotsDir {
			if slots, _ := os.ReadDir(filepath.Join(dir, e.Name())); len(slots) != 0 {
				t.Errorf("claim slot files left after a clean drain: %v", slots)
			}
			continue
		}
		names = append(names, e.Name())
	}
	for _, n := range names {
		if !strings.HasSuffix(n, capture.CaptureSuffix) {
			t.Errorf("left in the capture dir after a clean drain: %s (all: %v)", n, names)
		}
	}
	if len(names) != 5 {
		t.Errorf("capture dir holds %v; want the 5 capture files only", names)
	}
}
