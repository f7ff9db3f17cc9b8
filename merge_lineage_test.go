package modelcalls

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestMergeLineage: with Lineage, each attached call carries parent_call_id and relation after
// the record's keys and the attachment ends with the lineage summary; without it neither appears.
func TestMergeLineage(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("lineage/testdata/captures/claude-code-replay-misses.capture.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "r1.capture.jsonl"), b, 0o640); err != nil {
		t.Fatal(err)
	}
	line := []byte(`{"_ng_rollout_id":"r1","reward":1}`)
	for k, on := range []bool{false, true, true} {
		payloads := k == 2 // the payload members go before tool_calls, the lineage keys last
		out, _, err := MergeRecord(context.Background(), line, []string{dir}, MergeOptions{Lineage: on, IncludePayloads: payloads, DrainTimeout: -1})
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Capture struct {
				Calls   []map[string]json.RawMessage `json:"calls"`
				Lineage *struct {
					MainChain []string `json:"main_chain"`
					Retries   int      `json:"retries"`
					Roots     int      `json:"roots"`
				} `json:"lineage"`
			} `json:"ng_model_call_capture"`
		}
		if err := json.Unmarshal(out, &rec); err != nil {
			t.Fatal(err)
		}
		calls := rec.Capture.Calls
		if len(calls) != 8 {
			t.Fatalf("%d calls", len(calls))
		}
		if _, ok := calls[1]["request"]; ok != payloads {
			t.Fatalf("payloads %v: request key %v", payloads, ok)
		}
		_, hasRel := calls[1]["relation"]
		if hasRel != on || (rec.Capture.Lineage != nil) != on {
			t.Fatalf("lineage %v: relation key %v, summary %v", on, hasRel, rec.Capture.Lineage != nil)
		}
		if !on {
			continue
		}
		var parent string
		json.Unmarshal(calls[1]["parent_call_id"], &parent)
		var first string
		json.Unmarshal(calls[0]["model_call_id"], &first)
		if string(calls[0]["parent_call_id"]) != "null" || string(calls[1]["relation"]) != `"extends"` || parent != first || string(calls[3]["relation"]) != `"retry"` {
			t.Errorf("calls 0, 1, 3: %s %s / %s %s / %s", calls[0]["parent_call_id"], calls[0]["relation"], calls[1]["parent_call_id"], calls[1]["relation"], calls[3]["relation"])
		}
		if l := rec.Capture.Lineage; len(l.MainChain) != 2 || l.Retries != 4 || l.Roots != 3 {
			t.Errorf("summary %+v", *l)
		}
	}
}

// BenchmarkMergeLineage merges one real Claude Code rollout (8 calls, about 600 KB of captures)
// without and with the lineage, to show what deriving it costs.
func BenchmarkMergeLineage(b *testing.B) {
	dir := b.TempDir()
	data, err := os.ReadFile("lineage/testdata/captures/claude-code-replay-misses.capture.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "r1.capture.jsonl"), data, 0o640); err != nil {
		b.Fatal(err)
	}
	line := []byte(`{"_ng_rollout_id":"r1"}`)
	for _, on := range []bool{false, true} {
		name := "plain"
		if on {
			name = "lineage"
		}
		b.Run(name, func(b *testing.B) {
			m, err := NewMerger([]string{dir}, MergeOptions{Lineage: on, DrainTimeout: -1})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if _, _, err := m.Merge(context.Background(), line); err != nil {
					b.Fatal(err)
				}
			}
			// The machine may be shared: CPU time per merge compares runs better than wall time.
			if cpu > 0 {
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
