package main

import (
	"slices"
	"strings"
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

func TestParseOTelVariants(t *testing.T) {
	on := otelOnEnv("http://127.0.0.1:1")
	tests := []struct {
		spec    string
		want    []otelSubject // name, exe, env
		wantErr bool
	}{
		{spec: "", want: nil},
		{spec: " ; ", want: nil},
		{spec: "old@/tmp/bench-old", want: []otelSubject{{name: "old", exe: "/tmp/bench-old", env: on}}},
		{spec: "b64 OTEL_BSP_MAX_EXPORT_BATCH_SIZE=64; old@/tmp/b A=1 B=2", want: []otelSubject{
			{name: "b64", env: append(slices.Clone(on), "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=64")},
			{name: "old", exe: "/tmp/b", env: append(slices.Clone(on), "A=1", "B=2")},
		}},
		{spec: "b64 OTEL_BSP_MAX_EXPORT_BATCH_SIZE", wantErr: true},
		{spec: "@/tmp/b", wantErr: true},
		{spec: "A=1", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseOTelVariants(tt.spec, "http://127.0.0.1:1")
		if (err != nil) != tt.wantErr {
			t.Errorf("%q: err %v, want error %v", tt.spec, err, tt.wantErr)
			continue
		}
		if len(got) != len(tt.want) {
			t.Errorf("%q: %d variants, want %d", tt.spec, len(got), len(tt.want))
			continue
		}
		for i, w := range tt.want {
			g := got[i]
			if g.name != w.name || g.exe != w.exe || !slices.Equal(g.env, w.env) || !g.export {
				t.Errorf("%q #%d: %+v, want name %q exe %q env %q export true", tt.spec, i, *g, w.name, w.exe, w.env)
			}
		}
	}
}

// The section states the SDK floor's excess over export off and export on's over the floor, from
// the built-in floor variant; without it, no such line.
func TestOTelSectionFloor(t *testing.T) {
	stats := func(cpuPerCall time.Duration) subjectStats {
		return subjectStats{calls: 1000, cpu: 1000 * cpuPerCall, seq: durations{time.Millisecond}, conc: durations{time.Millisecond}}
	}
	o := &otelResult{off: stats(450 * time.Microsecond), on: stats(525 * time.Microsecond), offGC: -1, onGC: -1,
		variants: []otelVariantResult{{name: "other", st: stats(600 * time.Microsecond), gc: -1}, {name: otelFloorVariant, st: stats(495 * time.Microsecond), gc: -1}}}
	r := &runner{otel: o, plan: quickPlan}
	got := r.otelSection()
	want := "costs 495 µs per call, +45 µs over export off (1.10x); export on costs +75 µs over export off, so the package's own work is +30 µs per call on top of the SDK's."
	if !strings.Contains(got, want) {
		t.Errorf("section lacks %q:\n%s", want, got)
	}
	o.variants = o.variants[:1]
	if got := r.otelSection(); strings.Contains(got, "SDK floor") {
		t.Errorf("a floor line without the floor variant:\n%s", got)
	}
}
