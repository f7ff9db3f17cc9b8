//go:build aix || linux || solaris

package cli

import "golang.org/x/sys/unix"

// The ioctl requests that read and set a terminal's attributes (tcgetattr, tcsetattr TCSANOW).
const (
	ioctlGetTermios = unix.TCGETS
	ioctlSetTermios = unix.TCSETS
)
