package view

import (
	"cmp"
	"encoding/json"
	"errors"
	"slices"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/record"
)

// ErrNoRollout is returned for a rollout id no capture dir knows.
var ErrNoRollout = errors.New("no such rollout")

// ErrNoCall is returned for a call index the rollout's capture does not hold.
var ErrNoCall = errors.New("no such call")

// CallRow is one call on a rollout's page (GET /api/rollouts/{id}).
type CallRow struct {
	// Record is the call's ModelCallRecord without payloads: the fields and JSON names merge
	// attaches (model_call_id, call_index, status_code, tokens_in, latency_total_ms, ...).
	Record json.RawMessage `json:"record"`
	Line   int             `json:"line"` // 1-based line in the capture file
	// InputMessages is the number of messages (and Responses items) the request sent, NewMessages how
	// many of them no earlier call had sent or received.
	InputMessages int `json:"input_messages"`
	NewMessages   int `json:"new_messages"`
}

// DamagedLine is an unreadable capture line.
type DamagedLine struct {
	Line  int    `json:"line"`       // 1-based line number
	Index int    `json:"call_index"` // the capture index it consumed
	Error string `json:"error"`
}

// RolloutDetail is one rollout read fresh from its capture file (GET /api/rollouts/{id}).
type RolloutDetail struct {
	Version uint64         `json:"version"`
	Summary RolloutSummary `json:"summary"`
	Path    string         `json:"path"`  // the capture file
	Calls   []CallRow      `json:"calls"` // in capture (append) order
	Damaged []DamagedLine  `json:"damaged"`
	// MaxConcurrency is the largest number of calls whose [started_at, completed_at] overlap.
	MaxConcurrency int `json:"max_concurrency"`
}

// CallDetail is one call with its conversation (GET /api/rollouts/{id}/calls/{index}).
type CallDetail struct {
	Version      uint64          `json:"version"`
	RolloutID    string          `json:"rollout_id"`
	Line         int             `json:"line"`
	Record       json.RawMessage `json:"record"` // as in CallRow
	Conversation Conversation    `json:"conversation"`
	// Units gives the unit of each numeric record field: "ms", "s since epoch", "tokens".
	Units map[string]string `json:"units"`
	// Raw tells which stored payloads exist (GET .../raw?part=NAME) and their sizes in bytes.
	Raw  map[string]int `json:"raw"`
	Prev *int           `json:"prev"` // call_index of the previous / next readable call, null at the ends
	Next *int           `json:"next"`
}

// recordUnits are the units of the numeric ModelCallRecord fields.
var recordUnits = map[string]string{
	"started_at": "s since epoch", "completed_at": "s since epoch",
	"latency_total_ms": "ms", "latency_ttft_ms": "ms",
	"tokens_in": "tokens", "tokens_out": "tokens", "tokens_reasoning": "tokens", "tokens_total": "tokens",
	"cached_tokens": "tokens", "cache_creation_tokens": "tokens",
}

// loaded is a rollout read from its capture.
type loaded struct {
	store   *capture.Store
	path    string
	sum     RolloutSummary
	records []record.ModelCallRecord
	lines   []int
	damaged []DamagedLine
}

// load reads rollout id fresh: the owning store (as the index found it, else the first dir holding
// its capture file or marker), its tolerant read, the marker and the claims of every dir.
func (x *Index) load(id string) (*loaded, error) {
	sum, e, ok := x.Summary(id)
	var st *capture.Store
	if ok {
		st = e.store
	}
	l := &loaded{sum: sum}
	l.sum.ID = id
	live, stale := 0, 0
	for _, s := range x.stores {
		hasCapture, marker, err := s.Stat(id)
		if err != nil {
			return nil, err
		}
		if st == nil && (hasCapture || marker) {
			st = s
		}
		if s == st {
			l.sum.HasCapture, l.sum.Incomplete = hasCapture, marker
		}
		c, err := s.Claims(id)
		if err != nil {
			return nil, err
		}
		live, stale = live+c.Live, stale+c.Stale
	}
	l.sum.Pending, l.sum.Abandoned = live, stale
	if st == nil {
		if live == 0 && stale == 0 && !l.sum.InRecords {
			return nil, ErrNoRollout
		}
		return l, nil
	}
	l.store = st
	l.sum.Dir = st.Dir()
	l.path, _ = st.CapturePath(id)
	entries, damages, err := st.ReadAvailable(id)
	if err != nil {
		return nil, err
	}
	for _, d := range damages {
		l.damaged = append(l.damaged, DamagedLine{Line: d.Line, Index: d.Index, Error: d.Err.Error()})
	}
	for _, en := range entries {
		rec, err := record.BuildRecord(en.Data, en.Index)
		if err != nil {
			l.damaged = append(l.damaged, DamagedLine{Line: en.Line, Index: en.Index, Error: err.Error()})
			continue
		}
		l.records = append(l.records, *rec)
		l.lines = append(l.lines, en.Line)
	}
	slices.SortFunc(l.damaged, func(a, b DamagedLine) int { return a.Line - b.Line })
	l.sum.Calls, l.sum.DamagedLines = len(l.records), len(l.damaged)
	return l, nil
}

// conversations parses every call's request and response and marks what was new on each call,
// taking calls in started_at order (capture order for equal or unknown times).
func (l *loaded) conversations() []*Conversation {
	convs := make([]*Conversation, len(l.records))
	for i := range l.records {
		r := &l.records[i]
		c := &Conversation{}
		if r.Request != nil {
			c.Input, c.Tools = ParseRequest(r.Request)
		}
		if r.Response != nil {
			c.Output, c.Error = ParseResponse(r.Response)
		} else if r.ResponseRaw != nil {
			c.Output = []Message{{Role: "assistant", Parts: []Part{{Kind: "other", Name: "response_raw", Text: r.ResponseRaw.Text()}}}}
		}
		if c.Input == nil {
			c.Input = []Message{}
		}
		if c.Output == nil {
			c.Output = []Message{}
		}
		if c.Tools == nil {
			c.Tools = []string{}
		}
		convs[i] = c
	}
	order := make([]int, len(l.records))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(f64(l.records[a].StartedAt), f64(l.records[b].StartedAt))
	})
	ordered := make([]*Conversation, len(order))
	for i, o := range order {
		ordered[i] = convs[o]
	}
	markNew(ordered)
	return convs
}

// Rollout returns one rollout's detail, read fresh.
func (x *Index) Rollout(id string) (*RolloutDetail, error) {
	v, _ := x.Version()
	l, err := x.load(id)
	if err != nil {
		return nil, err
	}
	d := &RolloutDetail{Version: v, Summary: l.sum, Path: l.path, Calls: []CallRow{}, Damaged: l.damaged}
	if d.Damaged == nil {
		d.Damaged = []DamagedLine{}
	}
	convs := l.conversations()
	for i := range l.records {
		row := CallRow{Record: l.records[i].AppendJSON(nil, false), Line: l.lines[i], InputMessages: len(convs[i].Input)}
		for _, m := range convs[i].Input {
			if m.New {
				row.NewMessages++
			}
		}
		d.Calls = append(d.Calls, row)
	}
	d.MaxConcurrency = maxConcurrency(l.records)
	return d, nil
}

// maxConcurrency sweeps the calls' [started_at, completed_at] intervals; a call ending exactly when
// another starts does not overlap it.
func maxConcurrency(recs []record.ModelCallRecord) int {
	type ev struct {
		t float64
		d int
	}
	var evs []ev
	for i := range recs {
		r := &recs[i]
		if r.StartedAt == nil || r.CompletedAt == nil {
			continue
		}
		evs = append(evs, ev{*r.StartedAt, 1}, ev{*r.CompletedAt, -1})
	}
	slices.SortFunc(evs, func(a, b ev) int { return cmp.Or(cmp.Compare(a.t, b.t), a.d-b.d) })
	n, best := 0, 0
	for _, e := range evs {
		n += e.d
		best = max(best, n)
	}
	return best
}

// Call returns one call of a rollout with its conversation.
func (x *Index) Call(id string, index int) (*CallDetail, error) {
	v, _ := x.Version()
	l, err := x.load(id)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(l.records, func(r record.ModelCallRecord) bool { return r.CallIndex == index })
	if i < 0 {
		return nil, ErrNoCall
	}
	convs := l.conversations()
	r := &l.records[i]
	d := &CallDetail{Version: v, RolloutID: id, Line: l.lines[i], Record: r.AppendJSON(nil, false),
		Conversation: *convs[i], Units: recordUnits, Raw: map[string]int{}}
	for name, n := range map[string]int{"request": len(r.Request), "response": len(r.Response),
		"request_raw": strLen(r.RequestRaw), "response_raw": strLen(r.ResponseRaw)} {
		if n > 0 {
			d.Raw[name] = n
		}
	}
	if i > 0 {
		d.Prev = ptr(l.records[i-1].CallIndex)
	}
	if i+1 < len(l.records) {
		d.Next = ptr(l.records[i+1].CallIndex)
	}
	return d, nil
}

// Raw returns one stored payload of a call: "request" or "response" (the JSON object as stored),
// "request_raw" or "response_raw" (the text). ok is false when the call has no such payload.
func (x *Index) Raw(id string, index int, part string) (data []byte, isJSON, ok bool, err error) {
	l, err := x.load(id)
	if err != nil {
		return nil, false, false, err
	}
	i := slices.IndexFunc(l.records, func(r record.ModelCallRecord) bool { return r.CallIndex == index })
	if i < 0 {
		return nil, false, false, ErrNoCall
	}
	r := &l.records[i]
	switch part {
	case "request":
		return r.Request, true, r.Request != nil, nil
	case "response":
		return r.Response, true, r.Response != nil, nil
	case "request_raw":
		if r.RequestRaw != nil {
			return []byte(r.RequestRaw.Text()), false, true, nil
		}
	case "response_raw":
		if r.ResponseRaw != nil {
			return []byte(r.ResponseRaw.Text()), false, true, nil
		}
	}
	return nil, false, false, nil
}

// strLen is the length of the decoded text (0 when null).
func strLen(t record.RawText) int {
	return len(t.Text())
}
