package modelcalls

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// importRules is the layering of the module, bottom to top: for each package (path relative to the
// module), the module packages it may import in its non-test files. A row lists what the package
// may use, not only what it uses today. docs/architecture.md draws the same table.
//
// A package without a row fails TestImportRules: a new package gets a row saying where it sits.
var importRules = map[string][]string{
	// Leaves: no module imports.
	"internal/jsonscan":  nil,
	"internal/fsutil":    nil,
	"internal/uring":     nil,
	"internal/stats":     nil,
	"internal/jsonl":     nil,
	"internal/ordered":   nil,
	"internal/config":    nil,
	"internal/hostcheck": nil,
	"internal/schema":    nil,
	"internal/cputime":   nil,
	"internal/editdist":  nil,
	"sse":                nil,

	// Identity and dialects.
	"rollout": {"internal/jsonscan"},
	"dialect": {"internal/jsonscan", "sse", "rollout"},

	// The capture store and line format.
	"capture": {"internal/fsutil", "internal/jsonscan", "internal/schema", "internal/uring", "rollout"},

	// The record model: one record from one capture line.
	"record": {"capture", "dialect", "internal/jsonscan", "internal/schema", "internal/stats", "rollout"},

	// Token ids and logprobs an engine reports, and their export.
	"tokens":             {"capture", "dialect", "internal/jsonscan", "internal/schema", "rollout", "sse"},
	"tokens/tokenexport": {"capture", "internal/fsutil", "internal/jsonscan", "internal/schema", "record", "rollout", "tokens"},

	// What captures, shows or ships records; none of them links the merge (the root).
	"gateway":    {"capture", "dialect", "internal/fsutil", "internal/hostcheck", "internal/jsonscan", "internal/schema", "record", "rollout", "sse", "tokens"},
	"view":       {"capture", "dialect", "internal/editdist", "internal/hostcheck", "internal/jsonscan", "internal/schema", "internal/stats", "lineage", "record", "rollout", "rundiff", "tokens"},
	"otelexport": {"capture", "dialect", "internal/jsonscan", "internal/schema", "internal/stats", "record", "rollout"},
	"replay":     {"capture", "dialect", "gateway", "internal/hostcheck", "internal/jsonscan", "internal/schema", "record", "rollout", "sse"},

	// What is derived from a rollout's records: the calls' lineage and the samples built on it.
	// Lineage sits below the root (the merge attaches it), so it may not import the viewer.
	"lineage": {"capture", "dialect", "internal/jsonscan", "internal/schema", "record", "rollout"},
	"samples": {"capture", "dialect", "internal/jsonscan", "lineage", "record", "rollout", "tokens"},
	// The comparison of two runs of a rollout: what `diff` prints and the viewer draws.
	"rundiff": {"capture", "record", "rollout"},

	// The root package: read, aggregate, merge, clear, the seed-shaped API.
	"": {"capture", "internal/jsonscan", "internal/schema", "internal/stats", "lineage", "record", "rollout"},

	// The demo and the command line, at the top.
	"internal/demo": {"", "capture", "dialect", "gateway", "record", "rollout"},
	"internal/cli": {"", "capture", "dialect", "gateway", "internal/config", "internal/demo", "internal/editdist", "internal/hostcheck",
		"internal/jsonl", "internal/jsonscan", "internal/ordered", "internal/schema", "internal/stats", "lineage",
		"otelexport", "record", "replay", "rollout", "rundiff", "samples", "tokens", "tokens/tokenexport", "view"},
	"cmd/modelcalls": {"internal/cli"},

	// Test helpers: imported by tests only (testOnly).
	"internal/capturetest":             {"capture", "record"},
	"internal/capturetest/capturefile": {"capture", "rollout"},
	"internal/capturetest/jsonmember":  nil,
	"internal/jsonscan/orjsonrules":    nil,
}

// testOnly are the packages no non-test file outside test/ may import.
var testOnly = []string{"internal/capturetest", "internal/capturetest/capturefile", "internal/capturetest/jsonmember", "internal/jsonscan/orjsonrules"}

// TestImportRules checks every module package's imports (as `go list` reports them, for linux,
// darwin and windows) against importRules. Packages under test/ (benchmarks, e2e, reliability
// suites) may import any package but internal/cli and cmd/ (their tests drive the CLI as tests of
// any package may: only non-test files are checked).
func TestImportRules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		imports := listImports(t, goos)
		pkgs := make([]string, 0, len(imports))
		for p := range imports {
			pkgs = append(pkgs, p)
		}
		sort.Strings(pkgs)
		for _, p := range pkgs {
			under := p == "test" || strings.HasPrefix(p, "test/")
			allowed, ok := importRules[p]
			if !ok && !under {
				t.Errorf("GOOS=%s: package %q has no row in importRules (imports_test.go): add one saying which packages it may import, and draw it in docs/architecture.md", goos, display(p))
				continue
			}
			for _, imp := range imports[p] {
				switch {
				case under:
					if imp == "internal/cli" || strings.HasPrefix(imp, "cmd/") {
						t.Errorf("GOOS=%s: %s imports %s (only cmd/modelcalls may)", goos, display(p), display(imp))
					}
				case !slices.Contains(allowed, imp):
					t.Errorf("GOOS=%s: %s imports %s, which importRules does not allow (allowed: %s)", goos, display(p), display(imp), displayAll(allowed))
				case slices.Contains(testOnly, imp) && !slices.Contains(testOnly, p):
					t.Errorf("GOOS=%s: %s imports the test helper %s", goos, display(p), display(imp))
				}
			}
		}
	}
}

// TestImportRulesTable: every package of the table imports only packages that have a row
// themselves, and the table has no cycle (a row above may not be imported by a row below).
func TestImportRulesTable(t *testing.T) {
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(p string, path []string)
	visit = func(p string, path []string) {
		switch state[p] {
		case 1:
			t.Errorf("importRules allows a cycle: %s", strings.Join(append(path, display(p)), " -> "))
			return
		case 2:
			return
		}
		state[p] = 1
		for _, imp := range importRules[p] {
			if _, ok := importRules[imp]; !ok {
				t.Errorf("importRules: %s may import %s, which has no row", display(p), display(imp))
				continue
			}
			visit(imp, append(path, display(p)))
		}
		state[p] = 2
	}
	for p := range importRules {
		visit(p, nil)
	}
}

// listImports returns, for each package of the module built for goos, the module packages its
// non-test files import, as paths relative to the module ("" for the root).
func listImports(t *testing.T, goos string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Env = append(os.Environ(), "GOOS="+goos)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("GOOS=%s go list: %v\n%s", goos, err, stderr.Bytes())
	}
	const module = "github.com/modelcalls/modelcalls"
	rel := func(p string) (string, bool) {
		if p == module {
			return "", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	imports := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		p, ok := rel(f[0])
		if !ok {
			continue
		}
		imports[p] = []string{}
		for _, imp := range f[1:] {
			if r, ok := rel(imp); ok {
				imports[p] = append(imports[p], r)
			}
		}
	}
	if len(imports) == 0 {
		t.Fatalf("GOOS=%s go list listed no package", goos)
	}
	return imports
}

func display(p string) string {
	if p == "" {
		return "the root package"
	}
	return p
}

func displayAll(ps []string) string {
	if len(ps) == 0 {
		return "none"
	}
	d := make([]string, len(ps))
	for i, p := range ps {
		d[i] = display(p)
	}
	return strings.Join(d, ", ")
}
