//go:build unix

package gateway

import "golang.org/x/sys/unix"

// fdLimit returns the process's soft file-descriptor limit (RLIMIT_NOFILE).
func fdLimit() (uint64, bool) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, false
	}
	return uint64(lim.Cur), true
}
