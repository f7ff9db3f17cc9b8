//go:build unix

package main

import "syscall"

// oDsync makes each write of the durable floor proxy durable before it returns.
const oDsync = syscall.O_DSYNC
