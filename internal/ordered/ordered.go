// Package ordered runs jobs on a pool of goroutines and hands their results to one consumer in the
// order the jobs were read, with the jobs read but not yet consumed bounded in count and in bytes.
// The merge command uses it to merge rollout records in parallel and write them in input order; the
// stats command to read rollouts in parallel.
package ordered

import (
	"context"
	"sync"
)

// Limits bound a run: how many jobs run at once, and how many jobs (and input
// bytes) may be read but not yet emitted. The byte bound always admits one job, however large, so a
// single huge line cannot stall the run.
type Limits struct {
	Workers  int   // goroutines running fn; below 1 means 1
	MaxItems int   // jobs read and not yet emitted; below 1 means 1
	MaxBytes int64 // summed job weights read and not yet emitted; below 1 means 1
}

// Each runs fn on every job of jobs on workers goroutines (at least 1) and hands each result to
// emit in the order of jobs, at most four jobs per worker read ahead; errors as for Run.
func Each[J, R any](ctx context.Context, workers int, jobs []J, fn func(context.Context, J) R, emit func(R) error) error {
	workers = max(1, workers)
	i := 0
	next := func() (J, int64, bool, error) {
		if i == len(jobs) {
			var zero J
			return zero, 0, false, nil
		}
		i++
		return jobs[i-1], 1, true, nil
	}
	return Run(ctx, Limits{Workers: workers, MaxItems: 4 * workers, MaxBytes: int64(4 * workers)}, next, fn, emit)
}

// Run reads jobs with next (from the calling goroutine's point of view, sequentially), runs fn
// on them on lim.Workers goroutines, and hands each result to emit in the order the jobs were read.
// next returns (job, weight in bytes, ok); ok false means the input is exhausted; a non-nil error stops
// reading, and Run returns it after emitting every result of the jobs read before it. An emit
// error stops everything and is returned. fn gets a context that is cancelled once the run stops early.
// All goroutines have exited when Run returns.
func Run[J, R any](ctx context.Context, lim Limits, next func() (J, int64, bool, error),
	fn func(context.Context, J) R, emit func(R) error) error {
	lim.Workers = max(1, lim.Workers)
	lim.MaxItems = max(1, lim.MaxItems)
	lim.MaxBytes = max(1, lim.MaxBytes)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bud := newBudget(lim.MaxItems, lim.MaxBytes)
	stopBudget := context.AfterFunc(ctx, bud.close)
	defer stopBudget()

	type slot struct {
		job    J
		weight int64
		done   chan R // buffered: a worker never blocks on it
	}
	work := make(chan *slot)
	order := make(chan *slot, lim.MaxItems)
	var readErr error // written by the producer before it closes order

	var wg sync.WaitGroup
	for range lim.Workers {
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
			if ctx.Err() != nil {
				bud.release(weight)
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
				// Close the budget here, not only from the AfterFunc (which runs in a goroutine of
				// its own): the releases below must not admit more jobs in the meantime.
				cancel()
				bud.close()
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
