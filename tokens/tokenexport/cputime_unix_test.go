//go:build unix

package tokenexport

import "syscall"

// processCPU returns the CPU time (user and system) the process has used so far, in nanoseconds,
// or 0 when the system does not say.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
