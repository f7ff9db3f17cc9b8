package uring

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel ABI constants (include/uapi/linux/io_uring.h).
const (
	opWritev = 2
	opFsync  = 3

	sqeAsync = 1 << 4 // IOSQE_ASYNC

	fsyncDatasync = 1 // IORING_FSYNC_DATASYNC

	featSingleMmap = 1 << 0
	featNoDrop     = 1 << 1
	featRWCurPos   = 1 << 3

	offSQRing = 0
	offSQEs   = 0x10000000

	registerEventfd = 4
	// registerIOWQMaxWorkers is IORING_REGISTER_IOWQ_MAX_WORKERS (Linux 5.15).
	registerIOWQMaxWorkers = 19

	sqeSize = 64
	cqeSize = 16
)

// params is struct io_uring_params.
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqOffsets
	cqOff                                                                  cqOffsets
}

type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// sqe is struct io_uring_sqe, as far as these operations use it.
type sqe struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64
	addr     uint64
	len      uint32
	opFlags  uint32 // rw_flags / fsync_flags
	userData uint64
	_        [24]byte
}

type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// Ring is an io_uring instance shared by every goroutine of the process that writes through it.
// Its methods are safe for concurrent use; at most Entries operations are in flight, more wait.
type Ring struct {
	fd   int
	mem  []byte // SQ and CQ rings (one mapping)
	sqes []byte

	sqTail, sqHead, sqMask *uint32
	sqArray                unsafe.Pointer
	cqHead, cqTail, cqMask *uint32
	cqes                   unsafe.Pointer
	entries                uint32

	efd *os.File

	mu      sync.Mutex // submission: the SQ tail, the free slots, pending and reaping
	free    []uint32   // free slot indexes (user_data)
	slots   []slot
	sem     chan struct{} // one token per operation in flight
	pending int           // operations submitted whose completion is not yet handed over
	reaping bool          // a reap goroutine runs; it exits when pending drops to 0
}

// slot is one operation in flight: what the kernel reads (a buffer, or an iovec array and through
// it its buffers; kept reachable until the kernel is done with it) and where its result goes.
type slot struct {
	keep any
	done chan int32
}

// maxWorkers is the most operations on regular files the kernel runs at once for a ring.
const maxWorkers = 64

// New sets up a ring with room for entries operations in flight (rounded up to a power of two by
// the kernel) and starts the goroutine that reaps completions. It fails where io_uring, or one of
// the operations this package needs, is not available.
func New(entries uint32) (*Ring, error) {
	var p params
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &Ring{fd: int(fd), entries: p.sqEntries}
	fail := func(err error) (*Ring, error) {
		r.unmap()
		unix.Close(r.fd)
		return nil, err
	}
	need := uint32(featSingleMmap | featNoDrop | featRWCurPos)
	if p.features&need != need {
		return fail(fmt.Errorf("io_uring: kernel lacks features %#x (has %#x)", need, p.features))
	}
	sqSize := int(p.sqOff.array) + int(p.sqEntries)*4
	cqSize := int(p.cqOff.cqes) + int(p.cqEntries)*cqeSize
	size := max(sqSize, cqSize)
	mem, err := unix.Mmap(r.fd, offSQRing, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fail(fmt.Errorf("io_uring: map rings: %w", err))
	}
	r.mem = mem
	sqes, err := unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fail(fmt.Errorf("io_uring: map entries: %w", err))
	}
	r.sqes = sqes
	base := unsafe.Pointer(&mem[0])
	u32 := func(off uint32) *uint32 { return (*uint32)(unsafe.Add(base, off)) }
	r.sqHead, r.sqTail, r.sqMask = u32(p.sqOff.head), u32(p.sqOff.tail), u32(p.sqOff.ringMask)
	r.sqArray = unsafe.Add(base, p.sqOff.array)
	r.cqHead, r.cqTail, r.cqMask = u32(p.cqOff.head), u32(p.cqOff.tail), u32(p.cqOff.ringMask)
	r.cqes = unsafe.Add(base, p.cqOff.cqes)

	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fail(fmt.Errorf("io_uring: eventfd: %w", err))
	}
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerEventfd, uintptr(unsafe.Pointer(&efd)), 1, 0, 0); errno != 0 {
		unix.Close(efd)
		return fail(fmt.Errorf("io_uring: register eventfd: %w", errno))
	}
	// A non-blocking fd makes a pollable os.File: reads park the goroutine in the network poller.
	r.efd = os.NewFile(uintptr(efd), "io_uring-eventfd")
	// The kernel runs a write it cannot finish at once (every RWF_DSYNC write) on a worker thread
	// of the ring's own pool, and by default starts at most 4 per CPU for regular files: on 2 CPUs,
	// 8 durable writes at a time, while the disk takes more at once (64 writers, each on its own
	// file, made twice as many durable appends per second with plain system calls). Raise the
	// bound to maxWorkers; kernels before 5.15 do not offer it and keep theirs.
	limits := [2]uint32{maxWorkers, 0} // bounded (regular files), unbounded: unchanged
	unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerIOWQMaxWorkers, uintptr(unsafe.Pointer(&limits)), 2, 0, 0)

	// At most as many operations in flight as the SQ holds: the CQ (twice as large) cannot overflow.
	n := min(p.sqEntries, p.cqEntries)
	r.slots = make([]slot, n)
	r.free = make([]uint32, n)
	r.sem = make(chan struct{}, n)
	for i := range r.slots {
		r.slots[i].done = make(chan int32, 1)
		r.free[i] = uint32(i)
	}
	return r, nil
}

func (r *Ring) unmap() {
	if r.mem != nil {
		unix.Munmap(r.mem)
	}
	if r.sqes != nil {
		unix.Munmap(r.sqes)
	}
}

// WriteDsync writes b to the file at fd at its current position (at its end when it was opened
// with O_APPEND) with RWF_DSYNC: when it returns nil, the bytes are durable as after fdatasync.
// A short write is continued until b is written. The error is the kernel's errno for the write.
func (r *Ring) WriteDsync(fd int, b []byte) error { return r.WritevDsync(fd, [][]byte{b}) }

// WritevDsync is WriteDsync for the concatenation of bufs, written with one vectored write
// (IORING_OP_WRITEV, Linux 5.1) instead of a copy into one buffer; at most MaxIovecs buffers.
// A short write is continued from where it stopped.
func (r *Ring) WritevDsync(fd int, bufs [][]byte) error {
	if len(bufs) > MaxIovecs {
		return fmt.Errorf("io_uring writev: %d buffers, more than %d: %w", len(bufs), MaxIovecs, unix.EINVAL)
	}
	for {
		iov := make([]unix.Iovec, 0, len(bufs))
		for _, b := range bufs {
			if len(b) > 0 {
				v := unix.Iovec{Base: &b[0]}
				v.SetLen(len(b))
				iov = append(iov, v)
			}
		}
		if len(iov) == 0 {
			return nil
		}
		n, err := r.do(func(s *sqe) {
			s.opcode, s.fd = opWritev, int32(fd)
			s.off = ^uint64(0) // -1: the file position
			s.addr, s.len = uint64(uintptr(unsafe.Pointer(&iov[0]))), uint32(len(iov))
			s.opFlags = unix.RWF_DSYNC
		}, iov)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("io_uring writev: %w", unix.EIO)
		}
		bufs = Advance(bufs, n)
	}
}

// Fdatasync flushes fd like fdatasync(2).
func (r *Ring) Fdatasync(fd int) error {
	_, err := r.do(func(s *sqe) {
		s.opcode, s.fd = opFsync, int32(fd)
		s.opFlags = fsyncDatasync
	}, nil)
	return err
}

// do submits one operation filled in by fill and waits for its completion: the byte count (or 0)
// and the error the kernel returned for it.
func (r *Ring) do(fill func(*sqe), keep any) (int, error) {
	r.sem <- struct{}{}
	defer func() { <-r.sem }()

	r.mu.Lock()
	idx := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	sl := &r.slots[idx]
	sl.keep = keep
	tail := atomic.LoadUint32(r.sqTail)
	pos := tail & *r.sqMask
	s := (*sqe)(unsafe.Pointer(&r.sqes[pos*sqeSize]))
	*s = sqe{}
	fill(s)
	s.flags |= sqeAsync
	s.userData = uint64(idx)
	*(*uint32)(unsafe.Add(r.sqArray, pos*4)) = pos
	atomic.StoreUint32(r.sqTail, tail+1)
	var err error
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 1, 0, 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			err = fmt.Errorf("io_uring_enter: %w", errno)
		} else if n != 1 {
			err = fmt.Errorf("io_uring_enter: submitted %d of 1", n)
		}
		break
	}
	if err != nil {
		// Not consumed by the kernel: take the entry back so that the ring stays consistent.
		atomic.StoreUint32(r.sqTail, tail)
		sl.keep = nil
		r.free = append(r.free, idx)
		r.mu.Unlock()
		return 0, err
	}
	r.pending++
	if !r.reaping {
		r.reaping = true
		go r.reap()
	}
	r.mu.Unlock()

	res := <-sl.done
	runtime.KeepAlive(keep)
	r.mu.Lock()
	sl.keep = nil
	r.free = append(r.free, idx)
	r.mu.Unlock()
	if res < 0 {
		return 0, unix.Errno(-res)
	}
	return int(res), nil
}

// reap hands every completion to its waiting goroutine, waiting on the eventfd (parked in the
// network poller) while operations are pending. It returns once none is: an idle process keeps no
// goroutine for the ring.
func (r *Ring) reap() {
	var b [8]byte
	for {
		head := atomic.LoadUint32(r.cqHead)
		tail := atomic.LoadUint32(r.cqTail)
		n := 0
		for ; head != tail; head++ {
			c := (*cqe)(unsafe.Add(r.cqes, (head&*r.cqMask)*cqeSize))
			r.slots[c.userData].done <- c.res
			n++
		}
		atomic.StoreUint32(r.cqHead, head)
		r.mu.Lock()
		r.pending -= n
		if r.pending == 0 {
			r.reaping = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		if _, err := r.efd.Read(b[:]); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			// The eventfd cannot fail while the ring exists; should it, poll the ring instead.
			runtime.Gosched()
		}
	}
}
