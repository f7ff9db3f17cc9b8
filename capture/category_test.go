package capture

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

func TestStatusCategory(t *testing.T) {
	tests := []struct {
		status int
		want   string
	}{
		{0, ""}, {200, ""}, {204, ""}, {302, ""}, {399, ""},
		{400, "client_error"}, {401, "auth"}, {403, "auth"}, {404, "not_found"},
		{408, "timeout"}, {409, "client_error"}, {413, "client_error"}, {422, "client_error"},
		{429, "rate_limit"}, {499, "client_error"},
		{500, "upstream_error"}, {502, "upstream_error"}, {503, "upstream_error"},
		{504, "timeout"}, {529, "upstream_error"}, {600, "upstream_error"}, {999, "upstream_error"},
	}
	for _, tt := range tests {
		if got := StatusCategory(tt.status); got != tt.want {
			t.Errorf("StatusCategory(%d) = %q, want %q", tt.status, got, tt.want)
		}
	}
}

// TestCategoriesComplete: Categories lists every Category* constant of category.go once, so a
// category added there is known to every reader that checks a value against it (calls and stats
// --error).
func TestCategoriesComplete(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "category.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			for _, name := range spec.(*ast.ValueSpec).Names {
				if strings.HasPrefix(name.Name, "Category") {
					consts = append(consts, name.Name)
				}
			}
		}
	}
	if len(consts) < 13 {
		t.Fatalf("found %d Category constants in category.go; the parse is wrong", len(consts))
	}
	got := Categories()
	if len(got) != len(consts) {
		t.Errorf("Categories() has %d values, category.go declares %d constants %v", len(got), len(consts), consts)
	}
	seen := map[string]bool{}
	for _, c := range got {
		if seen[c] || !IsCategory(c) {
			t.Errorf("Categories() holds %q twice, or IsCategory rejects it", c)
		}
		seen[c] = true
	}
	if IsCategory("Rate_Limit") || IsCategory("") {
		t.Error("IsCategory accepts a value that is no category")
	}
}
