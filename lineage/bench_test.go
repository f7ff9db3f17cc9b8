package lineage

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
)

// chatCall is one Chat Completions call with the given context and answer.
func chatCall(i int, msgs []map[string]string, answer string) Call {
	req, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
	resp, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "message": map[string]string{"role": "assistant", "content": answer}}}})
	return Call{ID: fmt.Sprintf("c%d", i), Index: i, Dialect: "chat", Completed: true, Request: req, Response: resp}
}

// rolloutShapes are rollouts of n calls in the shapes where message matching could compare each
// call with every earlier one, message by message.
var rolloutShapes = map[string]func(n int) []Call{
	// chain: each call continues the previous one's answer; call k has 2k+2 messages.
	"chain": func(n int) []Call {
		msgs := []map[string]string{{"role": "system", "content": "You are terse."}, {"role": "user", "content": "start"}}
		calls := make([]Call, n)
		for i := range calls {
			ans := fmt.Sprintf("answer %d", i)
			calls[i] = chatCall(i, msgs, ans)
			msgs = append(msgs[:len(msgs):len(msgs)], map[string]string{"role": "assistant", "content": ans}, map[string]string{"role": "user", "content": fmt.Sprintf("next %d", i)})
		}
		return calls
	},
	// same: n calls with one 40-message context (resamples).
	"same prompt": func(n int) []Call {
		var msgs []map[string]string
		for k := 0; k < 40; k++ {
			msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprintf("message %d", k)})
		}
		calls := make([]Call, n)
		for i := range calls {
			calls[i] = chatCall(i, msgs, "the same answer")
		}
		return calls
	},
	// forks: n calls sharing a 200-message history, each ending in its own question.
	"forks of a long history": func(n int) []Call {
		var shared []map[string]string
		for k := 0; k < 100; k++ {
			shared = append(shared, map[string]string{"role": "user", "content": fmt.Sprintf("q %d", k)}, map[string]string{"role": "assistant", "content": fmt.Sprintf("a %d", k)})
		}
		calls := make([]Call, n)
		for i := range calls {
			msgs := append(shared[:len(shared):len(shared)], map[string]string{"role": "user", "content": fmt.Sprintf("branch %d", i)})
			calls[i] = chatCall(i, msgs, fmt.Sprintf("branch answer %d", i))
		}
		return calls
	},
	// responses chain: each call names the previous response and sends one new message; the
	// input grows with the calls, the effective context as their square.
	"responses chain": func(n int) []Call {
		calls := make([]Call, n)
		for i := range calls {
			r := map[string]any{"model": "m", "input": []any{map[string]string{"role": "user", "content": fmt.Sprintf("step %d", i)}}}
			if i > 0 {
				r["previous_response_id"] = fmt.Sprintf("resp_%d", i-1)
			}
			req, _ := json.Marshal(r)
			resp, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("resp_%d", i), "output": []any{map[string]any{"type": "message", "role": "assistant",
				"content": []any{map[string]string{"type": "output_text", "text": fmt.Sprintf("done %d", i)}}}}})
			calls[i] = Call{ID: fmt.Sprintf("c%d", i), Index: i, Dialect: "responses", Completed: true, Request: req, Response: resp, ResponseID: fmt.Sprintf("resp_%d", i)}
		}
		return calls
	},
	// roots: n unrelated calls with long answers (sub-agents): each is checked as a compaction.
	"unrelated roots": func(n int) []Call {
		calls := make([]Call, n)
		for i := range calls {
			calls[i] = chatCall(i, []map[string]string{{"role": "user", "content": fmt.Sprintf("task %d %s", i, strings.Repeat("context ", 50))}},
				fmt.Sprintf("a long answer line number %d that is well over sixty-four bytes long, as summaries are", i))
		}
		return calls
	},
}

// BenchmarkDerive: Derive's time, allocations and throughput (MB/s of requests and responses) at
// 10, 100 and 1000 calls per shape. A chain's input grows as the square of its calls (each call
// repeats the history); the other shapes' inputs grow with their calls.
func BenchmarkDerive(b *testing.B) {
	for _, name := range []string{"chain", "same prompt", "forks of a long history", "unrelated roots", "responses chain"} {
		for _, n := range []int{10, 100, 1000} {
			calls := rolloutShapes[name](n)
			var size int64
			for _, c := range calls {
				size += int64(len(c.Request) + len(c.Response))
			}
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(size)
				for b.Loop() {
					Derive(calls)
				}
			})
		}
	}
}

// byMessagesScan is message matching as a scan of every earlier call, segment by segment: the
// definition byMessages's hash index must agree with.
func byMessagesScan(c *call, earlier []*call) (p *call, rel Relation, kept bool, covered int) {
	for i := len(earlier) - 1; i >= 0; i-- {
		e := earlier[i]
		if e.in.Request != nil && sameKeys(e.ctx, c.ctx) && e.tools == c.tools {
			return e, repeat(e), false, len(c.msgs)
		}
	}
	best, bestLen := -1, 0
	for i := len(earlier) - 1; i >= 0; i-- {
		e := earlier[i]
		if pp := e.path(); pp != nil && (len(pp) > bestLen || len(pp) == bestLen && !kept) && isPrefix(pp, c.ctx) {
			best, bestLen, kept = i, len(pp), true
		}
		if len(e.ctx) > bestLen && len(e.ctx) < len(c.ctx) && isPrefix(e.ctx, c.ctx) {
			best, bestLen, kept = i, len(e.ctx), false
		}
	}
	if best < 0 {
		return nil, "", false, 0
	}
	rel = RelationExtends
	if !kept {
		rel = RelationFork
	}
	return earlier[best], rel, kept, coveredMessages(c.ctx, bestLen)
}

// TestByMessagesIndexAgreesWithScan: on random rollouts over a tiny alphabet of messages and
// answers (so that equal contexts, prefixes, ties and repeated answers abound), matching through
// the hash index picks the same parent, relation and coverage as the scan of every earlier call,
// and the main chain and leaves are what ChainTo defines them as.
func TestByMessagesIndexAgreesWithScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 300; round++ {
		n := 2 + rng.IntN(12)
		calls := make([]Call, n)
		for i := range calls {
			var msgs []map[string]string
			for k := rng.IntN(6); k > 0; k-- {
				role := "user"
				if rng.IntN(2) == 0 {
					role = "assistant"
				}
				msgs = append(msgs, map[string]string{"role": role, "content": fmt.Sprintf("m%d", rng.IntN(3))})
			}
			calls[i] = chatCall(i, msgs, fmt.Sprintf("m%d", rng.IntN(3)))
			calls[i].Completed = rng.IntN(4) > 0
		}
		checkChains(t, Derive(calls))
		x := &index{seed: maphash.MakeSeed(), byCtx: map[uint64][]int{}, byPath: map[uint64][]int{}, byPrev: map[string][]int{}}
		var cs []*call
		for i := range calls {
			c := &call{in: &calls[i], node: &Node{}}
			c.msgs, _ = parseRequest(calls[i].Request)
			if calls[i].Completed {
				c.answers, c.summary = answerKeys("chat", parseResponse(calls[i].Response))
			}
			c.ctx = segments(c.msgs)
			x.hash(c)
			if len(c.ctx) > 0 {
				p1, r1, k1, v1 := byMessages(c, cs, x)
				p2, r2, k2, v2 := byMessagesScan(c, cs)
				if p1 != p2 || r1 != r2 || k1 != k2 || v1 != v2 {
					t.Fatalf("round %d call %d: index gives %v %s %v %d, scan %v %s %v %d", round, i, p1, r1, k1, v1, p2, r2, k2, v2)
				}
			}
			x.add(c, i)
			cs = append(cs, c)
		}
	}
}

// TestDeriveWorkLinear: for the shapes whose input grows with their calls, 16 times the calls may
// cost at most 32 times the bytes allocated and 100 times the time (the best of five runs); the
// scan of every earlier call this replaced allocated about 55 times and took about 300 times as
// long on 1000 forks as on 100.
func TestDeriveWorkLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("measures Derive on 800-call rollouts")
	}
	// The best of five runs of each size, the sizes taken in turn, so that a busy moment of a
	// shared machine does not fall on one size only.
	measure := func(small, large []Call) (ts, tl time.Duration, as, al uint64) {
		ts, tl = time.Duration(1<<63-1), time.Duration(1<<63-1)
		run := func(calls []Call) (time.Duration, uint64) {
			// The collector is off while timing: under a loaded machine's contention it costs the
			// large rollout more than its share, which no reading of the rollout does.
			runtime.GC()
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			Derive(calls)
			d := time.Since(start)
			runtime.ReadMemStats(&after)
			return d, after.TotalAlloc - before.TotalAlloc
		}
		for range 5 {
			d, a := run(small)
			ts, as = min(ts, d), a
			d, a = run(large)
			tl, al = min(tl, d), a
		}
		return ts, tl, as, al
	}
	for _, name := range []string{"same prompt", "forks of a long history", "unrelated roots"} {
		ts, tl, as, al := measure(rolloutShapes[name](50), rolloutShapes[name](800))
		t.Logf("%-24s 50 calls %10v %9d B, 800 calls %10v %10d B: %.1f times the time, %.1f the bytes",
			name, ts, as, tl, al, float64(tl)/float64(ts), float64(al)/float64(as))
		if float64(al)/float64(as) > 32 || float64(tl)/float64(ts) > 100 {
			t.Errorf("%s: 16 times the calls cost more than linear", name)
		}
	}
}

// checkChains compares the main chain and the leaves with their definitions through ChainTo: the
// longest chain ending in a completed call (the later end on a tie), and the completed calls no
// other completed call's chain runs through.
func checkChains(t *testing.T, l *Lineage) {
	t.Helper()
	var best []int
	inner := map[int]bool{}
	var ends []int
	for end := len(l.Calls) - 1; end >= 0; end-- {
		if !l.Calls[end].Completed {
			continue
		}
		ends = append([]int{end}, ends...)
		chain := l.ChainTo(end)
		if len(chain) > len(best) {
			best = chain
		}
		for _, k := range chain[:len(chain)-1] {
			inner[k] = true
		}
	}
	var main []string
	for _, i := range best {
		main = append(main, l.Calls[i].CallID)
	}
	var leaves []int
	for _, i := range ends {
		if !inner[i] {
			leaves = append(leaves, i)
		}
	}
	if fmt.Sprint(main) != fmt.Sprint(l.MainChain) && !(len(main) == 0 && len(l.MainChain) == 0) {
		t.Fatalf("main chain %v, by definition %v", l.MainChain, main)
	}
	if fmt.Sprint(leaves) != fmt.Sprint(l.Leaves()) {
		t.Fatalf("leaves %v, by definition %v", l.Leaves(), leaves)
	}
}

// TestSharedContextsAgreeWithCopies: on random Responses rollouts where calls continue earlier
// responses (chains, branches off one response, failed calls, unknown ids), others resend a whole
// history as input (matched by messages against the inherited contexts) and some declare a parent,
// Derive gives the same lineage whether a continuing call extends its parent's arrays in place or
// copies them.
func TestSharedContextsAgreeWithCopies(t *testing.T) {
	type item = map[string]any
	msg := func(role, text string) item {
		if role == "assistant" {
			return item{"type": "message", "role": "assistant", "content": []any{item{"type": "output_text", "text": text}}}
		}
		return item{"role": role, "content": text}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 1000; round++ {
		n := 2 + rng.IntN(14)
		calls := make([]Call, n)
		hist := make([][]item, n) // each call's whole history: what it saw, then its answer
		for i := range calls {
			u := msg("user", fmt.Sprintf("u%d", rng.IntN(10)))
			a := fmt.Sprintf("a%d", rng.IntN(3))
			r := item{"model": "m"}
			var seen []item
			switch j := rng.IntN(i + 1); rng.IntN(3) {
			case 0: // continues resp_j (resp_i is not there yet)
				r["previous_response_id"] = fmt.Sprintf("resp_%d", j)
				r["input"] = []any{u}
				if j < i {
					seen = append(slices.Clone(hist[j]), u)
				}
			case 1: // resends call j's whole history
				if j < i {
					seen = append(slices.Clone(hist[j]), u)
				} else {
					seen = []item{u}
				}
				r["input"] = seen
			default:
				seen = []item{u}
				r["input"] = seen
			}
			req, _ := json.Marshal(r)
			resp, _ := json.Marshal(item{"id": fmt.Sprintf("resp_%d", i), "output": []any{msg("assistant", a)}})
			calls[i] = Call{ID: fmt.Sprintf("c%d", i), Index: i, Dialect: "responses", Completed: rng.IntN(5) > 0, Request: req, Response: resp, ResponseID: fmt.Sprintf("resp_%d", i)}
			hist[i] = append(seen, msg("assistant", a))
			if rng.IntN(8) == 0 {
				calls[i].DeclaredParentID = fmt.Sprintf("c%d", rng.IntN(n))
			}
		}
		shared, _ := json.Marshal(Derive(calls))
		shareContexts = false
		copied, _ := json.Marshal(Derive(calls))
		shareContexts = true
		if string(shared) != string(copied) {
			t.Fatalf("round %d: shared contexts give\n%s\ncopies give\n%s", round, shared, copied)
		}
	}
}
