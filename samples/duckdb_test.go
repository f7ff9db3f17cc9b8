package samples

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The DuckDB reader below is the one tokens/tokenexport's tests use (test/duckdb, pinned
// @duckdb/node-api), set up the same way.

// duckDBReader returns the path of test/duckdb/read.mjs copied beside its pinned
// @duckdb/node-api, installed with npm ci into a cache directory named after the lock file (once
// per pin). Without node or npm the test is skipped, except under CI=true, where it fails.
func duckDBReader(t *testing.T) (node, script string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node and npm are needed to read the Parquet file back with DuckDB")
		}
		t.Skip("node or npm not installed: DuckDB read-back skipped")
	}
	src := filepath.Join("..", "test", "duckdb")
	files := map[string][]byte{}
	for _, f := range []string{"package.json", "package-lock.json", "read.mjs"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = b
	}
	cacheRoot, err := os.UserCacheDir()
	if err != nil {
		cacheRoot = os.TempDir()
	}
	sum := sha256.Sum256(files["package-lock.json"])
	dir := filepath.Join(cacheRoot, "modelcalls-duckdb", hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@duckdb", "node-api", "package.json")); err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), ".install-*")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"package.json", "package-lock.json"} {
			if err := os.WriteFile(filepath.Join(tmp, f), files[f], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(tmp)
			t.Fatalf("npm ci @duckdb/node-api: %v\n%s", err, out)
		}
		if err := os.Rename(tmp, dir); err != nil {
			os.RemoveAll(tmp) // another test process installed it first
		}
	}
	// The script is copied beside node_modules so that its import resolves there; a per-test
	// name keeps concurrent runs from writing one file.
	script = filepath.Join(dir, fmt.Sprintf("read-%d.mjs", os.Getpid()))
	if err := os.WriteFile(script, files["read.mjs"], 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(script) })
	return node, script
}

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
	node, script := duckDBReader(t)
	cmd := exec.Command(node, script, file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("DuckDB read-back: %v\n%s", err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	if !sc.Scan() {
		t.Fatal("no output from DuckDB")
	}
	var head struct{ Types map[string]string }
	if err := json.Unmarshal(sc.Bytes(), &head); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		got = append(got, append(json.RawMessage(nil), sc.Bytes()...))
	}
	return head.Types, got
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
