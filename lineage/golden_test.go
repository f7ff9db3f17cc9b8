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
