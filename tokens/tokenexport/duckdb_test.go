package tokenexport

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestParquetReadByDuckDB writes rows as Parquet and reads them back with DuckDB: the id and
// logprob columns are lists, and every row equals the row written.
func TestParquetReadByDuckDB(t *testing.T) {
	want := rows(t)
	var buf bytes.Buffer
	w := NewParquetWriter(&buf)
	for i := range want {
		if err := w.Write(&want[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tokens.parquet")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	types, duckRows := capturetest.ReadParquetWithDuckDB(t, file)
	for col, typ := range map[string]string{"prompt_token_ids": "BIGINT[]", "generation_token_ids": "BIGINT[]",
		"generation_log_probs": "DOUBLE[]", "reward": "DOUBLE", "call_index": "BIGINT"} {
		if types[col] != typ {
			t.Errorf("DuckDB reads %s as %s, want %s", col, types[col], typ)
		}
	}
	if !strings.HasPrefix(types["findings"], "STRUCT(") || !strings.HasSuffix(types["findings"], "[]") {
		t.Errorf("findings is %s, want a list of structs", types["findings"])
	}
	var got []Row
	for _, line := range duckRows {
		var r Row
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		got = append(got, r)
	}
	if len(got) != len(want) {
		t.Fatalf("DuckDB read %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		gj, _ := json.Marshal(got[i])
		wj, _ := json.Marshal(want[i])
		if !bytes.Equal(gj, wj) {
			t.Errorf("row %d:\nDuckDB %s\n wrote %s", i, gj, wj)
		}
	}
}
