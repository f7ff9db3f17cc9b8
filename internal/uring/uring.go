// Package uring runs durable file writes (a write with RWF_DSYNC, an fdatasync) through one Linux
// io_uring instance, so that the goroutine waiting for the disk is parked like one waiting for a
// socket instead of holding its OS thread and its scheduler slot (P) inside a blocking system call.
//
// Why: a Go goroutine in a blocking system call keeps its P until the runtime's monitor thread
// notices and hands the P to another thread, and that monitor backs off to sleeps of up to 10 ms
// when most system calls are short. A capture gateway whose every call ends in a 0.4-1.5 ms durable
// write then runs with its Ps stuck in those writes while runnable goroutines wait: on 2 cores,
// 64 concurrent captured calls used one core of two. Through the ring, the write is done by the
// kernel's io_uring worker threads, the completion is signalled on an eventfd that the Go network
// poller watches, and the P goes on running other goroutines meanwhile.
//
// What is used: io_uring_setup with a single shared mapping (IORING_FEAT_SINGLE_MMAP, Linux 5.4),
// IORING_OP_WRITEV (one write of several buffers) at the file position (IORING_FEAT_RW_CUR_POS,
// Linux 5.6) and IORING_OP_FSYNC, each submitted with IOSQE_ASYNC so that submission never blocks,
// and IORING_REGISTER_EVENTFD for completions. Where any of it is missing
// (an older kernel, io_uring disabled by sysctl or a seccomp filter), New returns an error and the
// caller does the same writes with plain system calls.
//
// The ring can be turned off for a whole process with the environment variable MODELCALLS_IO_URING
// set to "off" (or "0", "false", "no"): Shared then returns ErrOff without setting one up. Other
// systems than Linux have no io_uring: there New and Shared return an error wrapping
// errors.ErrUnsupported.
package uring

import (
	"errors"
	"os"
	"strings"
	"sync"
)

// EnvVar is the environment variable that turns the process's ring off: "off", "0", "false" or
// "no" (any case). Unset, empty, or any other value leaves io_uring on where the kernel offers it.
const EnvVar = "MODELCALLS_IO_URING"

// ErrOff is Shared's error when EnvVar turns io_uring off.
var ErrOff = errors.New("io_uring turned off by " + EnvVar)

// Off reports whether EnvVar turns io_uring off. It is read each time it is called; Shared reads it
// once, when the ring would be set up.
func Off() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(EnvVar))) {
	case "off", "0", "false", "no":
		return true
	}
	return false
}

// MaxIovecs is the most buffers one WritevDsync takes (the kernel's UIO_MAXIOV).
const MaxIovecs = 1024

// Advance returns bufs without their first n bytes (a vectored write's progress): the buffers
// written whole are dropped and the next one is cut. bufs itself is not modified.
func Advance(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if n > 0 && len(bufs) > 0 {
		rest := make([][]byte, len(bufs))
		copy(rest, bufs)
		rest[0] = rest[0][n:]
		return rest
	}
	return bufs
}

var (
	sharedOnce sync.Once
	shared     *Ring
	sharedErr  error
)

// Shared returns the process's ring, set up on first use (256 operations in flight), or the error
// that setting it up gave: ErrOff when EnvVar turns io_uring off, an error wrapping
// errors.ErrUnsupported on systems other than Linux. The ring lives as long as the process.
func Shared() (*Ring, error) {
	sharedOnce.Do(func() {
		if Off() {
			sharedErr = ErrOff
			return
		}
		shared, sharedErr = New(256)
	})
	return shared, sharedErr
}
