//go:build !linux

package uring

import (
	"errors"
	"fmt"
	"runtime"
)

// Ring is Linux's io_uring; on this system there is none, and no Ring is ever made.
type Ring struct{}

var errNoRing = fmt.Errorf("io_uring on %s: %w", runtime.GOOS, errors.ErrUnsupported)

// New fails: io_uring is a Linux interface.
func New(entries uint32) (*Ring, error) { return nil, errNoRing }

// WriteDsync is never reached (there is no Ring here); it fails like New.
func (r *Ring) WriteDsync(fd int, b []byte) error { return errNoRing }

// WritevDsync is never reached (there is no Ring here); it fails like New.
func (r *Ring) WritevDsync(fd int, bufs [][]byte) error { return errNoRing }

// Fdatasync is never reached (there is no Ring here); it fails like New.
func (r *Ring) Fdatasync(fd int) error { return errNoRing }
