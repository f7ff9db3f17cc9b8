package main

import (
	"testing"
	"time"
)

func TestMedianDuration(t *testing.T) {
	tests := []struct {
		in   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{[]time.Duration{5}, 5},
		{[]time.Duration{9, -1, 4}, 4},
		{[]time.Duration{10, 2, 8, 4}, 6},
		{[]time.Duration{-3, -3, 100, -3}, -3},
	}
	for _, tt := range tests {
		if got := medianDuration(tt.in); got != tt.want {
			t.Errorf("medianDuration(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// The bootstrap interval holds the median, narrows as the sample grows, and is the same for the
// same sample.
func TestMedianCI(t *testing.T) {
	sample := func(n int) []time.Duration {
		d := make([]time.Duration, n)
		for i := range d {
			d[i] = time.Duration((i*7919)%101-50) * time.Microsecond // spread -50..+50 µs, median 0
		}
		return d
	}
	small, large := sample(20), sample(400)
	slo, shi := medianCI(small)
	llo, lhi := medianCI(large)
	if m := medianDuration(small); slo > m || shi < m {
		t.Errorf("interval %v..%v does not hold the median %v", slo, shi, m)
	}
	if lhi-llo >= shi-slo {
		t.Errorf("400 pairs give %v..%v, no narrower than 20 pairs' %v..%v", llo, lhi, slo, shi)
	}
	if a, b := medianCI(large); a != llo || b != lhi {
		t.Errorf("two intervals of one sample: %v..%v and %v..%v", llo, lhi, a, b)
	}
	if lo, hi := medianCI(nil); lo != 0 || hi != 0 {
		t.Errorf("empty sample: %v..%v", lo, hi)
	}
}
