package capturetest

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

// ReadParquetWithDuckDB reads the Parquet file at path with DuckDB (the npm package
// @duckdb/node-api pinned in test/duckdb, through its read.mjs) and returns the column types as
// DuckDB names them ("BIGINT[]", "DOUBLE", ...) and each row as DuckDB's to_json writes it.
//
// The package is installed with `npm ci` into <user cache>/modelcalls-duckdb/<lock hash>, once per
// pin: into a temporary directory renamed into place, so concurrent test processes never share a
// half-installed tree. Without node or npm the test is skipped, except under CI=true, where it
// fails.
func ReadParquetWithDuckDB(t testing.TB, path string) (types map[string]string, rows []json.RawMessage) {
	t.Helper()
	node, script := duckDBReader(t)
	cmd := exec.Command(node, script, path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("DuckDB read-back of %s: %v\n%s", path, err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	if !sc.Scan() {
		t.Fatalf("DuckDB read-back of %s: no output", path)
	}
	var head struct{ Types map[string]string }
	if err := json.Unmarshal(sc.Bytes(), &head); err != nil {
		t.Fatalf("DuckDB read-back of %s: the first line is not the column types: %v", path, err)
	}
	for sc.Scan() {
		rows = append(rows, append(json.RawMessage(nil), sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("DuckDB read-back of %s: %v", path, err)
	}
	return head.Types, rows
}

// duckDBReader returns node's path and the path of test/duckdb/read.mjs copied beside the
// installed @duckdb/node-api.
func duckDBReader(t testing.TB) (node, script string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node and npm are needed to read Parquet files back with DuckDB")
		}
		t.Skip("node or npm not installed: DuckDB read-back skipped")
	}
	src := filepath.Join(repoRoot(), "test", "duckdb")
	files := map[string][]byte{}
	for _, f := range []string{"package.json", "package-lock.json", "read.mjs"} {
		files[f] = ReadFile(t, filepath.Join(src, f))
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
			WriteFile(t, filepath.Join(tmp, f), files[f], 0o644)
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
	// The script is copied beside node_modules so that its import resolves there; a per-process
	// name keeps concurrent runs from writing one file.
	script = filepath.Join(dir, fmt.Sprintf("read-%d.mjs", os.Getpid()))
	WriteFile(t, script, files["read.mjs"], 0o644)
	t.Cleanup(func() { os.Remove(script) })
	return node, script
}
