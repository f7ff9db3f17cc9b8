package stats

import "strconv"

// Decimals that Report.Rounded keeps, the ones `modelcalls stats` prints in its TSV (the table shows
// the hit rate as a percentage with one decimal, which is the same figure cut once more).
const (
	// MSDecimals is the precision of every millisecond value (min, mean, percentiles, max): 0.01 ms,
	// the precision the gateway records latency_total_ms and latency_ttft_ms in.
	MSDecimals = 2
	// RatioDecimals is the precision of every ratio in [0, 1] (hit_rate).
	RatioDecimals = 4
	// RateDecimals is the precision of a rate per second (tokens_out_per_second).
	RateDecimals = 2
)

// Rounded returns a copy of r with every number that is not a count rounded to the precision the
// text output shows (MSDecimals, RatioDecimals), so `modelcalls stats --json` prints a mean of 1.3,
// not the float sum's 1.2999999999999998. Rounding is strconv.FormatFloat's ('f', round half to
// even on the exact binary value), the same as the table's and TSV's, so the JSON and the text
// output never disagree on a digit. r itself is not changed.
func (r Report) Rounded() Report {
	r.Summary = r.Summary.rounded()
	models := make([]ModelSummary, len(r.Models))
	for i, m := range r.Models {
		models[i] = ModelSummary{Model: m.Model, Summary: m.Summary.rounded()}
	}
	if r.Models != nil {
		r.Models = models
	}
	if r.Groups != nil {
		groups := make([]GroupSummary, len(r.Groups))
		for i, g := range r.Groups {
			groups[i] = GroupSummary{Key: g.Key, Summary: g.Summary.rounded()}
		}
		r.Groups = groups
	}
	return r
}

func (s Summary) rounded() Summary {
	s.Cache.HitRate = roundTo(s.Cache.HitRate, RatioDecimals)
	s.LatencyMS = s.LatencyMS.rounded()
	s.TTFTMS = s.TTFTMS.rounded()
	s.ElapsedMS = roundTo(s.ElapsedMS, MSDecimals)
	s.LatencySumMS = roundTo(s.LatencySumMS, MSDecimals)
	s.TokensOutPerSecond = roundTo(s.TokensOutPerSecond, RateDecimals)
	return s
}

func (d Distribution) rounded() Distribution {
	for _, p := range []**float64{&d.Min, &d.Mean, &d.P50, &d.P90, &d.P99, &d.Max} {
		*p = roundTo(*p, MSDecimals)
	}
	return d
}

// roundTo returns a new pointer to *p rounded to decimals places; nil for nil.
func roundTo(p *float64, decimals int) *float64 {
	if p == nil {
		return nil
	}
	// FormatFloat's output always parses back (±Inf and NaN too; a Report never holds them).
	v, _ := strconv.ParseFloat(strconv.FormatFloat(*p, 'f', decimals, 64), 64)
	return &v
}
