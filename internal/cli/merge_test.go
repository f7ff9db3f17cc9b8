package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// sliceSource feeds runOrdered from a slice, counting how many jobs were read.
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
		lim  pipelineLimits
		n    int
	}{
		{"one worker", pipelineLimits{workers: 1, maxItems: 1, maxBytes: 1 << 20}, 50},
		{"many workers small window", pipelineLimits{workers: 8, maxItems: 8, maxBytes: 1 << 20}, 400},
		{"many workers big window", pipelineLimits{workers: 16, maxItems: 64, maxBytes: 1 << 20}, 400},
		{"byte budget tighter than item budget", pipelineLimits{workers: 8, maxItems: 64, maxBytes: 50}, 300},
		{"zero limits are raised to one", pipelineLimits{}, 20},
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
			err := runOrdered(context.Background(), tc.lim,
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
				t.Fatalf("runOrdered: %v", err)
			}
			if len(got) != tc.n {
				t.Fatalf("emitted %d results; want %d", len(got), tc.n)
			}
			for i, j := range got {
				if i != j {
					t.Fatalf("result %d is job %d; want input order", i, j)
				}
			}
			wantItems := max(1, tc.lim.maxItems)
			// +1: the producer may read one job before it waits for budget.
			if maxOutstanding > wantItems+1 {
				t.Errorf("up to %d jobs read but not emitted; limit %d", maxOutstanding, wantItems)
			}
			if tc.lim.maxBytes > 0 && maxBytesOutstanding > tc.lim.maxBytes+10 {
				t.Errorf("up to %d bytes outstanding; limit %d", maxBytesOutstanding, tc.lim.maxBytes)
			}
			if w := int64(max(1, tc.lim.workers)); maxRunning.Load() > w {
				t.Errorf("%d jobs ran at once; limit %d", maxRunning.Load(), w)
			}
			if tc.lim.workers >= 8 && maxRunning.Load() < 2 {
				t.Errorf("jobs never ran in parallel with %d workers", tc.lim.workers)
			}
		})
	}
}

func TestRunOrderedOversizedJobAdmitted(t *testing.T) {
	defer goleak.VerifyNone(t)
	var read atomic.Int64
	jobs := []int64{5, 1000, 5}
	var got []int64
	err := runOrdered(context.Background(), pipelineLimits{workers: 2, maxItems: 4, maxBytes: 10},
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
	err := runOrdered(context.Background(), pipelineLimits{workers: 4, maxItems: 8, maxBytes: 1 << 20},
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
	err := runOrdered(context.Background(), pipelineLimits{workers: 3, maxItems: 3, maxBytes: 100}, next,
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
	err := runOrdered(ctx, pipelineLimits{workers: 2, maxItems: 4, maxBytes: 100}, next,
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

func TestLineReaderKeepsBytes(t *testing.T) {
	big := strings.Repeat("x", 3<<20) // larger than the reader's buffer
	tests := []struct {
		name  string
		in    string
		lines []string // body|eol
	}{
		{"empty input", "", nil},
		{"lf lines", "a\nb\n", []string{"a|\n", "b|\n"}},
		{"crlf kept", "a\r\nb\n", []string{"a|\r\n", "b|\n"}},
		{"no final newline", "a\nb", []string{"a|\n", "b|"}},
		{"blank lines count", "\n\na\n", []string{"|\n", "|\n", "a|\n"}},
		{"lone cr stays in the body", "a\rb\n", []string{"a\rb|\n"}},
		{"huge line", big + "\n{}\n", []string{big + "|\n", "{}|\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lr := newLineReader(strings.NewReader(tc.in))
			var got []string
			var round bytes.Buffer
			for {
				l, ok, err := lr.next()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				if l.num != len(got)+1 {
					t.Errorf("line number %d; want %d", l.num, len(got)+1)
				}
				got = append(got, string(l.body)+"|"+string(l.eol))
				round.Write(l.body)
				round.Write(l.eol)
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.lines) {
				if len(tc.in) < 100 {
					t.Errorf("lines = %q; want %q", got, tc.lines)
				} else {
					t.Errorf("got %d lines; want %d", len(got), len(tc.lines))
				}
			}
			if round.String() != tc.in {
				t.Errorf("body+eol does not reproduce the input")
			}
			if lr.read != int64(len(tc.in)) {
				t.Errorf("read = %d; want %d", lr.read, len(tc.in))
			}
		})
	}
}

type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

func TestLineReaderError(t *testing.T) {
	bad := errors.New("eio")
	lr := newLineReader(io.MultiReader(strings.NewReader("a\n"), failingReader{bad}))
	if _, ok, err := lr.next(); !ok || err != nil {
		t.Fatalf("first line: ok %v err %v", ok, err)
	}
	if _, _, err := lr.next(); !errors.Is(err, bad) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("err = %v; want the read error naming line 2", err)
	}
}
