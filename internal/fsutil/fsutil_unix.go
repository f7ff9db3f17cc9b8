//go:build unix

package fsutil

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

const noDirSync = false

// Lock takes an advisory flock on f: exclusive when exclusive is true, shared otherwise. It blocks
// until the lock is granted, retrying when interrupted by a signal (EINTR). flock locks are held per
// open file description, so they serialise goroutines that each open the file as well as processes,
// and they work across hosts on shared file systems that support them (NFSv4, Lustre with flock).
func Lock(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("flock %s: %w", f.Name(), err)
		}
	}
}

// Unlock releases a lock taken by Lock. Closing the file also releases it.
func Unlock(f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_UN); err != nil {
		return fmt.Errorf("unlock %s: %w", f.Name(), err)
	}
	return nil
}

// ProcessAlive reports whether a process with this pid exists on this host (signal 0 probe). A pid
// owned by another user counts as alive (EPERM). A zombie (exited, not yet reaped by its parent:
// state "Z" in /proc/<pid>/stat on Linux) is not alive: it will never write again.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := unix.Kill(pid, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return false
	}
	return !isZombie(pid)
}

// isZombie reads the process state from /proc; where /proc is missing it says false.
func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may contain anything.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
