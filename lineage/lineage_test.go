package lineage

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// want is one call's expected lineage: parent ("" for a root), relation, the new turns, and one
// author letter per turn of its context (M model, C client; a run of assistant messages is one
// turn, so the letters do not depend on how a dialect splits an answer into items).
type want struct {
	parent   string
	relation Relation
	newTurns int
	authors  string
}

var (
	callRead  = toolCall{"call_1", "read", `{"path":"a.txt","limit":10}`}
	callRead2 = toolCall{"call_2", "read", `{"path":"b.txt"}`}
	// The same call as callRead as a harness may resend it: other id, keys reordered, spaced.
	callReadResent = toolCall{"toolu_99", "read", `{ "limit": 10, "path": "a.txt" }`}
	summaryText    = "Summary of the work so far: the user asked to read a.txt, which says hello; the answer was given."
	summaryText2   = "Summary of the work so far: a.txt says hello and b.txt says world; the user may ask about them."
)

var lineageCases = []struct {
	name  string
	steps []step
	want  []want
	main  []string
	sum   Summary
}{
	{
		name: "extends through a tool round trip",
		steps: []step{
			{history: []turn{sys("S"), user("read a.txt")}, answer: turn{role: "assistant", reasoning: "think", calls: []toolCall{callRead}}},
			{history: []turn{sys("S"), user("read a.txt"), asst("", callReadResent), result("call_1", "hello")}, answer: asst("a.txt says hello")},
		},
		want: []want{
			{"", RelationRoot, 2, "CC"},
			{"c0", RelationExtends, 1, "CCMC"},
		},
		main: []string{"c0", "c1"},
		sum:  Summary{Calls: 2, Roots: 1, Extends: 1, MainChainLength: 2},
	},
	{
		name: "retry of a failed call, then the chain goes on",
		steps: []step{
			{history: []turn{sys("S"), user("read a.txt")}, answer: asst("", callRead)},
			{history: []turn{sys("S"), user("read a.txt"), asst("", callRead), result("call_1", "hello")}, failed: true},
			{history: []turn{sys("S"), user("read a.txt"), asst("", callRead), result("call_1", "hello")}, answer: asst("hello")},
		},
		want: []want{
			{"", RelationRoot, 2, "CC"},
			{"c0", RelationExtends, 1, "CCMC"},
			{"c1", RelationRetry, 0, "CCMC"},
		},
		main: []string{"c0", "c2"},
		sum:  Summary{Calls: 3, Roots: 1, Extends: 1, Retries: 1, MainChainLength: 2, OffMainChain: 1},
	},
	{
		name: "resample of a completed call",
		steps: []step{
			{history: []turn{sys("S"), user("write a poem")}, answer: asst("roses")},
			{history: []turn{sys("S"), user("write a poem")}, answer: asst("violets")},
		},
		want: []want{
			{"", RelationRoot, 2, "CC"},
			{"c0", RelationResample, 0, "CC"},
		},
		main: []string{"c1"},
		sum:  Summary{Calls: 2, Roots: 1, Resamples: 1, MainChainLength: 1, OffMainChain: 1},
	},
	{
		name: "fork: a second continuation of the same answer",
		steps: []step{
			{history: []turn{sys("S"), user("hi")}, answer: asst("hello, what now?")},
			{history: []turn{sys("S"), user("hi"), asst("hello, what now?"), user("read a.txt")}, answer: asst("ok")},
			{history: []turn{sys("S"), user("hi"), asst("hello, what now?"), user("read b.txt")}, answer: asst("ok too")},
		},
		want: []want{
			{"", RelationRoot, 2, "CC"},
			{"c0", RelationExtends, 1, "CCMC"},
			{"c0", RelationFork, 1, "CCMC"},
		},
		main: []string{"c0", "c2"},
		sum:  Summary{Calls: 3, Roots: 1, Extends: 1, Forks: 1, MainChainLength: 2, OffMainChain: 1},
	},
	{
		name: "fork: the answer edited by the client",
		steps: []step{
			{history: []turn{sys("S"), user("hi")}, answer: asst("hello there")},
			{history: []turn{sys("S"), user("hi"), asst("hello there, edited"), user("go on")}, answer: asst("going")},
		},
		want: []want{
			{"", RelationRoot, 2, "CC"},
			{"c0", RelationFork, 2, "CCCC"},
		},
		main: []string{"c1"},
		sum:  Summary{Calls: 2, Roots: 1, Forks: 1, MainChainLength: 1, OffMainChain: 1},
	},
	{
		name: "an injected assistant turn is the client's",
		steps: []step{
			{history: []turn{sys("S"), user("hi")}, answer: asst("hello")},
			{history: []turn{sys("S"), user("hi"), asst("hello"), user("and?"), asst("I will read a file now."), user("go")}, answer: asst("done")},
		},
		want: []want{
			{"", RelationRoot, 2, "CC"},
			{"c0", RelationExtends, 3, "CCMCCC"},
		},
		main: []string{"c0", "c1"},
		sum:  Summary{Calls: 2, Roots: 1, Extends: 1, MainChainLength: 2},
	},
	{
		name: "compaction: history replaced by a summary the model wrote",
		steps: []step{
			{history: []turn{sys("S"), user("read a.txt")}, answer: asst("", callRead)},
			{history: []turn{sys("S"), user("read a.txt"), asst("", callRead), result("call_1", "hello"), user("Summarize the conversation.")}, answer: asst(summaryText)},
			{history: []turn{sys("S"), user("This session continues an earlier one. " + summaryText), user("next task")}, answer: asst("ok")},
		},
		want: []want{
			{"", RelationRoot, 2, "CC"},
			{"c0", RelationExtends, 2, "CCMCC"},
			{"c1", RelationCompaction, 3, "CCC"},
		},
		main: []string{"c0", "c1", "c2"},
		sum:  Summary{Calls: 3, Roots: 1, Extends: 1, Compactions: 1, MainChainLength: 3},
	},
	{
		name: "compaction: only the summary part of the answer is pasted",
		steps: []step{
			{history: []turn{sys("S"), user("read a.txt")}, answer: asst("ok, reading")},
			{history: []turn{sys("S"), user("read a.txt"), asst("ok, reading"), user("Summarize.")}, answer: asst("<analysis>\nThe user wants a file read and nothing else; nothing is pending here.\n</analysis>\n<summary>\n" + summaryText + "\n</summary>")},
			{history: []turn{sys("S"), user("This session is being continued from a previous conversation.\n\nSummary:\n" + summaryText + "\n\nContinue.")}, answer: asst("ok")},
		},
		want: []want{
			{"", RelationRoot, 2, "CC"},
			{"c0", RelationExtends, 1, "CCMC"},
			{"c1", RelationCompaction, 2, "CC"},
		},
		main: []string{"c0", "c1", "c2"},
		sum:  Summary{Calls: 3, Roots: 1, Extends: 1, Compactions: 1, MainChainLength: 3},
	},
	{
		// Codex's compaction keeps the user's messages of the old history (its first context, up
		// to the prompt) and appends the summary and the next prompt: the old first call's context
		// is a prefix, but the summary, answered later, says where the history continues.
		name: "compaction: the user's messages kept before the summary",
		steps: []step{
			{history: []turn{sys("S"), user("read a.txt")}, answer: asst("", callRead)},
			{history: []turn{sys("S"), user("read a.txt"), asst("", callRead), result("call_1", "hello")}, answer: asst("a.txt says hello")},
			{history: []turn{sys("S"), user("read a.txt"), asst("", callRead), result("call_1", "hello"), asst("a.txt says hello"), user("Summarize for a handoff.")}, answer: asst(summaryText)},
			{history: []turn{sys("S"), user("read a.txt"), user("Another model wrote this summary: " + summaryText), user("read a.txt again")}, answer: asst("", callRead)},
		},
		want: []want{
			{"", RelationRoot, 2, "CC"},
			{"c0", RelationExtends, 1, "CCMC"},
			{"c1", RelationExtends, 1, "CCMCMC"},
			{"c2", RelationCompaction, 4, "CCCC"},
		},
		main: []string{"c0", "c1", "c2", "c3"},
		sum:  Summary{Calls: 4, Roots: 1, Extends: 2, Compactions: 1, MainChainLength: 4},
	},
	{
		// A compaction continues the conversation: the main chain runs across both, from the first
		// prompt to the last answer, summary requests included.
		name: "compaction twice: the main chain crosses both",
		steps: []step{
			{history: []turn{sys("S"), user("read a.txt")}, answer: asst("", callRead)},
			{history: []turn{sys("S"), user("read a.txt"), asst("", callRead), result("call_1", "hello"), user("Summarize the conversation.")}, answer: asst(summaryText)},
			{history: []turn{sys("S"), user("This session continues an earlier one. " + summaryText), user("read b.txt")}, answer: asst("", callRead2)},
			{history: []turn{sys("S"), user("This session continues an earlier one. " + summaryText), user("read b.txt"), asst("", callRead2), result("call_2", "world"), user("Summarize the conversation.")}, answer: asst(summaryText2)},
			{history: []turn{sys("S"), user("This session continues an earlier one. " + summaryText2), user("what did they say?")}, answer: asst("hello world")},
		},
		want: []want{
			{"", RelationRoot, 2, "CC"},
			{"c0", RelationExtends, 2, "CCMCC"},
			{"c1", RelationCompaction, 3, "CCC"},
			{"c2", RelationExtends, 2, "CCCMCC"},
			{"c3", RelationCompaction, 3, "CCC"},
		},
		main: []string{"c0", "c1", "c2", "c3", "c4"},
		sum:  Summary{Calls: 5, Roots: 1, Extends: 2, Compactions: 2, MainChainLength: 5},
	},
	{
		// A side call sent last (a title, a check of who speaks next) is a root of one call: not
		// longer than the conversation, so not the main chain.
		name: "side call sent last is off the main chain",
		steps: []step{
			{history: []turn{sys("S"), user("read a.txt")}, answer: asst("", callRead)},
			{history: []turn{sys("S"), user("read a.txt"), asst("", callRead), result("call_1", "hello")}, answer: asst("a.txt says hello")},
			{history: []turn{sys("Write a 5-word title."), user("read a.txt")}, answer: asst("Reading a file")},
		},
		want: []want{
			{"", RelationRoot, 2, "CC"},
			{"c0", RelationExtends, 1, "CCMC"},
			{"", RelationRoot, 2, "CC"},
		},
		main: []string{"c0", "c1"},
		sum:  Summary{Calls: 3, Roots: 2, Extends: 1, MainChainLength: 2, OffMainChain: 1},
	},
	{
		name: "side call is a root, the main conversation goes on",
		steps: []step{
			{history: []turn{sys("S"), user("read a.txt")}, answer: asst("", callRead)},
			{history: []turn{sys("Write a 5-word title."), user("read a.txt")}, answer: asst("Reading a file")},
			{history: []turn{sys("S"), user("read a.txt"), asst("", callRead), result("call_1", "hello")}, answer: asst("", callRead2)},
			{history: []turn{sys("S"), user("read a.txt"), asst("", callRead), result("call_1", "hello"), asst("", callRead2), result("call_2", "world")}, answer: asst("hello world")},
		},
		want: []want{
			{"", RelationRoot, 2, "CC"},
			{"", RelationRoot, 2, "CC"},
			{"c0", RelationExtends, 1, "CCMC"},
			{"c2", RelationExtends, 1, "CCMCMC"},
		},
		main: []string{"c0", "c2", "c3"},
		sum:  Summary{Calls: 4, Roots: 2, Extends: 2, MainChainLength: 3, OffMainChain: 1},
	},
}

// turnsOf collapses a node's messages into turn letters (a run of assistant messages is one turn).
func turnsOf(msgs []MessageAuthor) string {
	var b strings.Builder
	for i, m := range msgs {
		if m.Role == "assistant" && i > 0 && msgs[i-1].Role == "assistant" {
			continue
		}
		if m.Author == AuthorModel {
			b.WriteByte('M')
		} else {
			b.WriteByte('C')
		}
	}
	return b.String()
}

func TestDeriveScripted(t *testing.T) {
	for _, d := range dialects {
		for _, tc := range lineageCases {
			t.Run(d.name+"/"+tc.name, func(t *testing.T) {
				l := Derive(render(d, tc.steps))
				for i, w := range tc.want {
					n := l.Calls[i]
					parent := ""
					if n.ParentCallID != nil {
						parent = *n.ParentCallID
					}
					got := want{parent, n.Relation, len(turnsOf(n.Messages[len(n.Messages)-n.NewMessages:])), turnsOf(n.Messages)}
					if got != w {
						t.Errorf("call %d: got %+v (evidence %s), want %+v", i, got, n.Evidence, w)
					}
				}
				if !slices.Equal(l.MainChain, tc.main) {
					t.Errorf("main chain %v, want %v", l.MainChain, tc.main)
				}
				if l.Summary != tc.sum {
					t.Errorf("summary %+v, want %+v", l.Summary, tc.sum)
				}
			})
		}
	}
}

// TestPreviousResponseID: a Responses call that sends only its new input on previous_response_id
// extends the call whose response id it names; the same new input again is a repeat.
func TestPreviousResponseID(t *testing.T) {
	d := dialects[1]
	prev := func(id string, history []turn) func(dialectScript) []byte {
		return func(dialectScript) []byte {
			b := responsesRequest(history)
			return append([]byte(fmt.Sprintf(`{"previous_response_id":%q,`, id)), b[1:]...)
		}
	}
	steps := []step{
		{history: []turn{sys("S"), user("read a.txt")}, answer: asst("", callRead)},
		{raw: prev("resp_0", []turn{result("call_1", "hello")}), failed: true},
		{raw: prev("resp_0", []turn{result("call_1", "hello")}), answer: asst("", callRead2)},
		{raw: prev("resp_2", []turn{result("call_2", "world")}), answer: asst("done")},
	}
	l := Derive(render(d, steps))
	wantRel := []Relation{RelationRoot, RelationExtends, RelationRetry, RelationExtends}
	wantParent := []string{"", "c0", "c1", "c2"}
	for i, n := range l.Calls {
		parent := ""
		if n.ParentCallID != nil {
			parent = *n.ParentCallID
		}
		if n.Relation != wantRel[i] || parent != wantParent[i] {
			t.Errorf("call %d: %s of %q, want %s of %q", i, n.Relation, parent, wantRel[i], wantParent[i])
		}
		if i > 0 && n.Evidence != EvidencePreviousResponse {
			t.Errorf("call %d: evidence %s", i, n.Evidence)
		}
	}
	if !slices.Equal(l.MainChain, []string{"c0", "c2", "c3"}) {
		t.Errorf("main chain %v", l.MainChain)
	}
}

// TestDeclared: a declared parent wins over message matching, and a shared logical request id makes
// a repeat even when the messages differ.
func TestDeclared(t *testing.T) {
	d := dialects[0]
	steps := []step{
		{history: []turn{sys("S"), user("a")}, answer: asst("A")},
		{history: []turn{sys("S"), user("b")}, answer: asst("B")},
		{history: []turn{sys("S"), user("a"), asst("A"), user("more")}, answer: asst("more A")},
		{history: []turn{sys("S"), user("b"), asst("B"), user("again")}, failed: true},
		{history: []turn{sys("S"), user("b"), asst("B"), user("again, reworded")}, answer: asst("ok")},
	}
	calls := render(d, steps)
	calls[2].DeclaredParentID = "c0"
	calls[3].LogicalRequestID = "L1"
	calls[4].LogicalRequestID = "L1"
	l := Derive(calls)
	if n := l.Calls[2]; n.Evidence != EvidenceDeclared || n.Relation != RelationExtends || *n.ParentCallID != "c0" {
		t.Errorf("declared parent: %+v", n)
	}
	if n := l.Calls[4]; n.Evidence != EvidenceDeclared || n.Relation != RelationRetry || *n.ParentCallID != "c3" {
		t.Errorf("logical request id: %+v", n)
	}
}

// TestTokenEvidence: calls without messages (token-in prompts) are placed by their ids.
func TestTokenEvidence(t *testing.T) {
	calls := []Call{
		{ID: "c0", Completed: true, Tokens: &TokenIDs{Prompt: []int64{1, 2, 3}, Generated: []int64{4, 5}}},
		{ID: "c1", Index: 1, Completed: true, Tokens: &TokenIDs{Prompt: []int64{1, 2, 3, 4, 5, 6}, Generated: []int64{7}}},
		{ID: "c2", Index: 2, Completed: true, Tokens: &TokenIDs{Prompt: []int64{1, 2, 3, 4, 5, 6}, Generated: []int64{8}}},
		{ID: "c3", Index: 3, Completed: true, Tokens: &TokenIDs{Prompt: []int64{9}, Generated: []int64{8}}},
	}
	l := Derive(calls)
	wantRel := []Relation{RelationRoot, RelationExtends, RelationResample, RelationRoot}
	for i, n := range l.Calls {
		if n.Relation != wantRel[i] {
			t.Errorf("call %d: %s, want %s", i, n.Relation, wantRel[i])
		}
	}
	if l.Calls[1].Evidence != EvidenceTokens || l.Calls[1].Audit == nil || !l.Calls[1].Audit.OK {
		t.Errorf("call 1: evidence %s, audit %+v", l.Calls[1].Evidence, l.Calls[1].Audit)
	}
	if !slices.Equal(l.MainChain, []string{"c0", "c2"}) {
		t.Errorf("main chain %v", l.MainChain)
	}
}

func TestAuditPrefix(t *testing.T) {
	p := func(i int) *int { return &i }
	id := func(i int64) *int64 { return &i }
	cases := []struct {
		name               string
		prompt, gen, child []int64
		ok                 bool
		pos                *int
		in                 string
		expected, got      *int64
	}{
		{"exact prefix", []int64{1, 2}, []int64{3}, []int64{1, 2, 3, 4}, true, nil, "", nil, nil},
		{"equal", []int64{1, 2}, []int64{3}, []int64{1, 2, 3}, true, nil, "", nil, nil},
		{"history re-rendered", []int64{1, 2}, []int64{3}, []int64{1, 9, 3, 4}, false, p(1), "parent_prompt", id(2), id(9)},
		{"end of turn dropped", []int64{1, 2}, []int64{3, 99}, []int64{1, 2, 3, 5}, false, p(3), "parent_generation", id(99), id(5)},
		{"child prompt shorter", []int64{1, 2}, []int64{3}, []int64{1, 2}, false, p(2), "parent_generation", id(3), nil},
		{"empty generation", []int64{1}, []int64{}, []int64{1, 2}, true, nil, "", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := AuditPrefix(tc.prompt, tc.gen, tc.child)
			if a.OK != tc.ok || a.In != tc.in || !eqIntPtr(a.Position, tc.pos) || !eqPtr(a.Expected, tc.expected) || !eqPtr(a.Got, tc.got) {
				t.Errorf("got %+v", a)
			}
		})
	}
}

func eqIntPtr(a, b *int) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }
func eqPtr(a, b *int64) bool  { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// TestDuplicateIDs: a model_call_id repeated in a capture (never written by the gateway, possible
// in a file put together by hand) does not loop or repeat calls in the main chain.
func TestDuplicateIDs(t *testing.T) {
	calls := render(dialects[0], lineageCases[0].steps)
	calls[1].ID = calls[0].ID
	l := Derive(calls)
	if len(l.MainChain) > 2 {
		t.Errorf("main chain %v", l.MainChain)
	}
}

// TestLeaves: the ends of every path, main chain's included, in capture order.
func TestLeaves(t *testing.T) {
	want := map[string][]int{
		"extends through a tool round trip":                  {1},
		"retry of a failed call, then the chain goes on":     {2},
		"resample of a completed call":                       {0, 1},
		"fork: a second continuation of the same answer":     {1, 2},
		"side call is a root, the main conversation goes on": {1, 3},
		"compaction twice: the main chain crosses both":      {4},
		"side call sent last is off the main chain":          {1, 2},
	}
	for _, tc := range lineageCases {
		w, ok := want[tc.name]
		if !ok {
			continue
		}
		l := Derive(render(dialects[0], tc.steps))
		if got := l.Leaves(); !slices.Equal(got, w) {
			t.Errorf("%s: leaves %v, want %v", tc.name, got, w)
		}
	}
}

// TestAuthorsAlongChain: when the model gives the same answer on every call of a chain, each
// turn is attributed to the call that gave it there (the chain's own calls), not to the latest
// call with that answer; a turn the chain does not explain falls back to the latest such call.
func TestAuthorsAlongChain(t *testing.T) {
	steps := []step{
		{history: []turn{sys("S"), user("hi")}, answer: asst("OK")},
		{history: []turn{sys("S"), user("hi"), asst("OK"), user("again")}, answer: asst("OK")},
		{history: []turn{sys("S"), user("hi"), asst("OK"), user("again"), asst("OK"), user("more")}, answer: asst("OK")},
		// A new root quoting an answer: the latest call that gave it.
		{history: []turn{sys("T"), user("x"), asst("OK"), user("y")}, answer: asst("done")},
	}
	want := [][]string{{}, {"c0"}, {"c0", "c1"}, {"c2"}}
	for _, d := range dialects {
		l := Derive(render(d, steps))
		for i, w := range want {
			var got []string
			for k, m := range l.Calls[i].Messages {
				if m.Author == AuthorModel && (k == 0 || l.Calls[i].Messages[k-1].Role != "assistant") {
					got = append(got, m.FromCallID)
				}
			}
			if !slices.Equal(got, w) {
				t.Errorf("%s call %d: model turns from %v, want %v", d.name, i, got, w)
			}
		}
	}
}

// TestDeclaredParentNotEarlier: a declared parent that is the call itself, a later call, an
// unknown id, or a later call declaring back (a cycle), is no parent: the call is placed by the
// other evidence and the chain stays acyclic.
func TestDeclaredParentNotEarlier(t *testing.T) {
	d := dialects[0]
	steps := []step{
		{history: []turn{sys("S"), user("a")}, answer: asst("A")},
		{history: []turn{sys("S"), user("a"), asst("A"), user("b")}, answer: asst("B")},
		{history: []turn{sys("S"), user("a"), asst("A"), user("b"), asst("B"), user("c")}, answer: asst("C")},
		{history: []turn{sys("S"), user("x")}, answer: asst("X")},
	}
	calls := render(d, steps)
	calls[0].DeclaredParentID = "c2"      // a later call, which declares back: a cycle
	calls[2].DeclaredParentID = "c0"      // wrong but earlier: declared wins
	calls[1].DeclaredParentID = "c1"      // itself
	calls[3].DeclaredParentID = "nowhere" // unknown
	l := Derive(calls)
	for i, want := range []struct {
		parent   string
		evidence Evidence
		ignored  string
	}{{"", EvidenceNone, "c2"}, {"c0", EvidenceMessages, "c1"}, {"c0", EvidenceDeclared, ""}, {"", EvidenceNone, "nowhere"}} {
		n := l.Calls[i]
		got := ""
		if n.ParentCallID != nil {
			got = *n.ParentCallID
		}
		if got != want.parent || n.Evidence != want.evidence || n.DeclaredParentIgnored != want.ignored {
			t.Errorf("call %d: parent %q by %s, ignored %q; want %q by %s, ignored %q", i, got, n.Evidence, n.DeclaredParentIgnored, want.parent, want.evidence, want.ignored)
		}
	}
	for i := range l.Calls {
		if c := l.ChainTo(i); len(c) > len(l.Calls) {
			t.Errorf("chain to %d: %v", i, c)
		}
	}
	if len(l.Leaves()) == 0 || len(l.MainChain) == 0 {
		t.Errorf("leaves %v, main chain %v", l.Leaves(), l.MainChain)
	}
}

// TestSegments: a chain is split where a call is a compaction of the call before it, also when
// that call is a retry of a failed compaction call; the main chain crosses every compaction.
func TestSegments(t *testing.T) {
	after := []turn{sys("S"), user("This session continues an earlier one. " + summaryText), user("read b.txt")}
	retried := []step{
		{history: []turn{sys("S"), user("read a.txt")}, answer: asst("", callRead)},
		{history: []turn{sys("S"), user("read a.txt"), asst("", callRead), result("call_1", "hello"), user("Summarize the conversation.")}, answer: asst(summaryText)},
		{history: after, failed: true},
		{history: after, answer: asst("", callRead2)},
		{history: append(slices.Clone(after), asst("", callRead2), result("call_2", "world")), answer: asst("hello world")},
	}
	cases := []struct {
		name  string
		steps []step
		want  [][]int
	}{
		{"no compaction", lineageCases[0].steps, [][]int{{0, 1}}},
		{"one compaction", caseSteps(t, "compaction: history replaced by a summary the model wrote"), [][]int{{0, 1}, {2}}},
		{"two compactions", caseSteps(t, "compaction twice: the main chain crosses both"), [][]int{{0, 1}, {2, 3}, {4}}},
		{"the call after the compaction retried", retried, [][]int{{0, 1}, {3, 4}}},
	}
	for _, d := range dialects {
		for _, tc := range cases {
			l := Derive(render(d, tc.steps))
			chain := l.ChainTo(len(l.Calls) - 1)
			got := l.Segments(chain)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("%s/%s: segments %v of chain %v, want %v", d.name, tc.name, got, chain, tc.want)
			}
			if len(l.MainChain) != len(chain) {
				t.Errorf("%s/%s: main chain %v, want the chain to the last call %v", d.name, tc.name, l.MainChain, chain)
			}
		}
	}
	if got := (&Lineage{}).Segments(nil); len(got) != 0 {
		t.Errorf("segments of an empty chain %v", got)
	}
}

func caseSteps(t *testing.T, name string) []step {
	for _, tc := range lineageCases {
		if tc.name == name {
			return tc.steps
		}
	}
	t.Fatalf("no case %q", name)
	return nil
}
