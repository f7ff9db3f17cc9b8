//go:build !unix

package tokenexport

// processCPU returns 0: the process's CPU time is read on Unix systems only.
func processCPU() int64 { return 0 }
