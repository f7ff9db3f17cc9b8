package stats

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestPercentileNearestRank(t *testing.T) {
	ten := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	tests := []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{"single sample is every percentile", []float64{7}, 50, 7},
		{"single sample p99", []float64{7}, 99, 7},
		{"p50 of two is the lower", []float64{1, 2}, 50, 1},
		{"p51 of two is the upper", []float64{1, 2}, 51, 2},
		{"p50 of ten is rank 5", ten, 50, 5},
		{"p90 of ten is rank 9", ten, 90, 9},
		{"p91 of ten rounds the rank up", ten, 91, 10},
		{"p99 of ten is the max", ten, 99, 10},
		{"p99 of hundred is rank 99", hundred, 99, 99},
		{"p100 is the max", hundred, 100, 100},
		{"p0 is the min", hundred, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("Percentile(%v, %v) = %v; want %v", tc.sorted, tc.p, got, tc.want)
			}
		})
	}
}

func TestDistribute(t *testing.T) {
	t.Run("empty gives nulls", func(t *testing.T) {
		d := Distribute(nil)
		if d.Count != 0 || d.Min != nil || d.Mean != nil || d.P50 != nil || d.P90 != nil || d.P99 != nil || d.Max != nil {
			t.Errorf("Distribute(nil) = %+v; want count 0 and all nil", d)
		}
	})
	t.Run("unsorted input", func(t *testing.T) {
		d := Distribute([]float64{30, 10, 20, 40})
		got := []float64{*d.Min, *d.P50, *d.P90, *d.P99, *d.Max, *d.Mean}
		want := []float64{10, 20, 40, 40, 40, 25}
		if !slices.Equal(got, want) {
			t.Errorf("min,p50,p90,p99,max,mean = %v; want %v", got, want)
		}
	})
	t.Run("compensated mean", func(t *testing.T) {
		// Plain left-to-right summation gives 0.6000000000000001 for these.
		xs := []float64{0.1, 0.2, 0.3}
		if got := neumaierSum(xs); got != 0.6 {
			t.Errorf("neumaierSum(%v) = %v; want 0.6", xs, got)
		}
		sum := 0.6
		if d := Distribute(xs); *d.Mean != sum/3 {
			t.Errorf("mean = %v; want %v", *d.Mean, sum/3)
		}
	})
}

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }
func str(v string) *string   { return &v }
func boolp(v bool) *bool     { return &v }

func TestAccumulator(t *testing.T) {
	var a Accumulator
	a.AddRollout(false, 0)
	a.AddRollout(true, 2)
	a.AddRollout(false, 1)
	calls := []Call{
		{Model: str("m1"), TokensIn: i64(10), TokensOut: i64(5), TokensTotal: i64(15), TokensReasoning: i64(0),
			CacheHit: boolp(true), CachedTokens: i64(8), LatencyMS: f64(100), TTFTMS: f64(10)},
		{Model: str("m1"), TokensIn: i64(20), TokensOut: i64(5), TokensTotal: i64(25),
			CacheHit: boolp(false), CachedTokens: i64(0), LatencyMS: f64(300), TTFTMS: f64(30)},
		{Model: str("m2"), ErrorCategory: str("rate_limit"), LatencyMS: f64(5)},
		{Model: nil, ErrorCategory: str("connection"), LatencyMS: f64(50)},
		{Model: str("m2"), ErrorCategory: str("rate_limit"), CacheCreationTokens: i64(3), LatencyMS: f64(7), TTFTMS: f64(1)},
		{Model: str("m0"), TokensIn: i64(1)},
	}
	for _, c := range calls {
		a.Add(c)
	}
	r := a.Report()

	if r.Rollouts != 3 || r.IncompleteRollouts != 1 || r.DamagedLines != 3 || r.RolloutsWithDamage != 2 {
		t.Errorf("rollout counts = %d/%d/%d/%d; want 3/1/3/2", r.Rollouts, r.IncompleteRollouts, r.DamagedLines, r.RolloutsWithDamage)
	}
	if r.Calls != 6 || r.Errors != 3 {
		t.Errorf("calls, errors = %d, %d; want 6, 3", r.Calls, r.Errors)
	}
	if want := map[string]int{"rate_limit": 2, "connection": 1}; !reflect.DeepEqual(r.ErrorsByCategory, want) {
		t.Errorf("errors by category = %v; want %v", r.ErrorsByCategory, want)
	}
	if got := r.Categories(); !slices.Equal(got, []string{"rate_limit", "connection"}) {
		t.Errorf("Categories() = %v", got)
	}
	if *r.Tokens.In != 31 || *r.Tokens.Out != 10 || *r.Tokens.Total != 40 || *r.Tokens.Reasoning != 0 || r.Tokens.CallsWithUsage != 2 {
		t.Errorf("tokens = in %d out %d total %d reasoning %d usage %d", *r.Tokens.In, *r.Tokens.Out, *r.Tokens.Total, *r.Tokens.Reasoning, r.Tokens.CallsWithUsage)
	}
	if r.Cache.Known != 2 || r.Cache.Hits != 1 || *r.Cache.HitRate != 0.5 || *r.Cache.CachedTokens != 8 || *r.Cache.CacheCreationTokens != 3 {
		t.Errorf("cache = %+v", r.Cache)
	}
	if r.LatencyMS.Count != 5 || *r.LatencyMS.P50 != 50 || *r.LatencyMS.Max != 300 {
		t.Errorf("latency = count %d p50 %v max %v; want 5, 50, 300", r.LatencyMS.Count, *r.LatencyMS.P50, *r.LatencyMS.Max)
	}
	if r.TTFTMS.Count != 3 || *r.TTFTMS.P50 != 10 {
		t.Errorf("ttft = count %d p50 %v; want 3, 10", r.TTFTMS.Count, *r.TTFTMS.P50)
	}

	var order []string
	for _, m := range r.Models {
		if m.Model == nil {
			order = append(order, "<nil>")
		} else {
			order = append(order, *m.Model)
		}
	}
	if want := []string{"m1", "m2", "m0", "<nil>"}; !slices.Equal(order, want) {
		t.Errorf("model order = %v; want %v (most calls first, then name, unknown last)", order, want)
	}
	m2 := r.Models[1]
	if m2.Calls != 2 || m2.Errors != 2 || m2.Tokens.In != nil || m2.Cache.HitRate != nil {
		t.Errorf("m2 = %+v; want 2 calls, 2 errors, unknown tokens and hit rate", m2.Summary)
	}
}

func TestEmptyReportJSON(t *testing.T) {
	var a Accumulator
	b, err := json.Marshal(a.Report())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["models"] == nil {
		t.Errorf("models = null; want [] in %s", b)
	}
	tok := got["tokens"].(map[string]any)
	if tok["in"] != nil {
		t.Errorf("tokens.in = %v; want null (unknown, not 0)", tok["in"])
	}
	if ebc, ok := got["errors_by_category"].(map[string]any); !ok || len(ebc) != 0 {
		t.Errorf("errors_by_category = %v; want {}", got["errors_by_category"])
	}
}

func TestReportIndependentOfOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	models := []string{"a", "b", "c"}
	calls := make([]Call, 500)
	for i := range calls {
		calls[i] = Call{
			Model:     str(models[rng.IntN(len(models))]),
			LatencyMS: f64(math.Round(rng.Float64()*1e5) / 100),
			TTFTMS:    f64(rng.Float64() * 100),
			TokensIn:  i64(rng.Int64N(1000)),
		}
	}
	report := func(cs []Call) []byte {
		var a Accumulator
		for _, c := range cs {
			a.Add(c)
		}
		b, err := json.Marshal(a.Report())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	want := report(calls)
	rng.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
	if got := report(calls); string(got) != string(want) {
		t.Errorf("report changed with call order:\n got %s\nwant %s", got, want)
	}
}

func TestAccumulatorBy(t *testing.T) {
	s := func(v string) *string { return &v }
	calls := []Call{
		{Rollout: "r2", Model: s("a"), Dialect: s("chat")},
		{Rollout: "r1", Model: s("a"), Dialect: s("messages")},
		{Rollout: "r2", Model: s("b"), Dialect: s("chat")},
		{Rollout: "r3", Model: nil, Dialect: nil},
	}
	for _, tc := range []struct {
		by   string
		want []string // group keys in report order; "" is the unknown key
	}{
		{ByRollout, []string{"r2", "r1", "r3"}},
		{ByDialect, []string{"chat", "messages", ""}},
		{ByModel, nil},
		{"", nil},
	} {
		a := Accumulator{By: tc.by}
		for _, c := range calls {
			a.Add(c)
		}
		r := a.Report()
		var got []string
		for _, g := range r.Groups {
			k := ""
			if g.Key != nil {
				k = *g.Key
			}
			got = append(got, k)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("By %q: groups %q, want %q", tc.by, got, tc.want)
		}
		if len(r.Models) != 3 || r.Calls != 4 {
			t.Errorf("By %q: %d models, %d calls; the per-model groups and totals must not change", tc.by, len(r.Models), r.Calls)
		}
		if tc.by == ByRollout && r.Groups[0].Calls != 2 {
			t.Errorf("r2 has %d calls, want 2", r.Groups[0].Calls)
		}
		if wantBy := tc.by; wantBy == ByModel || wantBy == "" {
			if r.By != "" {
				t.Errorf("By %q: report by %q, want none", tc.by, r.By)
			}
		} else if r.By != tc.by {
			t.Errorf("report by %q, want %q", r.By, tc.by)
		}
	}
}

// TestElapsedAndThroughput: the elapsed time runs from the first start to the last end (overlapping
// calls once, gaps included), beside the summed latency; output tokens per second are of the
// elapsed time.
func TestElapsedAndThroughput(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	n := func(v int64) *int64 { return &v }
	a := Accumulator{By: ByRollout}
	// r1: two overlapping calls 100.0-102.0 and 101.0-104.0, then one 110.0-111.0: 11 s elapsed.
	for _, c := range []Call{
		{Rollout: "r1", TokensOut: n(30), LatencyMS: f(2000), StartedAt: f(100), CompletedAt: f(102)},
		{Rollout: "r1", TokensOut: n(40), LatencyMS: f(3000), StartedAt: f(101), CompletedAt: f(104)},
		{Rollout: "r1", TokensOut: n(40), LatencyMS: f(1000), StartedAt: f(110), CompletedAt: f(111)},
		{Rollout: "r2", LatencyMS: f(5)}, // no times, no tokens
	} {
		a.Add(c)
	}
	r := a.Report()
	g := r.Groups[0].Summary
	if *g.ElapsedMS != 11000 || *g.LatencySumMS != 6000 || *g.TokensOutPerSecond != 10 {
		t.Errorf("r1: elapsed %v, latency sum %v, tok/s %v; want 11000, 6000, 10", *g.ElapsedMS, *g.LatencySumMS, *g.TokensOutPerSecond)
	}
	if g := r.Groups[1].Summary; g.ElapsedMS != nil || g.TokensOutPerSecond != nil || *g.LatencySumMS != 5 {
		t.Errorf("r2: %+v", g)
	}
}
