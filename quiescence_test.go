package modelcalls

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
)

func TestAwaitQuiescence(t *testing.T) {
	dir := t.TempDir()
	s := capturefile.OpenStore(t, dir)
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "missing")

	if quiet, err := AwaitQuiescence(ctx, "r", []string{missing, dir}, time.Hour, 0); !quiet || err != nil {
		t.Fatalf("no claims: %v %v", quiet, err)
	}
	writeStaleClaim(t, s, "r")
	if quiet, err := AwaitQuiescence(ctx, "r", []string{dir}, time.Hour, 0); !quiet || err != nil {
		t.Fatalf("a stale claim held the wait: %v %v", quiet, err)
	}

	claim := capturefile.ClaimCall(t, s, "r", "live")
	if quiet, err := AwaitQuiescence(ctx, "r", []string{dir}, 10*time.Millisecond, time.Millisecond); quiet || err != nil {
		t.Fatalf("timeout: %v %v, want false", quiet, err)
	}
	if quiet, err := AwaitQuiescence(ctx, "r", []string{dir}, 0, 0); quiet || err != nil {
		t.Fatalf("zero timeout checks once: %v %v", quiet, err)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if quiet, err := AwaitQuiescence(cctx, "r", []string{dir}, time.Hour, time.Millisecond); quiet || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v %v", quiet, err)
	}

	done := make(chan bool, 1)
	go func() {
		quiet, err := AwaitQuiescence(ctx, "r", []string{dir}, time.Minute, time.Millisecond)
		if err != nil {
			t.Error(err)
		}
		done <- quiet
	}()
	if err := claim.Release(); err != nil {
		t.Fatal(err)
	}
	if !<-done {
		t.Error("wait did not end when the claim was released")
	}

	if _, err := AwaitQuiescence(ctx, "../bad", []string{dir}, 0, 0); err == nil {
		t.Error("invalid id accepted")
	}
}
