package view

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/record"
	"github.com/modelcalls/modelcalls/tokens"
)

// hasLogProbs reports whether any choice of t carries logprob entries.
func hasLogProbs(t *tokens.Tokens) bool {
	for _, c := range t.Choices {
		if len(c.LogProbs) > 0 {
			return true
		}
	}
	return false
}

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
	Raw map[string]int `json:"raw"`
	// Tokens is the call's token data as package tokens reads it (ids, logprobs with top
	// logprobs, token_source, findings); absent when the call carries none.
	Tokens *tokens.Tokens `json:"tokens,omitempty"`
	Prev   *int           `json:"prev"` // call_index of the previous / next readable call, null at the ends
	Next   *int           `json:"next"`
}

// recordUnits are the units of the numeric ModelCallRecord fields.
var recordUnits = map[string]string{
	"started_at": "s since epoch", "completed_at": "s since epoch",
	"latency_total_ms": "ms", "latency_ttft_ms": "ms",
	"tokens_in": "tokens", "tokens_out": "tokens", "tokens_reasoning": "tokens", "tokens_total": "tokens",
	"cached_tokens": "tokens", "cache_creation_tokens": "tokens",
}

// refresh brings rollout id's entry up to date for a page, which must not wait for the next pass:
// it looks at the rollout's files in every dir as a pass does (the owning store as the index found
// it, else the first dir holding its capture file or marker; claims counted in every dir), and
// when they changed reads only what was appended to the capture file. The entry goes into the index
// (moving its version) unless a pass replaced it meanwhile.
func (x *Index) refresh(id string) (*entry, error) {
	_, old, _ := x.Summary(id)
	var st *capture.Store
	if old != nil {
		st = old.store
	}
	var key fileKey
	var claimStore *capture.Store // the first dir holding claims, as a pass picks it
	for _, s := range x.stores {
		hasCapture, marker, err := s.Stat(id)
		if err != nil {
			return nil, err
		}
		if st == nil && (hasCapture || marker) {
			st = s
		}
		if s == st {
			key.hasCapture, key.marker = hasCapture, marker
		}
		c, err := s.Claims(id)
		if err != nil {
			return nil, err
		}
		key.live, key.stale = key.live+c.Live, key.stale+c.Stale
		if claimStore == nil && c.Live+c.Stale > 0 {
			claimStore = s
		}
	}
	if st == nil && key.live == 0 && key.stale == 0 && (old == nil || !old.sum.InRecords) {
		return nil, ErrNoRollout
	}
	if st == nil {
		st = claimStore // as a pass: a rollout known only from claims shows under that dir
	}
	if key.hasCapture {
		p, err := st.CapturePath(id)
		if err != nil {
			return nil, err
		}
		if info, err := os.Lstat(p); err == nil {
			key.size, key.mtime = info.Size(), info.ModTime().UnixNano()
		}
	}
	if old != nil && old.key == key && old.store == st {
		return old, nil
	}
	e, err := x.readRollout(id, st, key, old)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	x.applyRecordLocked(e)
	if x.entries[id] == old {
		x.entries[id] = e
		x.bump()
	}
	x.mu.Unlock()
	return e, nil
}

// conversation parses a call's request and response into messages (New not yet marked).
func conversation(r *record.ModelCallRecord) *Conversation {
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
	nameToolResults(c)
	return c
}

// nameToolResults gives each tool result without a name the name of the tool call with its call
// id in the same request or response, so that a result says which tool produced it (the dialects
// send only the call id with a result).
func nameToolResults(c *Conversation) {
	names := map[string]string{}
	for _, msgs := range [][]Message{c.Input, c.Output} {
		for i := range msgs {
			for _, p := range msgs[i].Parts {
				if p.Kind == "tool_call" && p.CallID != "" && p.Name != "" {
					names[p.CallID] = p.Name
				}
			}
		}
	}
	for _, msgs := range [][]Message{c.Input, c.Output} {
		for i := range msgs {
			for j := range msgs[i].Parts {
				if p := &msgs[i].Parts[j]; p.Kind == "tool_result" && p.Name == "" {
					p.Name = names[p.CallID]
				}
			}
		}
	}
}

// Rollout returns one rollout's detail: its entry brought up to date (refresh) and its calls' rows
// from the rollout's digest, which reads only what was appended since it last looked.
func (x *Index) Rollout(id string) (*RolloutDetail, error) {
	v, _ := x.Version()
	e, err := x.refresh(id)
	if err != nil {
		return nil, err
	}
	d := &RolloutDetail{Version: v, Summary: e.sum, Calls: []CallRow{}, Damaged: slices.Clone(e.damaged)}
	if d.Damaged == nil {
		d.Damaged = []DamagedLine{}
	}
	if e.store == nil || !e.sum.HasCapture {
		return d, nil
	}
	d.Path, _ = e.store.CapturePath(id)
	dg, err := x.digestOf(id, e.store)
	if err != nil {
		return nil, err
	}
	defer dg.mu.Unlock()
	counts := dg.newCounts()
	for i := range dg.calls {
		c := &dg.calls[i]
		d.Calls = append(d.Calls, CallRow{Record: c.record, Line: c.line, InputMessages: len(c.in), NewMessages: counts[i]})
	}
	d.MaxConcurrency = maxConcurrency(e.calls)
	return d, nil
}

// maxConcurrency sweeps the calls' [started_at, completed_at] intervals; a call ending exactly when
// another starts does not overlap it.
func maxConcurrency(calls []callStat) int {
	type ev struct {
		t float64
		d int
	}
	var evs []ev
	for i := range calls {
		c := &calls[i]
		if math.IsNaN(c.start) || math.IsNaN(c.end) {
			continue
		}
		evs = append(evs, ev{c.start, 1}, ev{c.end, -1})
	}
	slices.SortFunc(evs, func(a, b ev) int { return cmp.Or(cmp.Compare(a.t, b.t), a.d-b.d) })
	n, best := 0, 0
	for _, e := range evs {
		n += e.d
		best = max(best, n)
	}
	return best
}

// callLine finds call index of rollout id in its up-to-date entry and reads its line, and only
// that line, from the capture file. A file rewritten since the entry was read is read again once.
func (x *Index) callLine(id string, index int) (e *entry, i int, rec *record.ModelCallRecord, line []byte, err error) {
	for attempt := 0; ; attempt++ {
		if e, err = x.refresh(id); err != nil {
			return nil, 0, nil, nil, err
		}
		i, found := slices.BinarySearchFunc(e.calls, index, func(c callStat, n int) int { return c.index - n })
		if !found || e.store == nil {
			return nil, 0, nil, nil, ErrNoCall
		}
		c := &e.calls[i]
		line, err = e.store.ReadLineAt(id, c.off, c.size)
		if errors.Is(err, capture.ErrRewritten) && attempt == 0 {
			x.forget(id, e)
			continue
		}
		if err != nil {
			return nil, 0, nil, nil, err
		}
		if rec, err = record.BuildRecord(line, index); err != nil {
			return nil, 0, nil, nil, fmt.Errorf("%w: line %d: %v", ErrNoCall, c.line, err)
		}
		return e, i, rec, line, nil
	}
}

// forget drops e, an entry whose file changed under it, so that the next refresh reads the file
// from its start.
func (x *Index) forget(id string, e *entry) {
	x.mu.Lock()
	if x.entries[id] == e {
		cp := *e
		cp.key, cp.resume, cp.calls, cp.damaged, cp.done, cp.doneDamaged = fileKey{}, capture.Resume{}, nil, nil, 0, 0
		x.entries[id] = &cp
	}
	x.mu.Unlock()
}

// Call returns one call of a rollout with its conversation. It reads the call's own line; which
// input messages are new comes from the rollout's digest.
func (x *Index) Call(id string, index int) (*CallDetail, error) {
	v, _ := x.Version()
	e, i, r, line, err := x.callLine(id, index)
	if err != nil {
		return nil, err
	}
	conv := conversation(r)
	dg, err := x.digestOf(id, e.store)
	if err != nil {
		return nil, err
	}
	seen := dg.seenBefore(index, f64(r.StartedAt))
	dg.mu.Unlock()
	markCall(conv, seen)
	d := &CallDetail{Version: v, RolloutID: id, Line: e.calls[i].line, Record: r.AppendJSON(nil, false),
		Conversation: *conv, Units: recordUnits, Raw: map[string]int{}}
	if t := readTokens(r, line); t.HasTokenData() || t.PromptTokenIDs != nil || len(t.Findings) > 0 || hasLogProbs(t) {
		d.Tokens = t
	}
	for name, n := range map[string]int{"request": len(r.Request), "response": len(r.Response),
		"request_raw": strLen(r.RequestRaw), "response_raw": strLen(r.ResponseRaw)} {
		if n > 0 {
			d.Raw[name] = n
		}
	}
	if i > 0 {
		d.Prev = ptr(e.calls[i-1].index)
	}
	if i+1 < len(e.calls) {
		d.Next = ptr(e.calls[i+1].index)
	}
	return d, nil
}

// Raw returns one stored payload of a call, read from the call's own line: "request" or
// "response" (the JSON object as stored), "request_raw" or "response_raw" (the text). ok is false
// when the call has no such payload.
func (x *Index) Raw(id string, index int, part string) (data []byte, isJSON, ok bool, err error) {
	_, _, r, _, err := x.callLine(id, index)
	if err != nil {
		return nil, false, false, err
	}
	switch part {
	case "request":
		return r.Request, true, r.Request != nil, nil
	case "response":
		return r.Response, true, r.Response != nil, nil
	case "request_raw":
		if r.RequestRaw != nil {
			return rawText(r.RequestRaw), false, true, nil
		}
	case "response_raw":
		if r.ResponseRaw != nil {
			return rawText(r.ResponseRaw), false, true, nil
		}
	}
	return nil, false, false, nil
}

// rawText is the decoded text of a stored raw text (nil when null), sharing the line's bytes when
// the text has no escapes.
func rawText(t record.RawText) []byte {
	b, _ := jsonscan.Text(t)
	return b
}

// strLen is the length of the decoded text (0 when null).
func strLen(t record.RawText) int {
	return len(rawText(t))
}
