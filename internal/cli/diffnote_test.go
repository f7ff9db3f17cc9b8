package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/rundiff"
)

// TestDiffPrintsNote: a first difference whose two sides read the same prints the note that says
// why, wrapped like the rest.
func TestDiffPrintsNote(t *testing.T) {
	note := "both sides read the same here, yet the values differ"
	res := &rundiff.Result{Pairs: []rundiff.Pair{}, First: &rundiff.Difference{What: "messages", A: "user: x", B: "user: x", Note: &note}}
	var b bytes.Buffer
	writeDiff(&b, res, 80)
	if !strings.Contains(b.String(), "  (both sides read the same here, yet the values differ)") {
		t.Errorf("report:\n%s", b.String())
	}
}
