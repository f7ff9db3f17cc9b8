//go:build unix

package cli

import "golang.org/x/sys/unix"

// childJobState reports, in a child run started, whether its process group is the terminal's
// foreground group (stdin a terminal) and whether it is a group of its own (not its parent's).
func childJobState() (foreground, ownGroup bool) {
	fg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	return err == nil && fg == unix.Getpgrp(), unix.Getpgrp() != unix.Getppid()
}
