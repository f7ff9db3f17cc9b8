package samples

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// duckDBRows writes rows as Parquet with ParquetWriter, reads the file back with DuckDB and returns
// DuckDB's column types and each row as DuckDB's to_json gives it.
func duckDBRows[T any](t *testing.T, rows []T) (types map[string]string, got []json.RawMessage) {
	t.Helper()
	var buf bytes.Buffer
	w := NewParquetWriter[T](&buf)
	if err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "rows.parquet")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return capturetest.ReadParquetWithDuckDB(t, file)
}

// sameJSON reports whether DuckDB's row equals the row as the JSONL export writes it.
func sameJSON[T any](t *testing.T, duck json.RawMessage, want T) bool {
	t.Helper()
	var row T
	if err := json.Unmarshal(duck, &row); err != nil {
		t.Fatalf("%v: %s", err, duck)
	}
	a, _ := json.Marshal(row)
	b, _ := json.Marshal(want)
	return bytes.Equal(a, b)
}

// TestParquetReadByDuckDB: token rows and transitions written as Parquet read back with DuckDB as
// lists of the right types and the same rows the JSONL export writes.
func TestParquetReadByDuckDB(t *testing.T) {
	reward := 0.5
	parent := "c0"
	tokenRows := []TokenRow{
		{RolloutID: "r1", Reward: &reward, InputIDs: []int64{1, 2, 3}, LossMask: []int32{0, 1, 1}, RolloutLogprobs: []float64{0, -0.25, -1.5},
			ModelCallIDs: []string{"c0"}, PromptStarts: []int32{0}, GenerationStarts: []int32{1}, Ends: []int32{3}},
		{RolloutID: "r1", Segment: 1, SplitReason: "token_prefix_mismatch at 2 (parent_prompt)", InputIDs: []int64{1, 9}, LossMask: []int32{0, 1},
			RolloutLogprobs: []float64{0, -2}, ModelCallIDs: []string{"c1"}, PromptStarts: []int32{0}, GenerationStarts: []int32{1}, Ends: []int32{2}},
	}
	types, got := duckDBRows(t, tokenRows)
	for col, typ := range map[string]string{"input_ids": "BIGINT[]", "loss_mask": "INTEGER[]", "rollout_logprobs": "DOUBLE[]", "model_call_ids": "VARCHAR[]", "reward": "DOUBLE"} {
		if types[col] != typ {
			t.Errorf("DuckDB reads %s as %s, want %s", col, types[col], typ)
		}
	}
	if len(got) != len(tokenRows) {
		t.Fatalf("DuckDB read %d token rows, want %d", len(got), len(tokenRows))
	}
	for i := range tokenRows {
		if !sameJSON(t, got[i], tokenRows[i]) {
			t.Errorf("token row %d: DuckDB %s", i, got[i])
		}
	}

	transitions := []Transition{
		{RolloutID: "r1", ModelCallID: "c0", Relation: "root", MainChain: true, Completed: true, Reward: &reward,
			PromptIDs: []int64{1}, GeneratedIDs: []int64{2, 3}, Logprobs: []float64{-0.5, -1}},
		{RolloutID: "r1", ModelCallID: "c1", CallIndex: 1, ParentCallID: &parent, Relation: "retry",
			PromptIDs: []int64{}, GeneratedIDs: []int64{}, Logprobs: []float64{}},
	}
	types, got = duckDBRows(t, transitions)
	if types["prompt_ids"] != "BIGINT[]" || types["parent_call_id"] != "VARCHAR" {
		t.Errorf("DuckDB types %v", types)
	}
	if len(got) != len(transitions) {
		t.Fatalf("DuckDB read %d transitions, want %d", len(got), len(transitions))
	}
	for i := range transitions {
		if !sameJSON(t, got[i], transitions[i]) {
			t.Errorf("transition %d: DuckDB %s", i, got[i])
		}
	}
}
