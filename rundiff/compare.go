package rundiff

import (
	"strconv"
	"strings"
)

// Totals summarise one run.
type Totals struct {
	Dir       string  `json:"dir"`
	Rollout   string  `json:"rollout"`
	Calls     int     `json:"calls"`
	Errors    int     `json:"errors"` // calls with an error category
	TokensIn  int64   `json:"tokens_in"`
	TokensOut int64   `json:"tokens_out"`
	LatencyMS float64 `json:"latency_ms"` // summed latency_total_ms
	ToolCalls int     `json:"tool_calls"`
	Damaged   int     `json:"damaged_lines"`
}

// Pair is the n-th call of each run. A or B is nil when only one run made an n-th call.
type Pair struct {
	Position int   `json:"position"` // 0-based, in started_at order
	A        *Call `json:"a"`
	B        *Call `json:"b"`
	// Differs lists what differs: "missing" (one side has no such call), "dialect", "model", "messages",
	// "status", "finish_reason", "tool_calls", "answer", "error". Empty when the calls match.
	Differs []string `json:"differs"`
}

// Difference is where two runs first part.
type Difference struct {
	Position int    `json:"position"` // the pair's position
	CallA    *int   `json:"call_a"`   // call_index in A, null when A has no such call
	CallB    *int   `json:"call_b"`
	What     string `json:"what"` // the first entry of the pair's Differs
	// Message is the 0-based index of the first request message that differs when What is
	// "messages" (one run may have fewer messages: the other's extra one is shown), else null.
	Message *int   `json:"message"`
	A       string `json:"a"` // A's side of it: the message (role: excerpt), the model, the status, ...
	B       string `json:"b"`
	// Note is set when A and B read the same although the values differ: past the excerpt's
	// first ExcerptLen characters, or in their JSON (another shape, a part without text).
	Note *string `json:"note,omitempty"`
}

// Result is the comparison of two runs.
type Result struct {
	A     Totals      `json:"a"`
	B     Totals      `json:"b"`
	Same  bool        `json:"same"`  // no pair differs
	First *Difference `json:"first"` // null when Same
	Pairs []Pair      `json:"pairs"`
}

// Compare pairs the calls of a and b and finds where they first differ.
func Compare(a, b *Run) *Result {
	res := &Result{A: totals(a), B: totals(b), Same: true, Pairs: []Pair{}}
	for i := range max(len(a.Calls), len(b.Calls)) {
		p := Pair{Position: i, Differs: []string{}}
		if i < len(a.Calls) {
			p.A = &a.Calls[i]
		}
		if i < len(b.Calls) {
			p.B = &b.Calls[i]
		}
		p.Differs = differs(p.A, p.B)
		if len(p.Differs) > 0 && res.First == nil {
			res.Same = false
			res.First = first(&p)
		}
		res.Pairs = append(res.Pairs, p)
	}
	return res
}

func totals(r *Run) Totals {
	t := Totals{Dir: r.Dir, Rollout: r.Rollout, Calls: len(r.Calls), Damaged: r.Damaged}
	for i := range r.Calls {
		c := &r.Calls[i]
		if c.Error != nil {
			t.Errors++
		}
		t.TokensIn += deref(c.TokensIn)
		t.TokensOut += deref(c.TokensOut)
		t.LatencyMS += deref(c.LatencyMS)
		t.ToolCalls += len(c.ToolCalls)
	}
	return t
}

func differs(a, b *Call) []string {
	d := []string{}
	if a == nil || b == nil {
		return append(d, "missing")
	}
	if deref(a.Dialect) != deref(b.Dialect) {
		d = append(d, "dialect")
	}
	if deref(a.Model) != deref(b.Model) {
		d = append(d, "model")
	}
	if firstMessage(a, b) >= 0 {
		d = append(d, "messages")
	}
	if deref(a.Status) != deref(b.Status) {
		d = append(d, "status")
	}
	if deref(a.Finish) != deref(b.Finish) {
		d = append(d, "finish_reason")
	}
	if a.toolsKey != b.toolsKey {
		d = append(d, "tool_calls")
	}
	if a.answerKey != b.answerKey {
		d = append(d, "answer")
	}
	if deref(a.Error) != deref(b.Error) {
		d = append(d, "error")
	}
	return d
}

// firstMessage is the index of the first request message that differs, -1 when none does.
func firstMessage(a, b *Call) int {
	for i := range max(len(a.Messages), len(b.Messages)) {
		if i >= len(a.Messages) || i >= len(b.Messages) || a.Messages[i].key != b.Messages[i].key {
			return i
		}
	}
	return -1
}

func first(p *Pair) *Difference {
	d := &Difference{Position: p.Position, What: p.Differs[0]}
	if p.A != nil {
		d.CallA = &p.A.Index
	}
	if p.B != nil {
		d.CallB = &p.B.Index
	}
	a, b := p.A, p.B
	switch d.What {
	case "missing":
		d.A, d.B = callText(a), callText(b)
	case "dialect":
		d.A, d.B = deref(a.Dialect), deref(b.Dialect)
	case "model":
		d.A, d.B = deref(a.Model), deref(b.Model)
	case "messages":
		i := firstMessage(a, b)
		d.Message = &i
		d.A, d.B = messageText(a.Messages, i), messageText(b.Messages, i)
	case "status":
		d.A, d.B = itoa(a.Status), itoa(b.Status)
	case "finish_reason":
		d.A, d.B = deref(a.Finish), deref(b.Finish)
	case "tool_calls":
		d.A, d.B = join(a.ToolCalls), join(b.ToolCalls)
	case "answer":
		d.A, d.B = a.Answer, b.Answer
	case "error":
		d.A, d.B = deref(a.Error), deref(b.Error)
	}
	if d.A == d.B {
		note := "both sides read the same here, yet the values differ: past the first " + strconv.Itoa(ExcerptLen) +
			" characters, or in their JSON (another shape, a part without text)"
		d.Note = &note
	}
	return d
}

func callText(c *Call) string {
	if c == nil {
		return "(no such call)"
	}
	return "call " + itoa(&c.Index)
}

func messageText(msgs []Message, i int) string {
	if i >= len(msgs) {
		return "(no message " + itoa(&i) + ")"
	}
	return msgs[i].Role + ": " + msgs[i].Excerpt
}

func join(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

func itoa(p *int) string {
	if p == nil {
		return "null"
	}
	return strconv.Itoa(*p)
}
