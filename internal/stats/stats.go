package stats

import (
	"cmp"
	"math"
	"slices"
	"sort"
)

// Call is the part of one captured model call (a modelcalls.ModelCallRecord) that run-wide statistics
// need. Pointer fields are nil when the record's field is null (unknown); 0 is a known value.
type Call struct {
	// Rollout is the id of the rollout the call belongs to (its capture file).
	Rollout string
	// Model is the record's "model" (response model, else request model); nil when unknown.
	Model *string
	// Dialect is the record's "dialect" ("responses", "chat", "messages"); nil when unknown.
	Dialect *string
	// ErrorCategory is the record's "error_category" (capture.Exchange lists them); nil for a call
	// without error.
	ErrorCategory *string
	// TokensIn, TokensOut, TokensReasoning, TokensTotal are the record's normalised token counts
	// (tokens_in includes Anthropic's cache reads and writes, which its input_tokens leaves out;
	// docs/format.md, section 7.3).
	TokensIn, TokensOut, TokensReasoning, TokensTotal *int64
	// CacheHit is the record's "cache_hit" (cached_tokens > 0): nil when the usage carried no cache
	// field.
	CacheHit *bool
	// CachedTokens and CacheCreationTokens are token counts; nil when unknown.
	CachedTokens, CacheCreationTokens *int64
	// LatencyMS is "latency_total_ms" and TTFTMS is "latency_ttft_ms", in milliseconds; nil when unknown.
	LatencyMS, TTFTMS *float64
	// StartedAt and CompletedAt are "started_at" and "completed_at": wall clock, seconds since the
	// Unix epoch; nil when unknown.
	StartedAt, CompletedAt *float64
}

// Report is the run-wide result; it is also the JSON object `modelcalls stats --json` prints.
type Report struct {
	// Rollouts is the number of rollouts with a capture file (<id>.capture.jsonl) in the directory.
	Rollouts int `json:"rollouts"`
	// IncompleteRollouts is the number of rollouts with the incomplete marker (<id>.capture.incomplete).
	IncompleteRollouts int `json:"incomplete_rollouts"`
	// DamagedLines is the number of capture lines that could not be turned into a record: not a JSON
	// object, or an envelope key (model_call_id, dialect, model_ref, status_code, ...) of the wrong type.
	DamagedLines int `json:"damaged_lines"`
	// RolloutsWithDamage is the number of rollouts with at least one damaged line.
	RolloutsWithDamage int `json:"rollouts_with_damage"`
	Summary
	// Models holds one summary per distinct model, most calls first, then by name; the unknown model
	// (null) sorts last.
	Models []ModelSummary `json:"models"`
	// By is the grouping of Groups: "rollout" or "dialect"; absent (and Groups too) when the
	// accumulator groups by model only, whose groups are Models.
	By string `json:"by,omitempty"`
	// Groups holds one summary per distinct rollout id or dialect, ordered like Models.
	Groups []GroupSummary `json:"groups,omitempty"`
}

// Groupings an Accumulator can report besides the per-model one (Accumulator.By).
const (
	ByModel   = "model"
	ByRollout = "rollout"
	ByDialect = "dialect"
)

// GroupSummary is the Summary of the calls of one rollout or one dialect.
type GroupSummary struct {
	// Key is the rollout id or dialect; nil (JSON null) for calls whose dialect is unknown.
	Key *string `json:"key"`
	Summary
}

// ModelSummary is the Summary of the calls of one model.
type ModelSummary struct {
	// Model is the model name; nil (JSON null) for calls whose model is unknown.
	Model *string `json:"model"`
	Summary
}

// Summary describes a set of calls.
type Summary struct {
	// Calls is the number of calls (records built from capture lines).
	Calls int `json:"calls"`
	// Errors is the number of calls with a non-null error_category.
	Errors int `json:"errors"`
	// ErrorsByCategory counts calls per error_category (JSON keys sorted); empty when no errors.
	ErrorsByCategory map[string]int `json:"errors_by_category"`
	// Tokens holds token sums.
	Tokens Tokens `json:"tokens"`
	// Cache holds the prompt-cache statistics.
	Cache Cache `json:"cache"`
	// LatencyMS describes latency_total_ms over the calls where it is known, in milliseconds.
	LatencyMS Distribution `json:"latency_ms"`
	// TTFTMS describes latency_ttft_ms over the calls where it is known, in milliseconds.
	TTFTMS Distribution `json:"ttft_ms"`
	// ElapsedMS is the wall-clock time from the first call's started_at to the last call's
	// completed_at, in milliseconds (calls that overlap count once, the gaps between calls count);
	// nil when no call has both.
	ElapsedMS *float64 `json:"elapsed_ms"`
	// LatencySumMS is latency_total_ms summed over the calls where it is known, in milliseconds
	// (calls that overlap count each); nil when none is. Set beside ElapsedMS it says how much of
	// the elapsed time went to waiting for the model.
	LatencySumMS *float64 `json:"latency_sum_ms"`
	// TokensOutPerSecond is Tokens.Out over ElapsedMS, in output tokens per wall-clock second; nil
	// when either is unknown or the elapsed time is 0.
	TokensOutPerSecond *float64 `json:"tokens_out_per_second"`
}

// Tokens are sums of token counts over the calls where the count is known, like NeMo Gym's
// per-rollout aggregation: nil (JSON null) when no call has a value, so "unknown" is never shown as 0.
type Tokens struct {
	In        *int64 `json:"in"`
	Out       *int64 `json:"out"`
	Reasoning *int64 `json:"reasoning"`
	Total     *int64 `json:"total"`
	// CallsWithUsage is the number of calls with a known tokens_total.
	CallsWithUsage int `json:"calls_with_usage"`
}

// Cache holds prompt-cache statistics from each record's cache signal (cache_hit, cached_tokens:
// the first valid cached count of the usage, in NeMo Gym's order, then prompt_cache_hit_tokens).
type Cache struct {
	CacheHits
	// CachedTokens is the sum of cached_tokens over calls where it is known; nil when none is.
	CachedTokens *int64 `json:"cached_tokens"`
	// CacheCreationTokens is the sum of cache_creation_tokens (Anthropic) where known; nil when none is.
	CacheCreationTokens *int64 `json:"cache_creation_tokens"`
}

// CacheHits is the prompt-cache hit rate of a set of calls: hits among the calls whose cache_hit is
// known.
type CacheHits struct {
	// Known is the number of calls whose cache_hit is known (true or false).
	Known int `json:"calls_known"`
	// Hits is the number of calls with cache_hit true.
	Hits int `json:"hits"`
	// HitRate is Hits / Known, in [0, 1]; nil (JSON null) when Known is 0.
	HitRate *float64 `json:"hit_rate"`
}

// NewCacheHits returns the CacheHits of hits among known calls.
func NewCacheHits(known, hits int) CacheHits {
	c := CacheHits{Known: known, Hits: hits}
	if known > 0 {
		rate := float64(hits) / float64(known)
		c.HitRate = &rate
	}
	return c
}

// Distribution summarises a set of durations in milliseconds. Percentiles use the nearest-rank method:
// the p-th percentile of n sorted samples is the sample at 1-based rank ceil(p/100 * n), so every
// percentile is a value that was actually observed. Mean uses compensated (Neumaier) summation.
// All values are nil (JSON null) when Count is 0.
type Distribution struct {
	Count int      `json:"count"`
	Min   *float64 `json:"min"`
	Mean  *float64 `json:"mean"`
	Percentiles
}

// Percentiles are the nearest-rank 50th, 90th and 99th percentiles and the maximum of a set of
// durations, in milliseconds; all nil (JSON null) for an empty set. The viewer's latency histograms
// carry the same four values.
type Percentiles struct {
	P50 *float64 `json:"p50"`
	P90 *float64 `json:"p90"`
	P99 *float64 `json:"p99"`
	Max *float64 `json:"max"`
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of sorted, which must be sorted
// ascending and non-empty: the element at 1-based rank ceil(p/100 * len(sorted)). p <= 0 gives the
// minimum.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	rank := int(math.Ceil(p / 100 * float64(n)))
	rank = max(1, min(rank, n))
	return sorted[rank-1]
}

// Distribute sorts samples in place and summarises them.
func Distribute(samples []float64) Distribution {
	d := Distribution{Count: len(samples)}
	if len(samples) == 0 {
		return d
	}
	slices.Sort(samples)
	p := func(v float64) *float64 { return &v }
	d.Min = p(samples[0])
	d.Max = p(samples[len(samples)-1])
	d.P50 = p(Percentile(samples, 50))
	d.P90 = p(Percentile(samples, 90))
	d.P99 = p(Percentile(samples, 99))
	d.Mean = p(neumaierSum(samples) / float64(len(samples)))
	return d
}

// neumaierSum is the compensated (FloatSum) sum of xs.
func neumaierSum(xs []float64) float64 {
	var f FloatSum
	for _, x := range xs {
		f.Add(x)
	}
	return f.Sum()
}

// Accumulator collects calls and rollout-level counts; the zero value is ready to use. It is not
// safe for concurrent use. The Report does not depend on the order calls were added in (samples are
// sorted before the mean is summed).
type Accumulator struct {
	// By adds a second grouping to the report (Report.Groups): ByRollout or ByDialect. "" and
	// ByModel report the per-model groups only. Set it before the first Add.
	By string

	rollouts, incomplete, damaged, rolloutsDamaged int
	all                                            acc
	models                                         groups
	other                                          groups
}

// groups accumulates one Summary per key; calls with an unknown key go to unknown.
type groups struct {
	byKey   map[string]*acc
	unknown *acc
}

func (g *groups) add(key *string, c Call) {
	var m *acc
	if key == nil {
		if g.unknown == nil {
			g.unknown = &acc{}
		}
		m = g.unknown
	} else {
		if g.byKey == nil {
			g.byKey = map[string]*acc{}
		}
		m = g.byKey[*key]
		if m == nil {
			m = &acc{}
			g.byKey[*key] = m
		}
	}
	m.add(c)
}

// each calls fn for every group, most calls first, ties by key, the unknown key last.
func (g *groups) each(fn func(key *string, s Summary)) {
	keys := make([]string, 0, len(g.byKey))
	for k := range g.byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ci, cj := g.byKey[keys[i]].calls, g.byKey[keys[j]].calls
		if ci != cj {
			return ci > cj
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		fn(&k, g.byKey[k].summary())
	}
	if g.unknown != nil {
		fn(nil, g.unknown.summary())
	}
}

// AddRollout records one rollout: whether it carries the incomplete marker and how many of its lines
// were damaged. Call it once per capture file, in addition to Add for each of its calls.
func (a *Accumulator) AddRollout(incomplete bool, damagedLines int) {
	a.rollouts++
	if incomplete {
		a.incomplete++
	}
	if damagedLines > 0 {
		a.damaged += damagedLines
		a.rolloutsDamaged++
	}
}

// Add records one call.
func (a *Accumulator) Add(c Call) {
	a.all.add(c)
	a.models.add(c.Model, c)
	switch a.By {
	case ByRollout:
		a.other.add(&c.Rollout, c)
	case ByDialect:
		a.other.add(c.Dialect, c)
	}
}

// Report computes the result. The accumulator may keep receiving calls afterwards.
func (a *Accumulator) Report() Report {
	r := Report{
		Rollouts:           a.rollouts,
		IncompleteRollouts: a.incomplete,
		DamagedLines:       a.damaged,
		RolloutsWithDamage: a.rolloutsDamaged,
		Summary:            a.all.summary(),
		Models:             []ModelSummary{},
	}
	a.models.each(func(key *string, s Summary) { r.Models = append(r.Models, ModelSummary{Model: key, Summary: s}) })
	if a.By == ByRollout || a.By == ByDialect {
		r.By = a.By
		r.Groups = []GroupSummary{}
		a.other.each(func(key *string, s Summary) { r.Groups = append(r.Groups, GroupSummary{Key: key, Summary: s}) })
	}
	return r
}

// acc accumulates one Summary.
type acc struct {
	calls, errors               int
	byCategory                  map[string]int
	in, out, reasoning, total   IntSum
	cached, creation            IntSum
	withUsage, cacheKnown, hits int
	latency, ttft               []float64
	first, last                 float64 // earliest started_at and latest completed_at (timed > 0)
	timed                       int     // calls with both
}

func (m *acc) add(c Call) {
	m.calls++
	if c.ErrorCategory != nil {
		m.errors++
		if m.byCategory == nil {
			m.byCategory = map[string]int{}
		}
		m.byCategory[*c.ErrorCategory]++
	}
	m.in.Add(c.TokensIn)
	m.out.Add(c.TokensOut)
	m.reasoning.Add(c.TokensReasoning)
	m.total.Add(c.TokensTotal)
	if c.TokensTotal != nil {
		m.withUsage++
	}
	m.cached.Add(c.CachedTokens)
	m.creation.Add(c.CacheCreationTokens)
	if c.CacheHit != nil {
		m.cacheKnown++
		if *c.CacheHit {
			m.hits++
		}
	}
	if c.LatencyMS != nil && !math.IsNaN(*c.LatencyMS) {
		m.latency = append(m.latency, *c.LatencyMS)
	}
	if c.TTFTMS != nil && !math.IsNaN(*c.TTFTMS) {
		m.ttft = append(m.ttft, *c.TTFTMS)
	}
	if c.StartedAt != nil && c.CompletedAt != nil && !math.IsNaN(*c.StartedAt) && !math.IsNaN(*c.CompletedAt) {
		if m.timed == 0 || *c.StartedAt < m.first {
			m.first = *c.StartedAt
		}
		if m.timed == 0 || *c.CompletedAt > m.last {
			m.last = *c.CompletedAt
		}
		m.timed++
	}
}

// Elapsed returns the wall-clock span of calls that ran from first (earliest started_at) to last
// (latest completed_at), in milliseconds, and the output tokens per second of that span; the
// latter is nil when out is nil or the span is not positive.
func Elapsed(first, last float64, out *int64) (ms float64, perSecond *float64) {
	ms = max(0, last-first) * 1000
	if out != nil && ms > 0 {
		v := float64(*out) / (ms / 1000)
		perSecond = &v
	}
	return ms, perSecond
}

func (m *acc) summary() Summary {
	s := Summary{
		Calls:            m.calls,
		Errors:           m.errors,
		ErrorsByCategory: map[string]int{},
		Tokens: Tokens{
			In: m.in.Result(), Out: m.out.Result(), Reasoning: m.reasoning.Result(), Total: m.total.Result(),
			CallsWithUsage: m.withUsage,
		},
		Cache: Cache{
			CacheHits:    NewCacheHits(m.cacheKnown, m.hits),
			CachedTokens: m.cached.Result(), CacheCreationTokens: m.creation.Result(),
		},
		LatencyMS: Distribute(slices.Clone(m.latency)),
		TTFTMS:    Distribute(slices.Clone(m.ttft)),
	}
	if len(m.latency) > 0 {
		// Summed in sorted order, compensated, so the result does not depend on the calls' order.
		sorted := slices.Clone(m.latency)
		slices.Sort(sorted)
		sum := neumaierSum(sorted)
		s.LatencySumMS = &sum
	}
	if m.timed > 0 {
		ms, perSecond := Elapsed(m.first, m.last, s.Tokens.Out)
		s.ElapsedMS, s.TokensOutPerSecond = &ms, perSecond
	}
	for k, v := range m.byCategory {
		s.ErrorsByCategory[k] = v
	}
	return s
}

// Categories returns the keys of ErrorsByCategory, most frequent first, ties by name (ByCount).
func (s Summary) Categories() []string { return ByCount(s.ErrorsByCategory) }

// ByCount returns the keys of counts, largest count first, ties by name: the order in which
// `modelcalls stats` and the viewer list error categories.
func ByCount(counts map[string]int) []string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return keys
}
