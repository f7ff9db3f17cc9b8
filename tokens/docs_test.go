package tokens

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestFindingsDocumented: every finding code (the Finding* constants) has its row in
// docs/tokens.md's findings table, so a trainer who meets one can look it up.
func TestFindingsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/tokens.md")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "tokens.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		vs, ok := node.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Finding") || len(vs.Values) != 1 {
			return true
		}
		lit, ok := vs.Values[0].(*ast.BasicLit)
		if !ok {
			return true
		}
		code, err := strconv.Unquote(lit.Value)
		if err != nil {
			t.Fatal(err)
		}
		n++
		if !strings.Contains(string(doc), "\n| `"+code+"` |") {
			t.Errorf("finding %s (%s) has no row in docs/tokens.md", code, vs.Names[0].Name)
		}
		return true
	})
	if n < 15 {
		t.Fatalf("found %d finding constants", n)
	}
}
