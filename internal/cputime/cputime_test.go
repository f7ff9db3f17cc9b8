package cputime

import (
	"crypto/sha256"
	"testing"
)

// TestProcessGrows: the CPU time read is positive and grows while the process computes (bounded:
// a few hundred milliseconds of hashing at most, far above the clock's tick on every system).
func TestProcessGrows(t *testing.T) {
	start := Process()
	if start <= 0 {
		t.Fatalf("Process() = %v at start, want > 0", start)
	}
	buf := make([]byte, 1<<20)
	for range 2000 {
		sum := sha256.Sum256(buf)
		buf[0] = sum[0]
		if Process() > start {
			return
		}
	}
	t.Fatalf("Process() stayed %v over 2 GB of hashing", start)
}
