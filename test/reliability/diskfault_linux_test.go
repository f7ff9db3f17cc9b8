package reliability

// The disk-fault tests that mount file systems (a small tmpfs, a read-only bind mount): Linux only.

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestDiskFullTmpfs fills a 64 KiB tmpfs mounted as the capture dir (only where mounting works:
// root with CAP_SYS_ADMIN, otherwise skipped), then grows it and checks the next append is whole.
func TestDiskFullTmpfs(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(mnt, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64k,mode=0750"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v); TestDiskFullFileSizeLimit covers a full disk without privileges", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			unix.Unmount(mnt, unix.MNT_DETACH)
		}
	})
	up := capturetest.NewServer(t, echoHandler)
	g := startGateway(t, up.URL, func(h *gateway.Handler) {
		s, err := capture.Open(mnt)
		if err != nil {
			t.Fatal(err)
		}
		h.Store = s
	})
	g.store, g.dir = g.h.Store, mnt
	const id, calls = "tmpfs-0", 40
	faultCalls(t, g.client, g.srv.URL, id, calls, 4000)
	g.drain()
	ok := metric(t, g.client, g.srv.URL, gateway.MetricCaptureWrites, "result=ok")
	failed := metric(t, g.client, g.srv.URL, gateway.MetricCaptureWrites, "result=failed")
	logNames(t, g.logs.String(), "capture write failed", id)
	intact, torn := fullDiskCheck(t, g.store, id, calls, ok, failed)

	// Room again: the next append repairs the torn tail and reads back whole.
	if err := unix.Mount("tmpfs", mnt, "tmpfs", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, "size=1m"); err != nil {
		t.Fatalf("grow the tmpfs: %v", err)
	}
	if err := g.store.Append(id, []byte(`{"model_call_id":"after-the-fault","dialect":"chat"}`)); err != nil {
		t.Fatal(err)
	}
	entries, damaged, _ := g.store.ReadAvailable(id)
	if len(entries) != intact+1 || len(damaged) != torn {
		t.Errorf("after the fault: %d intact lines, %d damaged; want %d and %d", len(entries), len(damaged), intact+1, torn)
	}
	t.Logf("%d calls answered; %d lines intact, %d torn, %v writes failed (ENOSPC), marker written", calls, intact, torn, failed)
}

// TestReadOnlyCaptureDir makes the capture dir read-only mid-run with a read-only bind mount over it
// (root only; file modes do not stop root, so chmod cannot do this), so both the append and the
// marker fail (EROFS): calls go on, every write counts as lost, the log names the rollout, and once
// the dir is writable again the next call lands after the lines from before.
func TestReadOnlyCaptureDir(t *testing.T) {
	up := capturetest.NewServer(t, echoHandler)
	const id = "rofs-0"
	g, _ := beforeFault(t, up.URL, id, 2)
	if err := unix.Mount(g.dir, g.dir, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount here (%v)", err)
	}
	mounted := true
	unmount := func() {
		if mounted {
			if err := unix.Unmount(g.dir, 0); err != nil {
				unix.Unmount(g.dir, unix.MNT_DETACH)
			}
			mounted = false
		}
	}
	t.Cleanup(unmount)
	if err := unix.Mount("", g.dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot remount read-only here (%v)", err)
	}
	faultCalls(t, g.client, g.srv.URL, id, 3, 100)
	lost := metric(t, g.client, g.srv.URL, gateway.MetricCaptureWrites, "result=lost")
	logNames(t, g.logs.String(), "incomplete marker failed too", id)
	unmount()
	faultCalls(t, g.client, g.srv.URL, id, 1, 100)
	g.drain()
	if lost != 3 {
		t.Errorf("lost writes %v, want 3", lost)
	}
	if n := len(capturetest.Lines(t, g.store, id)); n != 3 {
		t.Errorf("%d lines, want the 2 from before and the 1 after", n)
	}
}
