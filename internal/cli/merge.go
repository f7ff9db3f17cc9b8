package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// pipelineLimits bound the ordered pipeline: how many jobs run at once, and how many jobs (and input
// bytes) may be read but not yet emitted. The byte bound always admits one job, however large, so a
// single huge line cannot stall the pipeline.
type pipelineLimits struct {
	workers  int   // goroutines running fn
	maxItems int   // jobs read and not yet emitted
	maxBytes int64 // summed job weights read and not yet emitted
}

// runOrdered reads jobs with next (from the calling goroutine's point of view, sequentially), runs fn
// on them on lim.workers goroutines, and hands each result to emit in the order the jobs were read.
// next returns (job, weight in bytes, ok); ok false means the input is exhausted; a non-nil error stops
// reading, and runOrdered returns it after emitting every result of the jobs read before it. An emit
// error stops everything and is returned. fn gets a context that is cancelled once the run stops early.
// All goroutines have exited when runOrdered returns.
func runOrdered[J, R any](ctx context.Context, lim pipelineLimits, next func() (J, int64, bool, error),
	fn func(context.Context, J) R, emit func(R) error) error {
	lim.workers = max(1, lim.workers)
	lim.maxItems = max(1, lim.maxItems)
	lim.maxBytes = max(1, lim.maxBytes)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bud := newBudget(lim.maxItems, lim.maxBytes)
	stopBudget := context.AfterFunc(ctx, bud.close)
	defer stopBudget()

	type slot struct {
		job    J
		weight int64
		done   chan R // buffered: a worker never blocks on it
	}
	work := make(chan *slot)
	order := make(chan *slot, lim.maxItems)
	var readErr error // written by the producer before it closes order

	var wg sync.WaitGroup
	for range lim.workers {
		wg.Go(func() {
			for s := range work {
				s.done <- fn(ctx, s.job)
			}
		})
	}
	wg.Go(func() {
		defer close(order)
		defer close(work)
		for {
			job, weight, ok, err := next()
			if err != nil {
				readErr = err
				return
			}
			if !ok || !bud.acquire(weight) {
				return
			}
			s := &slot{job: job, weight: weight, done: make(chan R, 1)}
			select {
			case work <- s:
			case <-ctx.Done():
				bud.release(weight)
				return
			}
			order <- s // never blocks: the budget admits at most maxItems slots
		}
	})

	var emitErr error
	for s := range order {
		r := <-s.done
		if emitErr == nil {
			if emitErr = emit(r); emitErr != nil {
				cancel()
			}
		}
		bud.release(s.weight)
	}
	wg.Wait()
	if emitErr != nil {
		return emitErr
	}
	if readErr != nil {
		return readErr
	}
	return ctx.Err()
}

// budget admits jobs while fewer than maxItems are outstanding and their weights fit maxBytes (an
// empty budget admits any single job). close wakes every waiter and makes acquire fail.
type budget struct {
	mu       sync.Mutex
	cond     sync.Cond
	items    int
	bytes    int64
	maxItems int
	maxBytes int64
	closed   bool
}

func newBudget(maxItems int, maxBytes int64) *budget {
	b := &budget{maxItems: maxItems, maxBytes: maxBytes}
	b.cond.L = &b.mu
	return b
}

func (b *budget) acquire(w int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.closed && b.items > 0 && (b.items >= b.maxItems || b.bytes+w > b.maxBytes) {
		b.cond.Wait()
	}
	if b.closed {
		return false
	}
	b.items++
	b.bytes += w
	return true
}

func (b *budget) release(w int64) {
	b.mu.Lock()
	b.items--
	b.bytes -= w
	b.mu.Unlock()
	b.cond.Broadcast()
}

func (b *budget) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cond.Broadcast()
}

// jsonlLine is one input line: its 1-based number, the content without the line terminator, and the
// terminator exactly as read ("\n", "\r\n", or "" for a last line without one).
type jsonlLine struct {
	num  int
	body []byte
	eol  []byte
}

var (
	eolLF   = []byte("\n")
	eolCRLF = []byte("\r\n")
)

// lineReader reads lines of any length from r (bufio.Reader, not Scanner: rollout records can be
// many megabytes) keeping the terminator apart so output can reproduce the input byte for byte.
type lineReader struct {
	r    *bufio.Reader
	num  int
	read int64 // bytes consumed so far
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 1<<20)}
}

// next returns the next line; ok is false at the end of input.
func (lr *lineReader) next() (jsonlLine, bool, error) {
	b, err := lr.r.ReadBytes('\n')
	if len(b) == 0 {
		if err == nil || errors.Is(err, io.EOF) {
			return jsonlLine{}, false, nil
		}
		return jsonlLine{}, false, fmt.Errorf("read line %d: %w", lr.num+1, err)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return jsonlLine{}, false, fmt.Errorf("read line %d: %w", lr.num+1, err)
	}
	lr.num++
	lr.read += int64(len(b))
	l := jsonlLine{num: lr.num, body: b}
	switch {
	case bytes.HasSuffix(b, eolCRLF):
		l.body, l.eol = b[:len(b)-2], eolCRLF
	case bytes.HasSuffix(b, eolLF):
		l.body, l.eol = b[:len(b)-1], eolLF
	}
	return l, true, nil
}
