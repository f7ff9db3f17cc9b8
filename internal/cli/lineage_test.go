package cli

import (
	"encoding/json"
	"testing"
)

// lineageCaptures are real harness captures (lineage/testdata/README.md).
const lineageCaptures = "../../lineage/testdata/captures"

// TestLineageTree pins the tree of a Claude Code run with real retries and a restart.
func TestLineageTree(t *testing.T) {
	out, errOut, code := runCLI(t, "", "lineage", "--capture-dir", lineageCaptures, "claude-code-replay-misses")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	checkGolden(t, "lineage-claude-code-replay-misses.txt", out)
}

func TestLineageJSON(t *testing.T) {
	out, errOut, code := runCLI(t, "", "lineage", lineageCaptures, "e2e-scripted-codex", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v struct {
		RolloutID string `json:"rollout_id"`
		Calls     []struct {
			Relation string `json:"relation"`
		} `json:"calls"`
		MainChain []string `json:"main_chain"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if v.RolloutID != "e2e-scripted-codex" || len(v.Calls) != 2 || v.Calls[1].Relation != "extends" || len(v.MainChain) != 2 {
		t.Errorf("%s", out)
	}
}

func TestLineageExits(t *testing.T) {
	checkExits(t, []exitCase{
		{"bad format", []string{"lineage", lineageCaptures, "e2e-scripted-codex", "--format", "xml"}, ExitUsage, "--format"},
		{"missing rollout", []string{"lineage", lineageCaptures, "nope"}, ExitNotFound, "no capture"},
		{"missing dir", []string{"lineage", "/nonexistent-dir", "r1"}, ExitNotFound, "does not exist"},
		{"no rollout", []string{"lineage", "--capture-dir", lineageCaptures}, ExitUsage, "ROLLOUT_ID"},
	})
}
