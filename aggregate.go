package modelcalls

import (
	"strconv"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/stats"
	"github.com/modelcalls/modelcalls/record"
)

// Metrics are the per-rollout totals of its calls, as NeMo Gym aggregates them: each sum covers the calls whose
// value is known; a sum is nil when no call has a value (0 is a value). NumCalls counts every record.
// cache_creation_tokens is not aggregated. JSON keys (AppendJSON) are, in order: tokens_in,
// tokens_out, tokens_reasoning, tokens_total, cached_tokens (tokens), latency_total_ms
// (milliseconds), num_calls.
type Metrics struct {
	TokensIn        *int64
	TokensOut       *int64
	TokensReasoning *int64
	TokensTotal     *int64
	CachedTokens    *int64
	LatencyTotalMS  *float64
	NumCalls        int
}

// AggregateRecords ports aggregate_model_call_records: sums of the token counts and latencies of
// calls, nil where no call knows the value; partial knowledge gives a partial sum, unflagged. Float
// sums are compensated (Neumaier, as Python ≥ 3.12's sum, which NeMo Gym's aggregation relies on),
// so 0.1 + 0.2 + 0.3 gives 0.6 whatever the order of the calls.
func AggregateRecords(calls []ModelCallRecord) Metrics {
	var m Metrics
	var tin, tout, treason, ttotal, cached stats.IntSum
	var latency stats.FloatSum
	for i := range calls {
		c := &calls[i]
		tin.Add(c.TokensIn)
		tout.Add(c.TokensOut)
		treason.Add(c.TokensReasoning)
		ttotal.Add(c.TokensTotal)
		cached.Add(c.CachedTokens)
		latency.AddOpt(c.LatencyTotalMS)
	}
	m.TokensIn, m.TokensOut, m.TokensReasoning = tin.Result(), tout.Result(), treason.Result()
	m.TokensTotal, m.CachedTokens = ttotal.Result(), cached.Result()
	m.LatencyTotalMS = latency.Result()
	m.NumCalls = len(calls)
	return m
}

// AggregateMetrics ports aggregate_model_call_metrics: AggregateRecords over the strict read of
// rollout id (ReadRecords). A damaged line or a read error is returned as an error.
func AggregateMetrics(store *capture.Store, id string) (Metrics, error) {
	calls, err := record.ReadRecords(store, id)
	if err != nil {
		return Metrics{}, err
	}
	return AggregateRecords(calls), nil
}

// AppendJSON appends the metrics as one compact JSON object.
func (m *Metrics) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"tokens_in":`...)
	dst = appendOptInt64(dst, m.TokensIn)
	dst = append(dst, `,"tokens_out":`...)
	dst = appendOptInt64(dst, m.TokensOut)
	dst = append(dst, `,"tokens_reasoning":`...)
	dst = appendOptInt64(dst, m.TokensReasoning)
	dst = append(dst, `,"tokens_total":`...)
	dst = appendOptInt64(dst, m.TokensTotal)
	dst = append(dst, `,"cached_tokens":`...)
	dst = appendOptInt64(dst, m.CachedTokens)
	dst = append(dst, `,"latency_total_ms":`...)
	dst = appendOptFloat(dst, m.LatencyTotalMS)
	dst = append(dst, `,"num_calls":`...)
	dst = strconv.AppendInt(dst, int64(m.NumCalls), 10)
	return append(dst, '}')
}

// MarshalJSON returns AppendJSON(nil).
func (m Metrics) MarshalJSON() ([]byte, error) {
	return m.AppendJSON(nil), nil
}

// appendOptInt64 and appendOptFloat append null for nil, else the value as a record writes it.
func appendOptInt64(dst []byte, n *int64) []byte {
	if n == nil {
		return append(dst, "null"...)
	}
	return strconv.AppendInt(dst, *n, 10)
}

func appendOptFloat(dst []byte, f *float64) []byte {
	if f == nil {
		return append(dst, "null"...)
	}
	return record.AppendFloat(dst, *f)
}
