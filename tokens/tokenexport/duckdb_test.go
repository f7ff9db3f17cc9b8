package tokenexport

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
	"strings"
	"testing"
)

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
	src := filepath.Join("..", "..", "test", "duckdb")
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
	for col, typ := range map[string]string{"prompt_token_ids": "BIGINT[]", "generation_token_ids": "BIGINT[]",
		"generation_log_probs": "DOUBLE[]", "reward": "DOUBLE", "call_index": "BIGINT"} {
		if head.Types[col] != typ {
			t.Errorf("DuckDB reads %s as %s, want %s", col, head.Types[col], typ)
		}
	}
	if !strings.HasPrefix(head.Types["findings"], "STRUCT(") || !strings.HasSuffix(head.Types["findings"], "[]") {
		t.Errorf("findings is %s, want a list of structs", head.Types["findings"])
	}
	var got []Row
	for sc.Scan() {
		var r Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
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
