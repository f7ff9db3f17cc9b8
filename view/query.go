package view

import (
	"cmp"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/modelcalls/modelcalls/internal/stats"
)

// Overview is the run overview (GET /api/overview).
type Overview struct {
	Version      uint64   `json:"version"`
	Progress     Progress `json:"progress"`
	Dirs         []string `json:"capture_dirs"`
	RolloutsFile string   `json:"rollouts_file"` // "" without --rollouts

	Rollouts          int `json:"rollouts"`            // rollouts known (capture file, marker, claims or record)
	RolloutsCaptured  int `json:"rollouts_captured"`   // rollouts with a capture file
	RolloutsNoCapture int `json:"rollouts_no_capture"` // rollouts in the --rollouts file without any capture
	Calls             int `json:"calls"`               // readable capture lines
	CallsWithError    int `json:"calls_with_error"`
	PendingCalls      int `json:"pending_calls"`   // live claims, all rollouts
	AbandonedCalls    int `json:"abandoned_calls"` // stale claims, all rollouts
	DamagedLines      int `json:"damaged_lines"`

	Errors   []Count         `json:"errors"` // calls per error_category, most first
	Tokens   Tokens          `json:"tokens"`
	Cache    stats.CacheHits `json:"cache"`      // the prompt-cache signal
	Latency  Hist            `json:"latency_ms"` // latency_total_ms of every call that has one
	TTFT     Hist            `json:"ttft_ms"`    // latency_ttft_ms of every call that has one
	OverTime OverTime        `json:"calls_over_time"`
	Models   []Group         `json:"models"`   // per model, most calls first; unknown model last
	Dialects []Group         `json:"dialects"` // per dialect, most calls first
	Gaps     Gaps            `json:"gaps"`
}

// Count is a named counter.
type Count struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// Tokens are token sums over the calls where each count is known; a sum is null when no call knows
// its count (0 is a count).
type Tokens struct {
	In            *int64 `json:"in"`
	Out           *int64 `json:"out"`
	Cached        *int64 `json:"cached"`
	Reasoning     *int64 `json:"reasoning"`
	CacheCreation *int64 `json:"cache_creation"`
}

// Hist is a histogram of durations in milliseconds: Counts[i] counts values v with
// Edges[i] <= v < Edges[i+1]; the last bucket has no upper edge. Percentiles are nearest-rank.
type Hist struct {
	Count  int       `json:"count"`
	Edges  []float64 `json:"edges"`
	Counts []int     `json:"counts"`
	stats.Percentiles
}

// OverTime counts calls by started_at in equal buckets of BucketS seconds from Start.
type OverTime struct {
	Start   *float64 `json:"start"` // seconds since the Unix epoch; null without calls
	BucketS float64  `json:"bucket_s"`
	Calls   []int    `json:"calls"`
	Errors  []int    `json:"errors"`
}

// Group is the summary of the calls of one model or dialect.
type Group struct {
	Name         *string  `json:"name"` // null: unknown
	Calls        int      `json:"calls"`
	Errors       int      `json:"errors"`
	Tokens       Tokens   `json:"tokens"`
	LatencyP50MS *float64 `json:"latency_p50_ms"`
	TTFTP50MS    *float64 `json:"ttft_p50_ms"`
	latencies    []float64
	ttfts        []float64
}

// Gaps names the rollouts that need a look: at most 50 ids each, with the full count.
type Gaps struct {
	Pending         []string `json:"pending"` // live claims: a call is in flight
	PendingCount    int      `json:"pending_count"`
	Incomplete      []string `json:"incomplete"` // the incomplete marker: a capture write failed
	IncompleteCount int      `json:"incomplete_count"`
	Unreadable      []string `json:"unreadable"` // damaged lines
	UnreadableCount int      `json:"unreadable_count"`
	Abandoned       []string `json:"abandoned"` // stale claims: a write that will never land
	AbandonedCount  int      `json:"abandoned_count"`
	NoCapture       []string `json:"no_capture"` // in the --rollouts file, nothing captured
	NoCaptureCount  int      `json:"no_capture_count"`
}

// histEdges are the histogram bucket edges in milliseconds.
var histEdges = []float64{0, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000}

const maxGapIDs = 50

// Overview computes the run overview; it is cached until the index changes.
func (x *Index) Overview() *Overview {
	x.mu.RLock()
	if x.overview != nil && x.ovVer == x.version {
		o := *x.overview
		o.Progress = x.progress
		x.mu.RUnlock()
		return &o
	}
	x.strMu.Lock()
	strs := x.strs // appends never change the elements this header covers
	x.strMu.Unlock()
	// Every list is non-nil, so that it encodes as [] and never as null: a page iterating the list
	// of a clean run (no error, no gap, no call yet) must find an empty list.
	o := &Overview{Version: x.version, Progress: x.progress, RolloutsFile: x.rolloutsPath,
		Dirs: []string{}, Errors: []Count{}, OverTime: OverTime{Calls: []int{}, Errors: []int{}},
		Gaps: Gaps{Pending: []string{}, Incomplete: []string{}, Unreadable: []string{}, Abandoned: []string{}, NoCapture: []string{}}}
	for _, st := range x.stores {
		o.Dirs = append(o.Dirs, st.Dir())
	}
	ids := make([]string, 0, len(x.entries))
	for id := range x.entries {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	errs := map[string]int{}
	models, dialects := map[uint32]*Group{}, map[uint32]*Group{}
	var lat, ttft []float64
	var cacheKnown, cacheHits int
	minStart, maxStart := math.Inf(1), math.Inf(-1)
	addGap := func(list *[]string, n *int, id string) {
		*n++
		if len(*list) < maxGapIDs {
			*list = append(*list, id)
		}
	}
	for _, id := range ids {
		e := x.entries[id]
		s := &e.sum
		o.Rollouts++
		if s.HasCapture {
			o.RolloutsCaptured++
		} else if s.InRecords && !s.Incomplete && s.Pending == 0 {
			o.RolloutsNoCapture++
			addGap(&o.Gaps.NoCapture, &o.Gaps.NoCaptureCount, id)
		}
		o.Calls += s.Calls
		o.PendingCalls += s.Pending
		o.AbandonedCalls += s.Abandoned
		o.DamagedLines += s.DamagedLines
		if s.Pending > 0 {
			addGap(&o.Gaps.Pending, &o.Gaps.PendingCount, id)
		}
		if s.Incomplete {
			addGap(&o.Gaps.Incomplete, &o.Gaps.IncompleteCount, id)
		}
		if s.DamagedLines > 0 {
			addGap(&o.Gaps.Unreadable, &o.Gaps.UnreadableCount, id)
		}
		if s.Abandoned > 0 {
			addGap(&o.Gaps.Abandoned, &o.Gaps.AbandonedCount, id)
		}
		for i := range e.calls {
			c := &e.calls[i]
			for _, g := range []*Group{group(models, c.model, strs), group(dialects, c.dialect, strs)} {
				g.Calls++
				addTokens(&g.Tokens, c)
				if c.errcat != 0 {
					g.Errors++
				}
				if !math.IsNaN(c.latency) {
					g.latencies = append(g.latencies, c.latency)
				}
				if !math.IsNaN(c.ttft) {
					g.ttfts = append(g.ttfts, c.ttft)
				}
			}
			addTokens(&o.Tokens, c)
			if c.errcat != 0 {
				o.CallsWithError++
				errs[strs[c.errcat]]++
			}
			if c.cacheHit >= 0 {
				cacheKnown++
				cacheHits += int(c.cacheHit)
			}
			if !math.IsNaN(c.latency) {
				lat = append(lat, c.latency)
			}
			if !math.IsNaN(c.ttft) {
				ttft = append(ttft, c.ttft)
			}
			if !math.IsNaN(c.start) {
				minStart, maxStart = min(minStart, c.start), max(maxStart, c.start)
			}
		}
	}
	o.Cache = stats.NewCacheHits(cacheKnown, cacheHits)
	o.Latency, o.TTFT = histogram(lat), histogram(ttft)
	if !math.IsInf(minStart, 1) {
		o.OverTime.Start = ptr(minStart)
		span := maxStart - minStart
		o.OverTime.BucketS = niceBucket(span / 60)
		n := int(span/o.OverTime.BucketS) + 1
		o.OverTime.Calls, o.OverTime.Errors = make([]int, n), make([]int, n)
		for _, e := range x.entries {
			for i := range e.calls {
				c := &e.calls[i]
				if math.IsNaN(c.start) {
					continue
				}
				b := min(int((c.start-minStart)/o.OverTime.BucketS), n-1)
				o.OverTime.Calls[b]++
				if c.errcat != 0 {
					o.OverTime.Errors[b]++
				}
			}
		}
	}
	for _, name := range stats.ByCount(errs) {
		o.Errors = append(o.Errors, Count{name, errs[name]})
	}
	o.Models, o.Dialects = groups(models), groups(dialects)
	x.mu.RUnlock()

	x.mu.Lock()
	if o.Version == x.version {
		x.overview, x.ovVer = o, o.Version
	}
	x.mu.Unlock()
	return o
}

func group(m map[uint32]*Group, k uint32, strs []string) *Group {
	g := m[k]
	if g == nil {
		g = &Group{}
		if k != 0 {
			g.Name = ptr(strs[k])
		}
		m[k] = g
	}
	return g
}

func groups(m map[uint32]*Group) []Group {
	out := make([]Group, 0, len(m))
	for _, g := range m {
		if len(g.latencies) > 0 {
			g.LatencyP50MS = stats.Distribute(g.latencies).P50
		}
		if len(g.ttfts) > 0 {
			g.TTFTP50MS = stats.Distribute(g.ttfts).P50
		}
		g.latencies, g.ttfts = nil, nil
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b Group) int {
		if (a.Name == nil) != (b.Name == nil) {
			if a.Name == nil {
				return 1
			}
			return -1
		}
		if c := b.Calls - a.Calls; c != 0 {
			return c
		}
		if a.Name == nil {
			return 0
		}
		return strings.Compare(*a.Name, *b.Name)
	})
	return out
}

func addTokens(t *Tokens, c *callStat) {
	addKnown(&t.In, c.in)
	addKnown(&t.Out, c.out)
	addKnown(&t.Cached, c.cached)
	addKnown(&t.Reasoning, c.reasoning)
	addKnown(&t.CacheCreation, c.creation)
}

func histogram(samples []float64) Hist {
	h := Hist{Count: len(samples), Edges: histEdges, Counts: make([]int, len(histEdges))}
	for _, v := range samples {
		i := sort.SearchFloat64s(histEdges, v)
		if i == len(histEdges) || histEdges[i] > v {
			i--
		}
		h.Counts[max(i, 0)]++
	}
	if len(samples) > 0 {
		h.Percentiles = stats.Distribute(samples).Percentiles
	}
	return h
}

// niceBucket rounds a bucket width in seconds up to 1, 2, 5, 10, 15, 30 s, 1, 2, 5, 10, 15, 30 min,
// 1, 2, 6, 12 h or a whole number of days.
func niceBucket(s float64) float64 {
	for _, b := range []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400} {
		if s <= b {
			return b
		}
	}
	return math.Ceil(s/86400) * 86400
}

// ListQuery selects a page of the rollout list.
type ListQuery struct {
	// Sort is a sortable field (SortFields) or a field found in the rollout records (bare or as
	// record.FIELD); "" = id. Any other name is an error.
	Sort   string
	Desc   bool
	Filter string // see ParseFilter
	Offset int
	Limit  int // 1..500; 0 = 50
}

// ListResult is one page of the rollout list (GET /api/rollouts).
type ListResult struct {
	Version      uint64           `json:"version"`
	Progress     Progress         `json:"progress"`
	Total        int              `json:"total"`   // rollouts indexed
	Matched      int              `json:"matched"` // rollouts the filter keeps
	Offset       int              `json:"offset"`
	Limit        int              `json:"limit"`
	Sort         string           `json:"sort"`
	Order        string           `json:"order"` // "asc" or "desc"
	Rows         []RolloutSummary `json:"rows"`
	Fields       []string         `json:"fields"`        // the sortable and filterable fields of a row
	RecordFields []string         `json:"record_fields"` // scalar fields found in the --rollouts file
}

// SortFields are the RolloutSummary fields the list sorts and filters on.
var SortFields = []string{"id", "calls", "errors", "pending", "abandoned", "damaged_lines", "incomplete",
	"tokens_in", "tokens_out", "tokens_cached", "tokens_reasoning", "latency_ms", "max_ttft_ms",
	"started_at", "ended_at", "duration_s", "model", "dialect", "dir"}

// summaryFields maps each of SortFields to the index of the RolloutSummary field of that JSON name.
var summaryFields = func() map[string]int {
	t := reflect.TypeFor[RolloutSummary]()
	m := map[string]int{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if slices.Contains(SortFields, name) {
			m[name] = i
		}
	}
	if len(m) != len(SortFields) {
		panic("view: a sort field names no RolloutSummary field")
	}
	return m
}()

// field returns a row's value of name: float64 (any number), string, bool or nil (unknown: a null
// summary field, or a record field the rollout's record lacks).
func (s *RolloutSummary) field(name string, recs map[string]*recordFields) any {
	if i, ok := summaryFields[name]; ok {
		return scalar(reflect.ValueOf(s).Elem().Field(i))
	}
	rf := recs[s.ID]
	if rf == nil {
		return nil
	}
	return rf.val[strings.TrimPrefix(name, "record.")]
}

// scalar is a summary field's value as filters and sorting compare it: numbers as float64, nil for
// a nil pointer.
func scalar(v reflect.Value) any {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		return float64(v.Int())
	case reflect.Float64:
		return v.Float()
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return v.Bool()
	}
	return nil
}

// filterTerm is one term of a filter: field op value, or a bare word (op "").
type filterTerm struct {
	field, op, value string
	num              float64
	isNum            bool
}

var termRe = regexp.MustCompile(`^([A-Za-z0-9_.\-]+)(>=|<=|!=|=|>|<|~)(.*)$`)

// ParseFilter parses a filter: space-separated terms, all of which must hold. A term is
// FIELD OP VALUE with OP one of = != > >= < <= ~ (substring, case-insensitive), FIELD a sortable
// field or a rollout-record field (optionally written record.FIELD); or a bare word, which must
// occur (case-insensitive) in the rollout id or model. Numbers compare as numbers, everything else
// as text; true/false match booleans and "null" an unknown value.
func ParseFilter(s string) ([]filterTerm, error) {
	var terms []filterTerm
	for _, w := range strings.Fields(s) {
		m := termRe.FindStringSubmatch(w)
		if m == nil {
			terms = append(terms, filterTerm{value: strings.ToLower(w)})
			continue
		}
		t := filterTerm{field: m[1], op: m[2], value: m[3]}
		if f, err := strconv.ParseFloat(t.value, 64); err == nil {
			t.num, t.isNum = f, true
		} else if t.op != "=" && t.op != "!=" && t.op != "~" {
			return nil, fmt.Errorf("filter %q: %s needs a number", w, t.op)
		}
		terms = append(terms, t)
	}
	return terms, nil
}

func (t *filterTerm) match(s *RolloutSummary, recs map[string]*recordFields) bool {
	if t.field == "" {
		return strings.Contains(strings.ToLower(s.ID), t.value) ||
			(s.Model != nil && strings.Contains(strings.ToLower(*s.Model), t.value))
	}
	v := s.field(t.field, recs)
	if t.op == "~" {
		return v != nil && strings.Contains(strings.ToLower(fmt.Sprint(v)), strings.ToLower(t.value))
	}
	if v == nil {
		if t.value == "null" {
			return t.op == "="
		}
		return t.op == "!="
	}
	var want any // the term's value in v's type
	switch v.(type) {
	case float64:
		if !t.isNum {
			return t.op == "!="
		}
		want = t.num
	case bool:
		b, err := strconv.ParseBool(t.value)
		if err != nil {
			return t.op == "!="
		}
		if t.op != "=" && t.op != "!=" {
			return false // booleans are equal or not, never ordered
		}
		want = b
	case string:
		want = t.value
	default:
		return false
	}
	c := compareValues(v, want)
	switch t.op {
	case "=":
		return c == 0
	case "!=":
		return c != 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	case "<":
		return c < 0
	default:
		return c <= 0
	}
}

// compareValues orders two field values: numbers, then booleans (false first), then text; nil last
// in both orders (handled by the caller).
func compareValues(a, b any) int {
	rank := func(v any) int {
		switch v.(type) {
		case float64:
			return 0
		case bool:
			return 1
		default:
			return 2
		}
	}
	if r := rank(a) - rank(b); r != 0 {
		return r
	}
	switch a := a.(type) {
	case float64:
		return cmp.Compare(a, b.(float64))
	case bool:
		bb := b.(bool)
		if a == bb {
			return 0
		}
		if !a {
			return -1
		}
		return 1
	default:
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	}
}

// List filters, sorts and pages the indexed rollouts. Only summaries are touched: no capture file
// is read to answer.
func (x *Index) List(q ListQuery) (*ListResult, error) {
	terms, err := ParseFilter(q.Filter)
	if err != nil {
		return nil, err
	}
	if q.Limit <= 0 {
		q.Limit = 50
	}
	q.Limit = min(q.Limit, 500)
	q.Offset = max(q.Offset, 0)
	if q.Sort == "" {
		q.Sort = "id"
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, t := range terms {
		if t.field != "" && !x.knownField(t.field) {
			return nil, x.unknownField(fmt.Sprintf("filter %q", t.field+t.op+t.value), t.field)
		}
	}
	if !slices.Contains(SortFields, q.Sort) && !slices.Contains(x.recKeys, strings.TrimPrefix(q.Sort, "record.")) {
		recs := "none: no --rollouts file"
		if x.rolloutsPath != "" {
			recs = "none found"
			if len(x.recKeys) > 0 {
				recs = strings.Join(x.recKeys, ", ")
			}
		}
		return nil, fmt.Errorf("sort %q: want a list field (%s) or a field of the --rollouts records, bare or as record.FIELD (%s)",
			q.Sort, strings.Join(SortFields, ", "), recs)
	}
	res := &ListResult{Version: x.version, Progress: x.progress, Total: len(x.entries), Offset: q.Offset,
		Limit: q.Limit, Sort: q.Sort, Order: "asc", Fields: SortFields, RecordFields: x.recKeys}
	if res.RecordFields == nil {
		res.RecordFields = []string{}
	}
	if q.Desc {
		res.Order = "desc"
	}
	type row struct {
		e   *entry
		key any
	}
	rows := make([]row, 0, len(x.entries))
outer:
	for _, e := range x.entries {
		for i := range terms {
			if !terms[i].match(&e.sum, x.records) {
				continue outer
			}
		}
		rows = append(rows, row{e, e.sum.field(q.Sort, x.records)})
	}
	res.Matched = len(rows)
	slices.SortFunc(rows, func(a, b row) int {
		if (a.key == nil) != (b.key == nil) {
			if a.key == nil {
				return 1
			}
			return -1
		}
		c := 0
		if a.key != nil {
			c = compareValues(a.key, b.key)
		}
		if q.Desc {
			c = -c
		}
		return cmp.Or(c, strings.Compare(a.e.sum.ID, b.e.sum.ID))
	})
	end := min(q.Offset+q.Limit, len(rows))
	res.Rows = []RolloutSummary{}
	for i := q.Offset; i < end; i++ {
		res.Rows = append(res.Rows, rows[i].e.sum)
	}
	return res, nil
}

// knownField reports whether name is a list field or a field of the --rollouts records (bare or as
// record.FIELD). x.mu is held.
func (x *Index) knownField(name string) bool {
	return slices.Contains(SortFields, name) || slices.Contains(x.recKeys, strings.TrimPrefix(name, "record."))
}

// unknownField is the error of a filter term on a field no row has: it names the field, the
// closest known field when one is a typo away, and the fields there are. x.mu is held.
func (x *Index) unknownField(what, name string) error {
	known := append(slices.Clone(SortFields), x.recKeys...)
	hint := ""
	best, bestD := "", 3 // at most two edits away
	for _, k := range known {
		if d := editDistance(strings.ToLower(strings.TrimPrefix(name, "record.")), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", best)
	}
	recs := "none: no --rollouts file"
	if x.rolloutsPath != "" {
		recs = "none found"
		if len(x.recKeys) > 0 {
			recs = strings.Join(x.recKeys, ", ")
		}
	}
	return fmt.Errorf("%s: unknown field %q%s; list fields: %s; --rollouts record fields: %s",
		what, name, hint, strings.Join(SortFields, ", "), recs)
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Summary returns the indexed summary of one rollout.
func (x *Index) Summary(id string) (RolloutSummary, *entry, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := x.entries[id]
	if e == nil {
		return RolloutSummary{}, nil, false
	}
	return e.sum, e, true
}
