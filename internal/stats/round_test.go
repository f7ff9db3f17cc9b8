package stats

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestReportRounded(t *testing.T) {
	a := Accumulator{By: ByDialect}
	f := func(v float64) *float64 { return &v }
	b := func(v bool) *bool { return &v }
	chat := "chat"
	// Values the float arithmetic cannot hit: (1.2 + 1.4) / 2 = 1.2999999999999998; 2.675 and 1.005
	// (binary values just below the half, which FormatFloat rounds down as the table does); one hit
	// in three.
	for _, c := range []Call{
		{Rollout: "r1", Dialect: &chat, LatencyMS: f(1.2), TTFTMS: f(2.675), CacheHit: b(true)},
		{Rollout: "r1", Dialect: &chat, LatencyMS: f(1.4), TTFTMS: f(2.675), CacheHit: b(false)},
		{Rollout: "r2", TTFTMS: f(1.005), CacheHit: b(false)},
	} {
		a.Add(c)
	}
	raw := a.Report()
	if *raw.LatencyMS.Mean == 1.3 || *raw.Cache.HitRate != 1.0/3 {
		t.Fatalf("fixture no longer shows the problem: mean %v, hit rate %v", *raw.LatencyMS.Mean, *raw.Cache.HitRate)
	}
	r := raw.Rounded()
	for name, got := range map[string]float64{
		"latency mean":        *r.LatencyMS.Mean,
		"ttft mean":           *r.TTFTMS.Mean,
		"hit rate":            *r.Cache.HitRate,
		"model latency mean":  *r.Models[0].LatencyMS.Mean,
		"group latency mean":  *r.Groups[0].LatencyMS.Mean,
		"group hit rate":      *r.Groups[0].Cache.HitRate,
		"group ttft mean":     *r.Groups[0].TTFTMS.Mean,
		"unknown dialect p50": *r.Groups[1].TTFTMS.P50,
	} {
		want := map[string]float64{
			"latency mean": 1.3, "ttft mean": 2.12, "group ttft mean": 2.67, "hit rate": 0.3333, "model latency mean": 1.3,
			"group latency mean": 1.3, "group hit rate": 0.5, "unknown dialect p50": 1,
		}[name]
		if got != want {
			t.Errorf("%s = %v; want %v", name, got, want)
		}
	}
	if *raw.LatencyMS.Mean == 1.3 || *raw.Cache.HitRate != 1.0/3 || *raw.Groups[0].LatencyMS.Mean == 1.3 {
		t.Error("Rounded changed the report it was called on")
	}
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); strings.Contains(s, "1.2999") || strings.Contains(s, "0.3333333") {
		t.Errorf("rounded JSON still has the float noise: %s", s)
	}
	// An empty report stays an empty report (nulls, no groups invented).
	e := (&Accumulator{}).Report().Rounded()
	if e.LatencyMS.Mean != nil || e.Cache.HitRate != nil || e.Groups != nil || e.Models == nil {
		t.Errorf("empty report rounded to %+v", e)
	}
}
