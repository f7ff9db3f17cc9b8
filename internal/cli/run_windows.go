package cli

import (
	"io"
	"os"
	"syscall"
)

// Windows has no process groups or foreground jobs of a terminal like POSIX: Ctrl-C reaches every
// process attached to the console, the child included, so run does not hand the terminal over.

func foregroundTTY(in io.Reader) (*os.File, bool) { return nil, false }

func foregroundAttr(tty *os.File) *syscall.SysProcAttr { return nil }

func reclaimTerminal(tty *os.File) {}

// stopChild ends the child (TerminateProcess): Windows cannot send it SIGTERM.
func stopChild(p *os.Process) error { return p.Kill() }
