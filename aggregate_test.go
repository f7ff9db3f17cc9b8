package modelcalls

import (
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
)

func TestAggregateRecords(t *testing.T) {
	lat := func(v float64) *float64 { return &v }
	tok := func(v int64) *int64 { return &v }
	cases := []struct {
		name  string
		calls []ModelCallRecord
		want  string
	}{
		{"no calls", nil,
			`{"tokens_in":null,"tokens_out":null,"tokens_reasoning":null,"tokens_total":null,"cached_tokens":null,"latency_total_ms":null,"num_calls":0}`},
		{"unknown stays null, 0 is a value", []ModelCallRecord{{TokensIn: tok(0)}, {}},
			`{"tokens_in":0,"tokens_out":null,"tokens_reasoning":null,"tokens_total":null,"cached_tokens":null,"latency_total_ms":null,"num_calls":2}`},
		{"partial knowledge sums what is known", []ModelCallRecord{
			{TokensIn: tok(10), TokensOut: tok(2), TokensTotal: tok(12), CachedTokens: tok(4), LatencyTotalMS: lat(1.5), CacheCreationTokens: tok(99)},
			{TokensIn: tok(5), TokensReasoning: tok(1), LatencyTotalMS: lat(2)},
			{}},
			`{"tokens_in":15,"tokens_out":2,"tokens_reasoning":1,"tokens_total":12,"cached_tokens":4,"latency_total_ms":3.5,"num_calls":3}`},
		{"compensated float sum: 0.1+0.2+0.3 == 0.6", []ModelCallRecord{{LatencyTotalMS: lat(0.1)}, {LatencyTotalMS: lat(0.2)}, {LatencyTotalMS: lat(0.3)}},
			`{"tokens_in":null,"tokens_out":null,"tokens_reasoning":null,"tokens_total":null,"cached_tokens":null,"latency_total_ms":0.6,"num_calls":3}`},
		{"large and small magnitudes", []ModelCallRecord{{LatencyTotalMS: lat(1e16)}, {LatencyTotalMS: lat(1)}, {LatencyTotalMS: lat(-1e16)}},
			`{"tokens_in":null,"tokens_out":null,"tokens_reasoning":null,"tokens_total":null,"cached_tokens":null,"latency_total_ms":1.0,"num_calls":3}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := AggregateRecords(c.calls)
			if got := string(m.AppendJSON(nil)); got != c.want {
				t.Errorf("\n got %s\nwant %s", got, c.want)
			}
			if b, _ := m.MarshalJSON(); string(b) != c.want {
				t.Errorf("MarshalJSON differs: %s", b)
			}
		})
	}
	a, b, c := 0.1, 0.2, 0.3 // variables: constant arithmetic would be exact
	if a+b+c == 0.6 {
		t.Fatal("the float case no longer exercises compensation")
	}
}

func TestAggregateMetrics(t *testing.T) {
	dir := t.TempDir()
	capturefile.WriteCapture(t, dir, "r", ok("a", 10)+"\n"+ok("b", 5)+"\n")
	m, err := AggregateMetrics(capturefile.OpenStore(t, dir), "r")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(m.AppendJSON(nil)); got != `{"tokens_in":15,"tokens_out":2,"tokens_reasoning":null,"tokens_total":17,"cached_tokens":null,"latency_total_ms":3.0,"num_calls":2}` {
		t.Errorf("got %s", got)
	}
}
