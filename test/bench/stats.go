package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// durations is a sample of latencies. Percentiles are nearest-rank on a sorted copy.
type durations []time.Duration

// pct returns the p-th percentile (0 < p <= 100), nearest rank; 0 for an empty sample.
func (d durations) pct(p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[rank(p, len(s))]
}

// pcts returns several percentiles with one sort.
func (d durations) pcts(ps ...float64) []time.Duration {
	out := make([]time.Duration, len(ps))
	if len(d) == 0 {
		return out
	}
	s := slices.Clone(d)
	slices.Sort(s)
	for i, p := range ps {
		out[i] = s[rank(p, len(s))]
	}
	return out
}

func rank(p float64, n int) int {
	i := int(math.Ceil(p/100*float64(n))) - 1
	return max(0, min(n-1, i))
}

// ms formats a duration as milliseconds with three decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }

// us formats a duration as whole microseconds ("412 µs").
func us(d time.Duration) string { return fmt.Sprintf("%d µs", d.Microseconds()) }

// msSigned formats a duration difference as signed milliseconds.
func msSigned(d time.Duration) string {
	return fmt.Sprintf("%+.3f", float64(d)/float64(time.Millisecond))
}

// ratio formats a/b with two decimals ("n/a" when b is zero).
func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// verdict renders a goal check.
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}
