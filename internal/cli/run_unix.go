//go:build unix

package cli

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// foregroundAttr makes the child the foreground job of tty in a process group of its own.
func foregroundAttr(tty *os.File) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: int(tty.Fd())}
}

// stopChild asks the child to stop (SIGTERM), as when run's context ends.
func stopChild(p *os.Process) error { return p.Signal(syscall.SIGTERM) }

// foregroundTTY reports whether in is a terminal whose foreground process group is ours.
func foregroundTTY(in io.Reader) (*os.File, bool) {
	f, ok := in.(*os.File)
	if !ok || !isTerminal(f) {
		return nil, false
	}
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	if err != nil || pgrp != unix.Getpgrp() {
		return nil, false
	}
	return f, true
}

// reclaimTerminal makes our process group the terminal's foreground group again after the child's
// group held it. We are a background job at that point, so SIGTTOU is ignored for the call (a
// background tcsetpgrp would otherwise stop us).
func reclaimTerminal(tty *os.File) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(int(tty.Fd()), unix.TIOCSPGRP, unix.Getpgrp())
}
