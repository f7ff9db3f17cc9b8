package modelcalls

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
	"github.com/modelcalls/modelcalls/rollout"
)

// As NeMo Gym's clear tests check it: clear removes file, marker (and claims) for the listed ids only, skips
// id-less rows, is a no-op without dirs, and propagates errors.
func TestClearCaptures(t *testing.T) {
	dir := t.TempDir()
	s := capturefile.OpenStore(t, dir)
	for _, id := range []string{"0-0", "0-1", "x-a1"} {
		capturefile.WriteCapture(t, dir, id, ok("c", 1)+"\n")
		if err := s.MarkIncomplete(id); err != nil {
			t.Fatal(err)
		}
	}
	capturefile.ClaimCall(t, s, "0-0", "stale-call")
	records := [][]byte{
		[]byte(`{"_ng_task_index": 0, "_ng_rollout_index": 0}`),
		[]byte(`{"prompt": "no id here"}`),
		[]byte(`{"_ng_rollout_id": "x", "_ng_attempt_index": 1}`),
	}
	if err := ClearCaptures(records, nil); err != nil {
		t.Fatalf("no dirs: %v", err)
	}
	if has, _, _ := s.Stat("0-0"); !has {
		t.Fatal("no-dirs clear removed a file")
	}
	if err := ClearCaptures(records, []string{dir}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"0-0": false, "x-a1": false, "0-1": true} {
		hasCapture, hasMarker, err := s.Stat(id)
		if err != nil || hasCapture != want || hasMarker != want {
			t.Errorf("%s: capture %v marker %v (%v), want %v", id, hasCapture, hasMarker, err, want)
		}
	}
	if c, err := s.Claims("0-0"); err != nil || c.Live+c.Stale != 0 {
		t.Errorf("claims left: %+v %v", c, err)
	}

	if err := ClearCaptures([][]byte{[]byte(`{"_ng_rollout_id": "a/b"}`)}, []string{dir}); !errors.Is(err, rollout.ErrInvalidID) {
		t.Errorf("invalid id: %v", err)
	}
	if err := ClearCaptures([][]byte{[]byte(`[1]`)}, []string{dir}); err == nil {
		t.Error("non-object record accepted")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ClearCaptures(records, []string{file}); err == nil {
		t.Error("a dir that is a file was accepted")
	}
	// A capture path that cannot be removed propagates.
	blocked := t.TempDir()
	if err := os.MkdirAll(filepath.Join(blocked, "0-0"+capture.CaptureSuffix, "child"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := ClearCaptures(records[:1], []string{blocked}); err == nil {
		t.Error("an unremovable capture path was accepted")
	}
}

func TestRolloutID(t *testing.T) {
	cases := []struct {
		in, id string
		ok     bool
		err    bool
	}{
		{`{"_ng_task_index": 3, "_ng_rollout_index": 1, "_ng_attempt_index": 2}`, "3-1-a2", true, false},
		{`{"_ng_rollout_id": "abc", "_ng_task_index": 3, "_ng_rollout_index": 1}`, "abc", true, false},
		{`{"other": 1}`, "", false, false},
		{`{"_ng_task_index": 3}`, "", false, false},
		{`{"_ng_rollout_id": ""}`, "", false, true},
		{`not json`, "", false, true},
	}
	for _, c := range cases {
		id, ok, err := RolloutID([]byte(c.in))
		if id != c.id || ok != c.ok || (err != nil) != c.err {
			t.Errorf("RolloutID(%s) = %q %v %v", c.in, id, ok, err)
		}
	}
}

// TestClearRollout: the clear of one rollout that ClearCaptures and `modelcalls clear` share waits
// for calls in flight, leaves the rollout alone when they outlast the wait (unless forced), and
// reports per store what it removed and which calls will go to the orphan file.
func TestClearRollout(t *testing.T) {
	cases := []struct {
		name        string
		capture     bool // the rollout has a capture file in the first store
		live        bool // a call of the rollout is in flight (a live claim in the first store)
		wait        time.Duration
		force       bool
		cleared     bool
		wantLive    int
		inFlight    int
		removed     bool
		fileRemains bool
	}{
		{name: "quiet", capture: true, cleared: true, removed: true},
		{name: "nothing to clear", cleared: true},
		{name: "in flight after the wait", capture: true, live: true, wait: 5 * time.Millisecond, wantLive: 1, fileRemains: true},
		{name: "in flight, look once", capture: true, live: true, wantLive: 1, fileRemains: true},
		{name: "forced after the wait", capture: true, live: true, wait: 5 * time.Millisecond, force: true, cleared: true, wantLive: 1, inFlight: 1, removed: true},
		{name: "forced without a wait", capture: true, live: true, force: true, cleared: true, inFlight: 1, removed: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dirs := []string{t.TempDir(), t.TempDir()}
			stores := []*capture.Store{capturefile.OpenStore(t, dirs[0]), capturefile.OpenStore(t, dirs[1])}
			if c.capture {
				capturefile.WriteCapture(t, dirs[0], "r", ok("c", 1)+"\n")
			}
			if c.live {
				claim := capturefile.ClaimCall(t, stores[0], "r", "in-flight")
				t.Cleanup(func() { claim.Release() })
			}
			got, err := ClearRollout(context.Background(), stores, "r", c.wait, c.force)
			if err != nil {
				t.Fatal(err)
			}
			if got.Cleared != c.cleared || got.Live != c.wantLive || got.Removed() != c.removed {
				t.Errorf("got %+v (removed %v), want cleared %v live %d removed %v", got, got.Removed(), c.cleared, c.wantLive, c.removed)
			}
			if c.cleared && (len(got.Reports) != 2 || got.Reports[0].InFlight != c.inFlight || got.Reports[1].InFlight != 0) {
				t.Errorf("reports %+v, want 2 with %d in flight in the first", got.Reports, c.inFlight)
			}
			if has, _, err := stores[0].Stat("r"); err != nil || has != c.fileRemains {
				t.Errorf("capture file present %v (%v), want %v", has, err, c.fileRemains)
			}
		})
	}

	// A cancelled wait is an error and removes nothing.
	dir := t.TempDir()
	s := capturefile.OpenStore(t, dir)
	capturefile.WriteCapture(t, dir, "r", ok("c", 1)+"\n")
	claim := capturefile.ClaimCall(t, s, "r", "in-flight")
	defer claim.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := ClearRollout(ctx, []*capture.Store{s}, "r", time.Hour, true); !errors.Is(err, context.Canceled) || got.Cleared {
		t.Errorf("cancelled: %+v %v", got, err)
	}
	if has, _, _ := s.Stat("r"); !has {
		t.Error("a cancelled clear removed the capture")
	}
}
