package samples

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/lineage"
)

// chainRollout is a Chat rollout of n calls, each continuing the previous answer (call k resends
// 2k+2 messages).
func chainRollout(n int) []lineage.Call {
	msgs := []map[string]string{{"role": "system", "content": "You are terse."}, {"role": "user", "content": "start"}}
	calls := make([]lineage.Call, n)
	for i := range calls {
		ans := fmt.Sprintf("answer %d", i)
		req, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
		resp, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "message": map[string]string{"role": "assistant", "content": ans}}}})
		calls[i] = lineage.Call{ID: fmt.Sprintf("c%d", i), Index: i, Dialect: "chat", Completed: true, Request: req, Response: resp}
		msgs = append(msgs[:len(msgs):len(msgs)], map[string]string{"role": "assistant", "content": ans}, map[string]string{"role": "user", "content": fmt.Sprintf("next %d", i)})
	}
	return calls
}

// BenchmarkSFTChain: the SFT line of a chain of n calls reads the last call's history, not every
// call's (the lineage is derived once, outside the loop).
func BenchmarkSFTChain(b *testing.B) {
	for _, n := range []int{10, 100, 300} {
		calls := chainRollout(n)
		l := lineage.Derive(calls)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := SFT(calls, l, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSFTToolsBeforeTheLastHistory: the line's tools are the last offered along the chain, also
// when the call whose history the line is read from offers none (a summary request).
func TestSFTToolsBeforeTheLastHistory(t *testing.T) {
	calls := chainRollout(3)
	var r map[string]any
	json.Unmarshal(calls[1].Request, &r)
	r["tools"] = []any{map[string]any{"type": "function", "function": map[string]any{"name": "ls"}}}
	calls[1].Request, _ = json.Marshal(r)
	lines, err := SFT(calls, lineage.Derive(calls), Options{})
	if err != nil || len(lines) != 1 {
		t.Fatalf("%d lines, %v", len(lines), err)
	}
	if b, _ := json.Marshal(lines[0].Tools); !strings.Contains(string(b), `"name":"ls"`) {
		t.Errorf("tools %s", b)
	}
}
