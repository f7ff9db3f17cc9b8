package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
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

// machineTimes is what /proc/stat's aggregate "cpu" line says the whole machine's CPUs have spent
// so far: stolen by the hypervisor (time a virtual CPU wanted to run and the host ran something
// else, such as its own handling of the guest's disk I/O), and idle (idle plus iowait). The line
// counts in USER_HZ ticks, 100 per second on Linux.
type machineTimes struct {
	steal, idle time.Duration
	ok          bool
}

// readMachineTimes reads machineTimes; ok is false where /proc/stat is missing or unreadable.
func readMachineTimes() machineTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTimes{}
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	// cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return machineTimes{}
	}
	tick := func(s string) time.Duration {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0
		}
		return time.Duration(n) * (time.Second / 100)
	}
	return machineTimes{steal: tick(f[8]), idle: tick(f[4]) + tick(f[5]), ok: true}
}

// sub is m minus an earlier reading (zero when either is unknown).
func (m machineTimes) sub(o machineTimes) machineTimes {
	if !m.ok || !o.ok {
		return machineTimes{}
	}
	return machineTimes{steal: m.steal - o.steal, idle: m.idle - o.idle, ok: true}
}

// add accumulates d.
func (m *machineTimes) add(d machineTimes) {
	m.steal, m.idle, m.ok = m.steal+d.steal, m.idle+d.idle, m.ok || d.ok
}
