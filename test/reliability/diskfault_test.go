//go:build unix

package reliability

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/rollout"
)

// Item 4: disk full and write errors. Calls go on unchanged, the rollout gets its incomplete marker
// when the marker can be written, /metrics counts every failed write (failed: marker written; lost:
// marker failed too), and the log names the rollout. Lines written before the fault stay readable,
// and a torn line left by a write cut short by the fault damages only itself.

// faultCalls makes n calls (alternating JSON and streams, pad bytes each) for rollout id through the
// gateway at base and fails unless every one was answered exactly as the upstream answered.
func faultCalls(t *testing.T, client *http.Client, base, id string, n, pad int) {
	t.Helper()
	for i := range n {
		if _, err := echoCall(t, client, base, id, fmt.Sprintf("%s-%d", id, i), i%2 == 1, pad); err != nil {
			t.Fatal(err)
		}
	}
}

// logNames fails unless a log record mentions both what and rollout id.
func logNames(t *testing.T, logs, what, id string) {
	t.Helper()
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, what) && strings.Contains(line, "rollout_id="+id) {
			return
		}
	}
	t.Errorf("no log record says %q for rollout_id=%s", what, id)
}

// hasMarker reports whether rollout id has its incomplete marker.
func hasMarker(t *testing.T, store *capture.Store, id string) bool {
	t.Helper()
	_, m, err := store.Stat(id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mergeGaps merges a record of rollout id over dir and returns its gap codes.
func mergeGaps(t *testing.T, dir, id string) map[string]string {
	t.Helper()
	m, err := modelcalls.NewMerger([]string{dir}, modelcalls.MergeOptions{DrainTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	return gapCodes(mergeOne(t, m, `{"_ng_rollout_id":"`+id+`"}`).Gaps)
}

// beforeFault starts a gateway over upstream and makes n calls of rollout id through it (100 pad
// bytes each), the lines written before the fault; it returns the gateway and id's capture file.
func beforeFault(t *testing.T, upstream, id string, n int) (*gw, string) {
	t.Helper()
	g := startGateway(t, upstream, nil)
	faultCalls(t, g.client, g.srv.URL, id, n, 100)
	p, err := g.store.CapturePath(id)
	if err != nil {
		t.Fatal(err)
	}
	return g, p
}

// displace moves path aside (to path+".saved") and lets create put the fault in its place (a
// directory where a file was, a file where a directory was). restore removes the fault and moves the
// original back; every step fails the test if it fails.
func displace(t *testing.T, path string, create func(path string) error) (restore func()) {
	t.Helper()
	if err := os.Rename(path, path+".saved"); err != nil {
		t.Fatal(err)
	}
	if err := create(path); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".saved", path); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWriteErrors(t *testing.T) {
	up := capturetest.NewServer(t, echoHandler)

	t.Run("/dev/full", func(t *testing.T) {
		if _, err := os.Stat("/dev/full"); err != nil {
			t.Skip("no /dev/full here")
		}
		const id, control = "devfull-0", "control-0"
		g, p := beforeFault(t, up.URL, id, 0)
		if err := os.Symlink("/dev/full", p); err != nil {
			t.Fatal(err)
		}
		faultCalls(t, g.client, g.srv.URL, id, 4, 100)
		faultCalls(t, g.client, g.srv.URL, control, 2, 100)
		g.drain()
		if n := metric(t, g.client, g.srv.URL, gateway.MetricCaptureWrites, "result=failed"); n != 4 {
			t.Errorf("failed writes %v, want 4", n)
		}
		if n := metric(t, g.client, g.srv.URL, gateway.MetricCaptureWrites, "result=ok"); n != 2 {
			t.Errorf("ok writes %v, want 2 (the control rollout)", n)
		}
		if !hasMarker(t, g.store, id) || hasMarker(t, g.store, control) {
			t.Error("the marker is missing, or set on the rollout whose writes worked")
		}
		logNames(t, g.logs.String(), "capture write failed", id)
		if len(capturetest.Lines(t, g.store, control)) != 2 {
			t.Error("the control rollout lost lines")
		}
		os.Remove(p) // reading /dev/full never ends
		if _, ok := mergeGaps(t, g.dir, id)[rollout.GapCaptureIncomplete]; !ok {
			t.Error("a merge does not report the rollout as incomplete")
		}
	})

	t.Run("capture file replaced by a directory", func(t *testing.T) {
		const id = "isdir-0"
		g, p := beforeFault(t, up.URL, id, 3)
		before := capturetest.ReadFile(t, p)
		restore := displace(t, p, func(p string) error { return os.Mkdir(p, 0o750) })
		faultCalls(t, g.client, g.srv.URL, id, 3, 100)
		g.drain()
		if n := metric(t, g.client, g.srv.URL, gateway.MetricCaptureWrites, "result=failed"); n != 3 {
			t.Errorf("failed writes %v, want 3", n)
		}
		if !hasMarker(t, g.store, id) {
			t.Error("no incomplete marker")
		}
		logNames(t, g.logs.String(), "capture write failed", id)
		// The lines written before the fault are all there once the file is back.
		restore()
		after, _ := os.ReadFile(p)
		if string(after) != string(before) || len(capturetest.Lines(t, g.store, id)) != 3 {
			t.Error("lines written before the fault changed")
		}
	})

	t.Run("capture dir gone: the marker fails too", func(t *testing.T) {
		const id = "nodir-0"
		g, _ := beforeFault(t, up.URL, id, 1)
		restore := displace(t, g.dir, func(p string) error { return os.WriteFile(p, []byte("not a directory"), 0o640) })
		faultCalls(t, g.client, g.srv.URL, id, 2, 100)
		g.drain()
		if n := metric(t, g.client, g.srv.URL, gateway.MetricCaptureWrites, "result=lost"); n != 2 {
			t.Errorf("lost writes %v, want 2", n)
		}
		if n := metric(t, g.client, g.srv.URL, gateway.MetricClaimFailures); n != 2 {
			t.Errorf("claim failures %v, want 2", n)
		}
		logNames(t, g.logs.String(), "incomplete marker failed too", id)
		restore()
		if len(capturetest.Lines(t, g.store, id)) != 1 {
			t.Error("the line written before the fault is gone")
		}
	})

	t.Run("read-only capture file", func(t *testing.T) {
		const id = "readonly-0"
		g, p := beforeFault(t, up.URL, id, 2)
		if err := os.Chmod(p, 0o440); err != nil {
			t.Fatal(err)
		}
		if f, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
			f.Close()
			t.Skip("running as root: file permissions do not stop writes (the other subtests fault without them)")
		}
		faultCalls(t, g.client, g.srv.URL, id, 2, 100)
		g.drain()
		if n := metric(t, g.client, g.srv.URL, gateway.MetricCaptureWrites, "result=failed"); n != 2 || !hasMarker(t, g.store, id) {
			t.Errorf("failed writes %v, marker %v; want 2 and the marker", n, hasMarker(t, g.store, id))
		}
		logNames(t, g.logs.String(), "capture write failed", id)
	})
}

// fullDiskCheck is what a filled-up capture dir must look like: every answered call either has an
// intact line or counted as a failed write, at most one torn line (the write the fault cut short),
// and the marker when anything failed. It returns the numbers of intact and damaged lines.
func fullDiskCheck(t *testing.T, store *capture.Store, id string, calls int, ok, failed float64) (int, int) {
	t.Helper()
	entries, damaged, err := store.ReadAvailable(id)
	if err != nil {
		t.Fatal(err)
	}
	if float64(len(entries)) != ok || ok+failed != float64(calls) {
		t.Errorf("%d calls: %d intact lines, metrics ok %v failed %v; want ok = lines and ok + failed = calls", calls, len(entries), ok, failed)
	}
	if failed == 0 {
		t.Error("the disk never filled up: the test injected no fault")
	}
	if len(damaged) > 1 {
		t.Errorf("%d damaged lines, want at most the one torn by the fault", len(damaged))
	}
	if !hasMarker(t, store, id) {
		t.Error("no incomplete marker after failed writes")
	}
	return len(entries), len(damaged)
}

// TestDiskFullFileSizeLimit runs the real proxy command in a process whose file size limit is
// 64 KiB (RLIMIT_FSIZE): appends past it fail with EFBIG after a partial write, as on a full disk,
// with no privileges needed. Afterwards an append without the limit repairs the torn tail.
func TestDiskFullFileSizeLimit(t *testing.T) {
	up := capturetest.NewServer(t, echoHandler)
	dir := filepath.Join(t.TempDir(), "capture")
	p := startProxy(t, up.URL, dir, []string{"--admin-listen", "127.0.0.1:0"}, "MR_FSIZE=65536")
	client := secretsClient(t)
	const id, calls = "fsize-0", 40
	faultCalls(t, client, p.url, id, calls, 4000)
	ok := metric(t, client, p.admin, gateway.MetricCaptureWrites, "result=ok")
	failed := metric(t, client, p.admin, gateway.MetricCaptureWrites, "result=failed")
	p.stop()
	logs := p.stderr.String()
	logNames(t, logs, "capture write failed", id)
	assertNoSecretsIn(t, dir, logs)
	assertNoClaimsIn(t, dir)
	store, _ := capture.Open(dir)
	intact, torn := fullDiskCheck(t, store, id, calls, ok, failed)
	if err := store.Append(id, []byte(`{"model_call_id":"after-the-fault","dialect":"chat"}`)); err != nil {
		t.Fatal(err)
	}
	entries, damaged, _ := store.ReadAvailable(id)
	if len(entries) != intact+1 || len(damaged) != torn || string(entries[len(entries)-1].Data) != `{"model_call_id":"after-the-fault","dialect":"chat"}` {
		t.Errorf("after the fault: %d intact lines, %d damaged; want %d and %d, the new line last", len(entries), len(damaged), intact+1, torn)
	}
	t.Logf("%d calls answered; %d lines intact, %d torn, %v writes failed (EFBIG), marker written", calls, intact, torn, failed)
}
