package capture

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/uring"
)

// portableEnv makes a test process of this package run the store with portableOnly set: the child
// processes that TestPortableFallbacks' tests start inherit it.
const portableEnv = "CAPTURE_TEST_PORTABLE"

func init() {
	if os.Getenv(portableEnv) == "1" {
		portableOnly = true
	}
}

// TestPortableFallbacks runs the store's tests on Linux with only what the store does on macOS
// (portableOnly): no statx mount ids, no RWF_DSYNC, no io_uring, a plain vectored write and then
// os.File.Sync. It first checks that those paths are the ones taken.
func TestPortableFallbacks(t *testing.T) {
	if portableOnly {
		t.Skip("this process runs portable already")
	}
	t.Setenv(portableEnv, "1")
	portableOnly = true
	defer func() { portableOnly = false }()

	t.Run("paths", func(t *testing.T) {
		s := newStore(t)
		if err := s.Append("p", []byte(`{"a":1}`)); err != nil {
			t.Fatal(err)
		}
		e := s.files.pinKept("p")
		if e == nil {
			t.Fatal("capture file not kept open")
		}
		defer s.files.release(e)
		if e.hasMnt {
			t.Error("file opened with a mount id")
		}
		n, dsynced, err := writeDsync(e.f, [][]byte{[]byte(`{"b":2}` + "\n")})
		if err != nil || n != 8 || dsynced {
			t.Errorf("writeDsync = %d, %v, %v; want 8 bytes, not dsynced", n, dsynced, err)
		}
		if err := fdatasync(e.f); err != nil {
			t.Fatal(err)
		}
		if size, ok, err := e.atPath(s.Dir()); err != nil || !ok || size != 16 {
			t.Errorf("atPath = %d, %v, %v; want 16, true", size, ok, err)
		}
	})
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"AppendRoundTrip", TestAppendRoundTrip},
		{"TornTailRepair", TestTornTailRepair},
		{"MarkerClearAndRollouts", TestMarkerClearAndRollouts},
		{"Claims", TestClaims},
		{"AppendFuncLargeLine", TestAppendFuncLargeLine},
		{"AppendFuncFailureLeavesOneDamagedLine", TestAppendFuncFailureLeavesOneDamagedLine},
		{"ConcurrentAppendGoroutines", TestConcurrentAppendGoroutines},
		{"MultiProcessAppend", TestMultiProcessAppend},
		{"CheckWritable", TestCheckWritable},
		{"ClaimsAcrossProcesses", TestClaimsAcrossProcesses},
		{"KeptFilesReopenAndBound", TestKeptFilesReopenAndBound},
		{"GroupCommit", TestGroupCommit},
		{"ClearInFlightGoesToOrphan", TestClearInFlightGoesToOrphan},
		{"ClearInFlightKeptFile", TestClearInFlightKeptFile},
		{"StoreRefusesSymlinks", TestStoreRefusesSymlinks},
		{"AppendGathersLargeParts", TestAppendGathersLargeParts},
		{"OrphanLinesKinds", TestOrphanLinesKinds},
		{"AppendExchangeStreamsBigPayloads", TestAppendExchangeStreamsBigPayloads},
	} {
		t.Run(tc.name, tc.run)
	}
}

// ioUringOffEnv asks TestIOUringOffChild to run (in a child process started by TestIOUringOff).
const ioUringOffEnv = "CAPTURE_TEST_IO_URING_OFF_CHILD"

// TestIOUringOff runs concurrent durable appends in a process started with MODELCALLS_IO_URING=off:
// no ring is set up, and every write and sync is a plain system call (RWF_DSYNC where the kernel
// offers it), the lines all there.
func TestIOUringOff(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestIOUringOffChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), ioUringOffEnv+"=1", uring.EnvVar+"=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestIOUringOffChild") {
		t.Fatalf("child did not run the test:\n%s", out)
	}
}

func TestIOUringOffChild(t *testing.T) {
	if os.Getenv(ioUringOffEnv) != "1" {
		t.Skip("run by TestIOUringOff")
	}
	if _, err := uring.Shared(); !errors.Is(err, uring.ErrOff) {
		t.Fatalf("uring.Shared() = %v, want ErrOff", err)
	}
	TestConcurrentAppendGoroutines(t)
	TestGroupCommit(t)
}
