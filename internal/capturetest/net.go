package capturetest

import (
	"net"
	"testing"
)

// Listen listens on a free loopback TCP port (127.0.0.1:0); the listener is closed at cleanup (a
// second Close, by a server that served it, does no harm).
func Listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// ClosedAddr returns a loopback host:port that was listening a moment ago and no longer is, so a
// connection to it is refused.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln := Listen(t)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// FreePort returns the number of a loopback port that was free a moment ago, for a program that
// takes a port number rather than a listener.
func FreePort(t testing.TB) int {
	t.Helper()
	ln := Listen(t)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
