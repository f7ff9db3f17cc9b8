//go:build !linux

package dialect

import "time"

// threadCPU cannot tell a thread's CPU time here: TestReassemblyWorkIsLinear checks allocation only.
func threadCPU() (time.Duration, bool) { return 0, false }
