package rundiff

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/demo"
	"github.com/modelcalls/modelcalls/record"
)

// call builds a Chat Completions call: its request messages (role, text pairs), its answer, and
// its tool calls (name, arguments).
type call struct {
	start      float64
	model      string
	status     int
	msgs       [][2]string
	msgIDs     bool // give each request message a run-specific id, as some harnesses do
	answer     string
	answerID   string
	tools      [][2]string
	latency    float64
	tokensIn   int64
	tokensOut  int64
	errorCateg string
}

func (c call) record(index int) *record.ModelCallRecord {
	var msgs []any
	for i, m := range c.msgs {
		msg := map[string]any{"role": m[0], "content": m[1]}
		if c.msgIDs {
			msg["id"] = c.answerID + string(rune('a'+i))
		}
		msgs = append(msgs, msg)
	}
	req, _ := json.Marshal(map[string]any{"model": c.model, "messages": msgs})
	resp, _ := json.Marshal(map[string]any{"id": c.answerID, "choices": []any{map[string]any{"index": 0,
		"message": map[string]any{"role": "assistant", "content": c.answer}, "finish_reason": "stop"}}})
	r := &record.ModelCallRecord{CallIndex: index, StartedAt: &c.start, Model: &c.model, StatusCode: &c.status,
		Request: req, Response: resp, LatencyTotalMS: &c.latency, TokensIn: &c.tokensIn, TokensOut: &c.tokensOut}
	if c.errorCateg != "" {
		r.ErrorCategory = &c.errorCateg
	}
	for i, t := range c.tools {
		id := c.answerID + "-call" + string(rune('0'+i))
		r.ToolCalls = append(r.ToolCalls, record.ToolCall{CallID: &id, Name: &t[0], Arguments: json.RawMessage(t[1])})
	}
	return r
}

func run(calls ...call) *Run {
	r := &Run{Dir: "d", Rollout: "r", Calls: []Call{}}
	for i, c := range calls {
		r.Calls = append(r.Calls, summarise(c.record(i)))
	}
	sortCalls(r)
	return r
}

func TestCompare(t *testing.T) {
	base := call{start: 1, model: "m", status: 200, msgs: [][2]string{{"system", "be brief"}, {"user", "hello"}}, answer: "hi",
		answerID: "run1", tools: [][2]string{{"read", `{"path":"a.txt","n":1}`}}, latency: 100, tokensIn: 10, tokensOut: 5}
	with := func(f func(c *call)) call {
		c := base
		c.msgs = append([][2]string(nil), base.msgs...)
		f(&c)
		return c
	}
	second := with(func(c *call) { c.start = 2; c.msgs = append(c.msgs, [2]string{"user", "more"}) })
	tests := []struct {
		name     string
		a, b     *Run
		same     bool
		what     string
		position int
		message  int // -1: none
		da, db   string
		differs  [][]string // per pair
	}{
		{name: "identical", a: run(base, second), b: run(base, second), same: true, differs: [][]string{{}, {}}},
		{name: "only run-specific ids, times and tokens differ",
			a: run(base, second),
			b: run(with(func(c *call) {
				c.answerID, c.msgIDs, c.latency, c.tokensOut, c.start = "run2", true, 900, 7, 50
				c.tools = [][2]string{{"read", `{ "n": 1, "path": "a.txt" }`}}
			}), with(func(c *call) { c.start = 60; c.answerID = "run2"; c.msgs = append(c.msgs, [2]string{"user", "more"}) })),
			same: true, differs: [][]string{{}, {}}},
		{name: "a changed prompt", a: run(base, second),
			b:    run(with(func(c *call) { c.msgs[1][1] = "hello there" }), second),
			what: "messages", position: 0, message: 1, da: "user: hello", db: "user: hello there",
			differs: [][]string{{"messages"}, {}}},
		{name: "an extra call", a: run(base), b: run(base, second),
			what: "missing", position: 1, message: -1, da: "(no such call)", db: "call 1", differs: [][]string{{}, {"missing"}}},
		{name: "a failed call", a: run(base, second),
			b: run(base, with(func(c *call) {
				c.start = 2
				c.status = 429
				c.errorCateg = "rate_limit"
				c.answer = ""
				c.msgs = second.msgs
			})),
			what: "status", position: 1, message: -1, da: "200", db: "429", differs: [][]string{{}, {"status", "answer", "error"}}},
		{name: "another model", a: run(base), b: run(with(func(c *call) { c.model = "m2" })),
			what: "model", position: 0, message: -1, da: "m", db: "m2", differs: [][]string{{"model"}}},
		{name: "other tool arguments", a: run(base), b: run(with(func(c *call) { c.tools = [][2]string{{"read", `{"path":"b.txt","n":1}`}} })),
			what: "tool_calls", position: 0, message: -1, da: `read({"n":1,"path":"a.txt"})`, db: `read({"n":1,"path":"b.txt"})`,
			differs: [][]string{{"tool_calls"}}},
		{name: "a message fewer", a: run(base), b: run(with(func(c *call) { c.msgs = c.msgs[:1] })),
			what: "messages", position: 0, message: 1, da: "user: hello", db: "(no message 1)", differs: [][]string{{"messages"}}},
		{name: "paired by start time, not capture order", a: run(base, second),
			b: run(second, base), same: true, differs: [][]string{{}, {}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Compare(tt.a, tt.b)
			if res.Same != tt.same {
				t.Fatalf("same = %v, want %v (first %+v)", res.Same, tt.same, res.First)
			}
			if len(res.Pairs) != len(tt.differs) {
				t.Fatalf("%d pairs, want %d", len(res.Pairs), len(tt.differs))
			}
			for i, p := range res.Pairs {
				if g, w := p.Differs, tt.differs[i]; !equal(g, w) {
					t.Errorf("pair %d differs %q, want %q", i, g, w)
				}
			}
			if tt.same {
				if res.First != nil {
					t.Fatalf("first = %+v, want none", res.First)
				}
				return
			}
			f := res.First
			msg := -1
			if f.Message != nil {
				msg = *f.Message
			}
			if f.What != tt.what || f.Position != tt.position || msg != tt.message || f.A != tt.da || f.B != tt.db {
				t.Errorf("first = %s at %d message %d (%q vs %q), want %s at %d message %d (%q vs %q)",
					f.What, f.Position, msg, f.A, f.B, tt.what, tt.position, tt.message, tt.da, tt.db)
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTotals(t *testing.T) {
	c := call{start: 1, model: "m", status: 200, msgs: [][2]string{{"user", "x"}}, latency: 12.5, tokensIn: 10, tokensOut: 3,
		tools: [][2]string{{"a", "{}"}, {"b", "{}"}}}
	e := c
	e.start, e.errorCateg = 2, "server_error"
	res := Compare(run(c, e), run(c))
	if g := res.A; g.Calls != 2 || g.Errors != 1 || g.TokensIn != 20 || g.TokensOut != 6 || g.LatencyMS != 25 || g.ToolCalls != 4 {
		t.Errorf("totals of A = %+v", g)
	}
}

// TestLoadDemo reads rollouts the real gateway wrote: a rollout compared with itself is the same;
// the JSON and streamed runs of one conversation part at the model of their first call.
func TestLoadDemo(t *testing.T) {
	res, err := demo.Run(context.Background(), demo.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	load := func(id string) *Run {
		r, err := Load(res.Store, res.CaptureDir, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a := load("demo-chat-json")
	if len(a.Calls) != 2 {
		t.Fatalf("%d calls, want 2", len(a.Calls))
	}
	if r := Compare(a, load("demo-chat-json")); !r.Same {
		t.Errorf("a rollout differs from itself: %+v", r.First)
	}
	r := Compare(a, load("demo-chat-sse"))
	if r.Same || r.First.Position != 0 || r.First.What != "model" {
		t.Errorf("first difference %+v, want the model of the first call", r.First)
	}
	if none := load("no-such-rollout"); len(none.Calls) != 0 {
		t.Errorf("a rollout without capture has %d calls", len(none.Calls))
	}
}

// TestCompareEdges: runs in different dialects part at the dialect, named first (every message
// and answer differs in shape after it); empty runs match; a run with no calls against one with
// calls is missing them all.
func TestCompareEdges(t *testing.T) {
	chat := call{start: 1, model: "m", status: 200, msgs: [][2]string{{"system", "S"}, {"user", "hi"}}, answer: "hello"}
	chatRec := chat.record(0)
	msgsRec := chat.record(0)
	msgsRec.Request = json.RawMessage(`{"model":"m","system":"S","messages":[{"role":"user","content":"hi"}]}`)
	msgsRec.Response = json.RawMessage(`{"id":"x","content":[{"type":"text","text":"hello"}]}`)
	chatDialect, messagesDialect := "chat", "messages"
	chatRec.Dialect, msgsRec.Dialect = &chatDialect, &messagesDialect
	a := &Run{Calls: []Call{summarise(chatRec)}}
	b := &Run{Calls: []Call{summarise(msgsRec)}}
	res := Compare(a, b)
	if res.Same || res.First.What != "dialect" || res.First.A != "chat" || res.First.B != "messages" {
		t.Errorf("dialects: first %+v", res.First)
	}
	long := strings.Repeat("word ", 40)
	res = Compare(run(call{msgs: [][2]string{{"user", long + "A"}}}), run(call{msgs: [][2]string{{"user", long + "B"}}}))
	if res.First == nil || res.First.What != "messages" || res.First.A != res.First.B || res.First.Note == nil {
		t.Errorf("a difference past the excerpt: %+v", res.First)
	}
	empty := &Run{Calls: []Call{}}
	if res := Compare(empty, &Run{Calls: []Call{}}); !res.Same || len(res.Pairs) != 0 {
		t.Errorf("two empty runs: %+v", res)
	}
	res = Compare(empty, run(chat, chat))
	if res.Same || len(res.Pairs) != 2 || res.First.What != "missing" || res.First.A != "(no such call)" || res.Pairs[1].Differs[0] != "missing" {
		t.Errorf("empty against two calls: %+v", res)
	}
}
