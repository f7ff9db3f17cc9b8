//go:build unix

package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// A symlink planted where a capture file, marker, claim slot dir or claims dir belongs is never
// followed: nothing outside the capture dir is written, created or removed, the call is still
// answered, and the refusal is logged (naming the rollout) and counted.
func TestSymlinksNeverFollowed(t *testing.T) {
	up := capturetest.NewServer(t, echoHandler)

	t.Run("capture file", func(t *testing.T) {
		g := startGateway(t, up.URL, nil)
		outside := t.TempDir()
		target := filepath.Join(outside, "notes.txt")
		capturetest.WriteFile(t, target, []byte("not a capture\n"), 0o600)
		const id = "sym-capture"
		p, _ := g.store.CapturePath(id)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		faultCalls(t, g.client, g.srv.URL, id, 2, 100)
		g.drain()
		if b, _ := os.ReadFile(target); string(b) != "not a capture\n" {
			t.Errorf("the symlink's target was written: %q", b)
		}
		if n := metric(t, g.client, g.srv.URL, gateway.MetricCaptureWrites, "result=failed"); n != 2 {
			t.Errorf("failed writes %v, want 2", n)
		}
		if !hasMarker(t, g.store, id) {
			t.Error("no incomplete marker")
		}
		logNames(t, g.logs.String(), "symlink", id)
		if n := g.store.SymlinksRefused(); n < 2 {
			t.Errorf("symlinks refused %d, want >= 2", n)
		}
	})

	t.Run("capture file and marker", func(t *testing.T) {
		g := startGateway(t, up.URL, nil)
		outside := t.TempDir()
		const id = "sym-both"
		p, _ := g.store.CapturePath(id)
		m, _ := g.store.MarkerPath(id)
		os.Symlink(filepath.Join(outside, "a"), p)
		os.Symlink(filepath.Join(outside, "b"), m) // dangling: O_CREAT through it would create b
		faultCalls(t, g.client, g.srv.URL, id, 1, 100)
		g.drain()
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Errorf("files created through the symlinks: %v", ents)
		}
		if n := metric(t, g.client, g.srv.URL, gateway.MetricCaptureWrites, "result=lost"); n != 1 {
			t.Errorf("lost writes %v, want 1", n)
		}
		logNames(t, g.logs.String(), "incomplete marker failed too", id)
	})

	t.Run("claim slot dir", func(t *testing.T) {
		g := startGateway(t, up.URL, nil)
		outside := t.TempDir()
		if err := os.Symlink(outside, filepath.Join(g.dir, capture.ClaimSlotsDir)); err != nil {
			t.Fatal(err)
		}
		const id = "sym-slots"
		faultCalls(t, g.client, g.srv.URL, id, 2, 100)
		g.drain()
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Errorf("claim files created through the symlinked slot dir: %v", ents)
		}
		if n := metric(t, g.client, g.srv.URL, gateway.MetricClaimFailures); n != 2 {
			t.Errorf("claim failures %v, want 2", n)
		}
		if n := len(capturetest.Lines(t, g.store, id)); n != 2 {
			t.Errorf("%d lines, want 2: the calls are captured without a claim", n)
		}
	})

	t.Run("per-call claims dir", func(t *testing.T) {
		// A symlinked <id>.capture.claims/ pointing at a dir with a stray file used to read as a
		// live claim forever (pid 1 is always alive), holding every merge for its timeout.
		dir := t.TempDir()
		store, _ := capture.Open(dir)
		outside := t.TempDir()
		host, _ := os.Hostname()
		body, _ := json.Marshal(capture.ClaimInfo{PID: 1, Host: host, StartedAt: 1})
		os.WriteFile(filepath.Join(outside, "stray"), body, 0o600)
		const id = "sym-claims"
		cl, _ := store.ClaimsPath(id)
		if err := os.Symlink(outside, cl); err != nil {
			t.Fatal(err)
		}
		if c, err := store.Claims(id); err != nil || c != (capture.ClaimCount{}) {
			t.Errorf("claims through a symlinked claims dir: %+v %v; want none", c, err)
		}
		if quiet, err := modelcalls.AwaitQuiescence(context.Background(), id, []string{dir}, 0, 0); !quiet || err != nil {
			t.Errorf("quiescence %v %v", quiet, err)
		}
		// clear removes the link itself, never what it points at.
		if err := store.Clear(id); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(cl); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("symlinked claims dir not removed: %v", err)
		}
		if _, err := os.Stat(filepath.Join(outside, "stray")); err != nil {
			t.Errorf("clear removed a file through the symlink: %v", err)
		}
	})

	t.Run("clear", func(t *testing.T) {
		dir := t.TempDir()
		store, _ := capture.Open(dir)
		outside := t.TempDir()
		const id = "sym-clear"
		var targets []string
		for _, suffix := range []string{capture.CaptureSuffix, capture.MarkerSuffix} {
			target := filepath.Join(outside, strings.TrimPrefix(suffix, "."))
			os.WriteFile(target, []byte("keep\n"), 0o600)
			targets = append(targets, target)
			if err := os.Symlink(target, filepath.Join(dir, id+suffix)); err != nil {
				t.Fatal(err)
			}
		}
		rec := `{"_ng_rollout_id":"` + id + `"}` + "\n"
		if code, out, errOut := runCLIClear(rec, "--capture-dir", dir); code != 0 {
			t.Fatalf("clear: exit %d %q %q", code, out, errOut)
		}
		for _, target := range targets {
			if b, err := os.ReadFile(target); err != nil || string(b) != "keep\n" {
				t.Errorf("clear changed %s through a symlink: %q %v", target, b, err)
			}
		}
		if has, m, _ := store.Stat(id); has || m {
			t.Errorf("symlinks left in the capture dir: capture %v marker %v", has, m)
		}
	})
}
