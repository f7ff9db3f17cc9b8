package lineage

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/record"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// TestGoldenHarnessCaptures pins the lineage of real harness runs captured by the gateway
// (testdata/captures; testdata/README.md says where each comes from). Each golden was checked by
// eye once; -update rewrites them.
func TestGoldenHarnessCaptures(t *testing.T) {
	store, err := capture.OpenExisting("testdata/captures")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	files, err := filepath.Glob("testdata/captures/*" + capture.CaptureSuffix)
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures: %v", err)
	}
	for _, f := range files {
		id := strings.TrimSuffix(filepath.Base(f), capture.CaptureSuffix)
		t.Run(id, func(t *testing.T) {
			l, damaged, err := Read(store, id)
			if err != nil || damaged != 0 {
				t.Fatalf("read: %v (%d damaged)", err, damaged)
			}
			got, err := json.MarshalIndent(l, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "golden", id+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update once and check the result by eye)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("lineage of %s differs from %s:\n%s", id, golden, got)
			}
		})
	}
}

// TestGoldenSideCall: in a real opencode run the session-title call (its own system prompt and the
// user's prompt quoted, no tools, sent first under the same session id) is a root off the main
// chain, and the main conversation (tool call, then answer) is the main chain.
func TestGoldenSideCall(t *testing.T) {
	store, err := capture.OpenExisting("testdata/captures")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	l, _, err := Read(store, "e2e-scripted-opencode")
	if err != nil {
		t.Fatal(err)
	}
	title, first, answer := l.Calls[0], l.Calls[1], l.Calls[2]
	if title.Relation != RelationRoot || title.MainChain || first.Relation != RelationRoot || !first.MainChain ||
		answer.Relation != RelationExtends || answer.ParentCallID == nil || *answer.ParentCallID != first.CallID || !answer.MainChain {
		t.Errorf("title %s main %v, first %s main %v, answer %s main %v", title.Relation, title.MainChain, first.Relation,
			first.MainChain, answer.Relation, answer.MainChain)
	}
	if l.Summary.Roots != 2 || l.Summary.OffMainChain != 1 || len(l.MainChain) != 2 {
		t.Errorf("summary %+v, main chain %v", l.Summary, l.MainChain)
	}
}

// TestGoldenCompaction: in a real Claude Code run compacted with /compact between two prompts of one
// session, the summary request (the conversation up to the tool result, then the instruction;
// Claude Code leaves the latest answer out of it and keeps that answer verbatim after the summary)
// is a fork after the first call's answer, which the first prompt's answer already continued; the
// call after the compaction is a compaction of the summary request, with the kept answer the
// model's (the call that gave it); its tool round trip extends it. The main chain is the longest
// chain across the compaction: the first call, the summary request, the call after the compaction
// and its tool round trip; the first prompt's answer (#1), whose context the summary request branched
// from, is the only call off it.
func TestGoldenCompaction(t *testing.T) {
	store, err := capture.OpenExisting("testdata/captures")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	l, _, err := Read(store, "e2e-scripted-claude-code-compact")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Calls) != 5 {
		t.Fatalf("%d calls, want 5", len(l.Calls))
	}
	c := l.Calls
	parent := func(n Node) string {
		if n.ParentCallID == nil {
			return ""
		}
		return *n.ParentCallID
	}
	want := []struct {
		rel    Relation
		parent string
		main   bool
	}{
		{RelationRoot, "", true},
		{RelationExtends, c[0].CallID, false},
		{RelationFork, c[0].CallID, true},
		{RelationCompaction, c[2].CallID, true},
		{RelationExtends, c[3].CallID, true},
	}
	for i, w := range want {
		if c[i].Relation != w.rel || parent(c[i]) != w.parent || c[i].MainChain != w.main {
			t.Errorf("call %d: %s of %q main %v, want %s of %q main %v", i, c[i].Relation, parent(c[i]), c[i].MainChain,
				w.rel, w.parent, w.main)
		}
	}
	var kept []string
	for _, m := range c[3].Messages {
		if m.Author == AuthorModel {
			kept = append(kept, m.FromCallID)
		}
	}
	if len(kept) != 1 || kept[0] != c[1].CallID {
		t.Errorf("model turns after the compaction from %v, want the first prompt's answer %s", kept, c[1].CallID)
	}
	if l.Summary.Compactions != 1 || l.Summary.Forks != 1 || l.Summary.OffMainChain != 1 {
		t.Errorf("summary %+v", l.Summary)
	}
}

// TestGoldenCodexCompaction: in a real Codex run compacted after its first turn (post-turn
// compaction) and resumed with the prompt again, the summary request (the whole history, then the
// compaction prompt, no tools) extends the first turn's last call; the call after the compaction
// keeps the old history's user messages (its first call's context is a prefix of it) and pastes
// the summary after them, and is a compaction of the summary request, not a fork of the first call.
// The main chain crosses the compaction: every call, the summary request included, ending in the
// conversation's last call.
func TestGoldenCodexCompaction(t *testing.T) {
	store, err := capture.OpenExisting("testdata/captures")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	l, _, err := Read(store, "e2e-scripted-codex-compact")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Calls) != 5 {
		t.Fatalf("%d calls, want 5", len(l.Calls))
	}
	c := l.Calls
	want := []struct {
		rel    Relation
		parent string
		main   bool
	}{
		{RelationRoot, "", true},
		{RelationExtends, c[0].CallID, true},
		{RelationExtends, c[1].CallID, true},
		{RelationCompaction, c[2].CallID, true},
		{RelationExtends, c[3].CallID, true},
	}
	for i, w := range want {
		parent := ""
		if c[i].ParentCallID != nil {
			parent = *c[i].ParentCallID
		}
		if c[i].Relation != w.rel || parent != w.parent || c[i].MainChain != w.main {
			t.Errorf("call %d: %s of %q main %v, want %s of %q main %v", i, c[i].Relation, parent, c[i].MainChain,
				w.rel, w.parent, w.main)
		}
	}
	if l.Summary.Compactions != 1 || l.Summary.Forks != 0 || l.Summary.OffMainChain != 0 {
		t.Errorf("summary %+v", l.Summary)
	}
}

// TestTokenReaderAudit: ids supplied through a TokenReader reach the audit of a real capture's
// extends edge, exact and drifted.
func TestTokenReaderAudit(t *testing.T) {
	store, err := capture.OpenExisting("testdata/captures")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	recs, _, err := record.ReadAvailableRecords(store, "e2e-scripted-pi-chat")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		child []int64
		ok    bool
	}{{[]int64{1, 2, 3, 4}, true}, {[]int64{1, 2, 5, 4}, false}} {
		ids := map[int]*TokenIDs{0: {Prompt: []int64{1, 2}, Generated: []int64{3}}, 1: {Prompt: tc.child, Generated: []int64{6}}}
		l := Derive(FromRecordsWith(recs, func(r *record.ModelCallRecord, _ []byte) *TokenIDs { return ids[r.CallIndex] }))
		a := l.Calls[1].Audit
		if a == nil || a.OK != tc.ok || l.Summary.AuditedEdges != 1 || (l.Summary.AuditFailures == 1) == tc.ok {
			t.Errorf("child %v: audit %+v, summary %+v", tc.child, a, l.Summary)
		}
	}
}

// TestReadDeclared: ids declared on the capture line (client_parent_call_id,
// client_logical_request_id) reach lineage as its strongest evidence.
func TestReadDeclared(t *testing.T) {
	b, err := os.ReadFile("testdata/captures/e2e-scripted-pi-chat.capture.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	var first struct {
		ID string `json:"model_call_id"`
	}
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	lines[1] = append(bytes.TrimSuffix(lines[1], []byte("}")), []byte(`,"client_logical_request_id":"L1","client_parent_call_id":"`+first.ID+`"}`)...)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "r.capture.jsonl"), append(bytes.Join(lines, []byte("\n")), '\n'), 0o640); err != nil {
		t.Fatal(err)
	}
	store, err := capture.OpenExisting(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	calls, damaged, err := ReadCalls(store, "r", nil)
	if err != nil || damaged != 0 {
		t.Fatalf("%v, %d damaged", err, damaged)
	}
	if calls[1].LogicalRequestID != "L1" || calls[1].DeclaredParentID != first.ID || calls[0].DeclaredParentID != "" {
		t.Fatalf("declared ids: %+v / %+v", calls[0], calls[1])
	}
	if n := Derive(calls).Calls[1]; n.Evidence != EvidenceDeclared || n.Relation != RelationExtends || *n.ParentCallID != first.ID {
		t.Errorf("call 1: %+v", n)
	}
}
