// Package duckdbtest reads a Parquet file back with DuckDB, for the tests that check what
// `modelcalls export tokens` writes: the script test/duckdb/read.mjs, run by node beside its
// pinned @duckdb/node-api, which npm ci installs once per lock file into the user's cache
// directory (<cache>/modelcalls-duckdb/<first 16 hex of the lock file's SHA-256>).
//
// It is imported by tests (the token export's and the e2e suite's), never by product code.
package duckdbtest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// scriptDir is where the read-back script and its npm pin live, relative to the repository root.
var scriptDir = filepath.Join("test", "duckdb")

// Result is what DuckDB read from one Parquet file.
type Result struct {
	// Types maps each column name to DuckDB's type for it ("BIGINT[]", "DOUBLE", "STRUCT(...)[]").
	Types map[string]string
	// Rows holds each row as DuckDB's to_json gives it, in file order.
	Rows []json.RawMessage
}

// Read reads file with DuckDB. Without node or npm on PATH the test is skipped, except under
// CI=true, where it fails; an npm or DuckDB failure fails the test with its output.
func Read(t testing.TB, file string) Result {
	t.Helper()
	node, script := reader(t)
	cmd := exec.Command(node, script, file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("DuckDB read-back of %s: %v\n%s", file, err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	if !sc.Scan() {
		t.Fatalf("DuckDB read-back of %s: no output", file)
	}
	var res Result
	var head struct{ Types map[string]string }
	if err := json.Unmarshal(sc.Bytes(), &head); err != nil {
		t.Fatalf("DuckDB read-back: first line %q: %v", sc.Bytes(), err)
	}
	res.Types = head.Types
	for sc.Scan() {
		res.Rows = append(res.Rows, json.RawMessage(bytes.Clone(sc.Bytes())))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("DuckDB read-back: %v", err)
	}
	return res
}

// reader returns node's path and the path of read.mjs copied beside the pinned
// @duckdb/node-api, installing it first when the cache has no copy for this lock file.
func reader(t testing.TB) (node, script string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node and npm are needed to read the Parquet file back with DuckDB")
		}
		t.Skip("node or npm not installed: DuckDB read-back skipped")
	}
	src, err := findScriptDir()
	if err != nil {
		t.Fatal(err)
	}
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
	// The script is copied beside node_modules so that its import resolves there; a per-process
	// name keeps concurrent test binaries from writing one file.
	script = filepath.Join(dir, fmt.Sprintf("read-%d.mjs", os.Getpid()))
	if err := os.WriteFile(script, files["read.mjs"], 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(script) })
	return node, script
}

// findScriptDir finds test/duckdb in the working directory or the nearest parent holding it: a
// test runs in its package's directory, somewhere below the repository root.
func findScriptDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, scriptDir)
		if _, err := os.Stat(filepath.Join(p, "read.mjs")); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("duckdbtest: no test/duckdb/read.mjs in the working directory or a parent")
		}
		dir = parent
	}
}
