package lineage

import (
	"slices"
	"testing"
)

// FuzzDerive feeds arbitrary request and response bytes to Derive: it must not panic, every
// parent must be an earlier call, and the main chain must be calls in capture order ending in a
// completed call, split into segments that join back to it.
func FuzzDerive(f *testing.F) {
	for _, d := range dialects {
		for _, tc := range lineageCases {
			calls := render(d, tc.steps)
			if len(calls) >= 2 {
				f.Add(string(calls[0].Request), string(calls[0].Response), string(calls[1].Request), string(calls[1].Response), d.name)
			}
		}
	}
	f.Add(`{"input":"x","previous_response_id":"r"}`, `{"id":"r","output":[]}`, `{"previous_response_id":"r","input":[]}`, `{}`, "responses")
	f.Add(`{"messages":[{"role":"assistant","content":null}]}`, `null`, `[]`, `{"choices":[{}]}`, "chat")
	f.Fuzz(func(t *testing.T, req0, resp0, req1, resp1, dialect string) {
		calls := []Call{
			{ID: "a", Dialect: dialect, Completed: true, Request: []byte(req0), Response: []byte(resp0), ResponseID: "r"},
			{ID: "b", Index: 1, Dialect: dialect, Completed: len(resp1)%2 == 0, Request: []byte(req1), Response: []byte(resp1)},
			{ID: "c", Index: 2, Dialect: dialect, Completed: true, Request: []byte(req1), Response: []byte(resp0)},
		}
		l := Derive(calls)
		ids := []string{"a", "b", "c"}
		for i, n := range l.Calls {
			if n.ParentCallID != nil && slices.Index(ids, *n.ParentCallID) >= i {
				t.Fatalf("call %d: parent %s is not earlier", i, *n.ParentCallID)
			}
			if (n.ParentCallID == nil) != (n.Relation == RelationRoot) {
				t.Fatalf("call %d: relation %s with parent %v", i, n.Relation, n.ParentCallID)
			}
		}
		last := -1
		for _, id := range l.MainChain {
			k := slices.Index(ids, id)
			if k <= last {
				t.Fatalf("main chain %v out of order", l.MainChain)
			}
			last = k
		}
		if last >= 0 && !calls[last].Completed {
			t.Fatalf("main chain ends in a call that did not complete")
		}
		// The segments of the main chain are the chain, in order, each after the first starting
		// at a compaction.
		var chain []int
		for _, id := range l.MainChain {
			chain = append(chain, slices.Index(ids, id))
		}
		var joined []string
		for k, seg := range l.Segments(chain) {
			if len(seg) == 0 || k > 0 && l.Calls[seg[0]].Relation != RelationCompaction && l.Calls[seg[0]].Relation != RelationRetry && l.Calls[seg[0]].Relation != RelationResample {
				t.Fatalf("segment %d %v of main chain %v", k, seg, l.MainChain)
			}
			for _, i := range seg {
				joined = append(joined, ids[i])
			}
		}
		if !slices.Equal(joined, l.MainChain) {
			t.Fatalf("segments %v, main chain %v", joined, l.MainChain)
		}
	})
}
