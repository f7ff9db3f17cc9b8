//go:build unix

package fsutil

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestProcessAlive(t *testing.T) {
	if !ProcessAlive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	if ProcessAlive(0) || ProcessAlive(-1) {
		t.Fatal("pid <= 0 is alive")
	}
	// A child that exited but is not reaped yet is a zombie: not alive.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skip("no `true` binary:", err)
	}
	pid := cmd.Process.Pid
	// Wait for it to exit (no event tells us; it is not reaped until cmd.Wait).
	for deadline := time.Now().Add(10 * time.Second); !isZombie(pid) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if ProcessAlive(pid) {
		t.Errorf("zombie %d counts as alive", pid)
	}
	cmd.Wait()
	if ProcessAlive(pid) {
		t.Errorf("reaped %d counts as alive", pid)
	}
}
