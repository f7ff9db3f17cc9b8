package ordered

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// sliceSource feeds Run from a slice, counting how many jobs were read.
func sliceSource[J any](jobs []J, weight func(J) int64, read *atomic.Int64) func() (J, int64, bool, error) {
	i := 0
	return func() (J, int64, bool, error) {
		if i == len(jobs) {
			var zero J
			return zero, 0, false, nil
		}
		j := jobs[i]
		i++
		read.Add(1)
		return j, weight(j), true, nil
	}
}

func TestRunOrderedKeepsOrderAndBounds(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := []struct {
		name string
		lim  Limits
		n    int
	}{
		{"one worker", Limits{Workers: 1, MaxItems: 1, MaxBytes: 1 << 20}, 50},
		{"many workers small window", Limits{Workers: 8, MaxItems: 8, MaxBytes: 1 << 20}, 400},
		{"many workers big window", Limits{Workers: 16, MaxItems: 64, MaxBytes: 1 << 20}, 400},
		{"byte budget tighter than item budget", Limits{Workers: 8, MaxItems: 64, MaxBytes: 50}, 300},
		{"zero limits are raised to one", Limits{}, 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.n), 7))
			jobs := make([]int, tc.n)
			delays := make([]time.Duration, tc.n)
			for i := range jobs {
				jobs[i] = i
				// Shuffled durations: later jobs often finish before earlier ones.
				delays[i] = time.Duration(rng.IntN(2000)) * time.Microsecond
			}
			var read, running, maxRunning atomic.Int64
			var got []int
			maxOutstanding := 0
			var maxBytesOutstanding int64
			err := Run(context.Background(), tc.lim,
				sliceSource(jobs, func(int) int64 { return 10 }, &read),
				func(_ context.Context, j int) string {
					r := running.Add(1)
					for {
						m := maxRunning.Load()
						if r <= m || maxRunning.CompareAndSwap(m, r) {
							break
						}
					}
					time.Sleep(delays[j]) // the work itself, not synchronisation
					running.Add(-1)
					return fmt.Sprintf("r%d", j)
				},
				func(r string) error {
					var j int
					if _, err := fmt.Sscanf(r, "r%d", &j); err != nil {
						return err
					}
					got = append(got, j)
					out := int(read.Load()) - (len(got) - 1)
					maxOutstanding = max(maxOutstanding, out)
					maxBytesOutstanding = max(maxBytesOutstanding, int64(out)*10)
					return nil
				})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if len(got) != tc.n {
				t.Fatalf("emitted %d results; want %d", len(got), tc.n)
			}
			for i, j := range got {
				if i != j {
					t.Fatalf("result %d is job %d; want input order", i, j)
				}
			}
			wantItems := max(1, tc.lim.MaxItems)
			// +1: the producer may read one job before it waits for budget.
			if maxOutstanding > wantItems+1 {
				t.Errorf("up to %d jobs read but not emitted; limit %d", maxOutstanding, wantItems)
			}
			if tc.lim.MaxBytes > 0 && maxBytesOutstanding > tc.lim.MaxBytes+10 {
				t.Errorf("up to %d bytes outstanding; limit %d", maxBytesOutstanding, tc.lim.MaxBytes)
			}
			if w := int64(max(1, tc.lim.Workers)); maxRunning.Load() > w {
				t.Errorf("%d jobs ran at once; limit %d", maxRunning.Load(), w)
			}
			if tc.lim.Workers >= 8 && maxRunning.Load() < 2 {
				t.Errorf("jobs never ran in parallel with %d workers", tc.lim.Workers)
			}
		})
	}
}

func TestRunOrderedOversizedJobAdmitted(t *testing.T) {
	defer goleak.VerifyNone(t)
	var read atomic.Int64
	jobs := []int64{5, 1000, 5}
	var got []int64
	err := Run(context.Background(), Limits{Workers: 2, MaxItems: 4, MaxBytes: 10},
		sliceSource(jobs, func(w int64) int64 { return w }, &read),
		func(_ context.Context, w int64) int64 { return w },
		func(w int64) error { got = append(got, w); return nil })
	if err != nil || len(got) != 3 {
		t.Fatalf("got %v, %v; want all three jobs, nil", got, err)
	}
}

func TestRunOrderedEmitErrorStops(t *testing.T) {
	defer goleak.VerifyNone(t)
	var read atomic.Int64
	jobs := make([]int, 10000)
	for i := range jobs {
		jobs[i] = i
	}
	boom := errors.New("boom")
	emitted := 0
	err := Run(context.Background(), Limits{Workers: 4, MaxItems: 8, MaxBytes: 1 << 20},
		sliceSource(jobs, func(int) int64 { return 1 }, &read),
		func(_ context.Context, j int) int { return j },
		func(j int) error {
			emitted++
			if j == 3 {
				return boom
			}
			return nil
		})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v; want boom", err)
	}
	if emitted != 4 {
		t.Errorf("emit called %d times; want 4 (none after the error)", emitted)
	}
	if r := read.Load(); r > 4+8+1 {
		t.Errorf("read %d jobs after the error; want reading to stop within the window", r)
	}
}

func TestRunOrderedReadErrorAfterEarlierResults(t *testing.T) {
	defer goleak.VerifyNone(t)
	bad := errors.New("disk on fire")
	i := 0
	next := func() (int, int64, bool, error) {
		if i == 5 {
			return 0, 0, false, bad
		}
		i++
		return i, 1, true, nil
	}
	var got []int
	err := Run(context.Background(), Limits{Workers: 3, MaxItems: 3, MaxBytes: 100}, next,
		func(_ context.Context, j int) int { return j },
		func(j int) error { got = append(got, j); return nil })
	if !errors.Is(err, bad) {
		t.Fatalf("err = %v; want the read error", err)
	}
	if fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Errorf("emitted %v; want every job read before the error", got)
	}
}

func TestRunOrderedCancelledContext(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var once atomic.Bool
	next := func() (int, int64, bool, error) { return 1, 1, true, nil } // endless input
	go func() {
		<-started
		cancel()
	}()
	err := Run(ctx, Limits{Workers: 2, MaxItems: 4, MaxBytes: 100}, next,
		func(ctx context.Context, j int) int {
			if once.CompareAndSwap(false, true) {
				close(started)
			}
			<-ctx.Done()
			return j
		},
		func(int) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
}

// TestEach: every job of the slice is run once and its result emitted in the slice's order, with
// any worker count, none included.
func TestEach(t *testing.T) {
	jobs := make([]int, 100)
	for i := range jobs {
		jobs[i] = i
	}
	for _, workers := range []int{0, 1, 3, 16} {
		var got []int
		err := Each(context.Background(), workers, jobs,
			func(_ context.Context, j int) int {
				time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond) // finish out of order
				return j * 2
			},
			func(r int) error { got = append(got, r); return nil })
		if err != nil {
			t.Fatalf("workers %d: %v", workers, err)
		}
		if len(got) != len(jobs) {
			t.Fatalf("workers %d: %d results, want %d", workers, len(got), len(jobs))
		}
		for i, r := range got {
			if r != 2*i {
				t.Fatalf("workers %d: result %d is %d, want %d", workers, i, r, 2*i)
			}
		}
	}
	if err := Each(context.Background(), 2, []int(nil), func(context.Context, int) int { return 0 },
		func(int) error { t.Error("emit called for no jobs"); return nil }); err != nil {
		t.Error(err)
	}
}
