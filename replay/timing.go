package replay

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Timing says when a replayed answer's pieces are sent.
type Timing struct {
	// Fast sends everything at once.
	Fast bool
	// Speed divides every recorded delay: 1 is the recorded pace, 2 twice as fast, 0.5 half as
	// fast. Zero means 1. Ignored when Fast is set.
	Speed float64
}

// Recorded is the recorded pace.
var Recorded = Timing{Speed: 1}

// ParseTiming reads the --timing flag: "recorded", "fast", or "xN" with N a positive number (a
// playback speed: x2 halves every delay, x0.5 doubles it).
func ParseTiming(s string) (Timing, error) {
	switch s {
	case "recorded", "x1":
		return Recorded, nil
	case "fast":
		return Timing{Fast: true}, nil
	}
	if n, ok := strings.CutPrefix(s, "x"); ok {
		f, err := strconv.ParseFloat(n, 64)
		if err == nil && f > 0 && f < 1e6 {
			return Timing{Speed: f}, nil
		}
	}
	return Timing{}, fmt.Errorf("timing %q: want recorded, fast or xN with N > 0 (x2: twice as fast)", s)
}

func (t Timing) String() string {
	switch {
	case t.Fast:
		return "fast"
	case t.Speed == 0 || t.Speed == 1:
		return "recorded"
	}
	return "x" + strconv.FormatFloat(t.Speed, 'g', -1, 64)
}

// scale applies the timing to one recorded delay.
func (t Timing) scale(d time.Duration) time.Duration {
	if t.Fast {
		return 0
	}
	if t.Speed == 0 || t.Speed == 1 {
		return d
	}
	return time.Duration(float64(d) / t.Speed)
}

// schedule returns when each of n pieces is sent, as offsets from the moment the request arrived,
// before scaling. The capture line records two instants of a call: the first body byte
// (latency_ttft_ms) and the terminal event or end of body (latency_ms); the gaps between the
// events in between are not recorded. The first piece goes at TTFT and the last at the latency,
// so both recorded numbers are reproduced; the pieces between are spread evenly over the time
// between them, the pace of a model producing one event per step. One piece goes at TTFT (and
// the body ends at the latency).
func schedule(n int, ttft, latency time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	if n == 0 {
		return out
	}
	out[0] = ttft
	if n == 1 {
		return out
	}
	span := latency - ttft
	for i := 1; i < n; i++ {
		out[i] = ttft + time.Duration(int64(span)*int64(i)/int64(n-1))
	}
	return out
}

// clock is the time a Server paces its answers by: the instant a request arrived, and the waits
// until each piece of the answer is due. Real time (wallClock) unless a test sets another.
type clock interface {
	// Now is the current instant.
	Now() time.Time
	// WaitUntil returns when the instant t has come (true), or when ctx is done first (false). An
	// instant already past returns at once, true unless ctx is done.
	WaitUntil(ctx context.Context, t time.Time) bool
}

// wallClock is real time: time.Now and a timer.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) WaitUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}
