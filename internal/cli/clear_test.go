package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// seedRollout gives rollout id in st a capture file, an incomplete marker and an outstanding claim.
func seedRollout(t *testing.T, st *capture.Store, id string) {
	t.Helper()
	if err := st.AppendExchange(id, exchange("m", `{"prompt_tokens":1}`, 1, nil, 200, nil)); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkIncomplete(id); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(id, capture.NewModelCallID()); err != nil {
		t.Fatal(err)
	}
}

// rolloutFiles lists the capture artefacts of id present in dir: capture file, marker, and "claims"
// when the rollout has live claims that count for it.
func rolloutFiles(t *testing.T, dir, id string) []string {
	t.Helper()
	var present []string
	for _, suffix := range []string{capture.CaptureSuffix, capture.MarkerSuffix} {
		if _, err := os.Stat(filepath.Join(dir, id+suffix)); err == nil {
			present = append(present, suffix)
		}
	}
	st, err := capture.OpenExisting(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := st.Claims(id); err != nil || c.Live+c.Stale > 0 {
		present = append(present, "claims")
	}
	return present
}

func TestClearRemovesListedRollouts(t *testing.T) {
	dir1, dir2 := t.TempDir(), t.TempDir()
	st1, _ := capture.Open(dir1)
	st2, _ := capture.Open(dir2)
	for _, id := range []string{"0-0", "0-1", "x-keep", "0-2-a1"} {
		seedRollout(t, st1, id)
	}
	seedRollout(t, st2, "0-1")

	in := strings.Join([]string{
		`{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1}`,
		`{"_ng_task_index": 0, "_ng_rollout_index": 1}`,
		``,
		`{"no_rollout_fields": true}`,
		`{"_ng_task_index": 0, "_ng_rollout_index": 2, "_ng_attempt_index": 1}`,
		`{"_ng_rollout_id": "never-captured"}`,
		`{"_ng_task_index": 0, "_ng_rollout_index": 0}`, // listed twice: counted once
	}, "\n") + "\n"
	// The seeded claims are live (this process): --force clears anyway, without waiting.
	out, errOut, code := runCLI(t, in, "clear", "--capture-dir", dir1, "--capture-dir", dir2, "--force", "--wait", "0")
	if code != ExitOK {
		t.Fatalf("exit %d; stderr %s", code, errOut)
	}
	if want := "cleared 3 rollouts (4 listed, 1 had nothing to clear)\n"; out != want {
		t.Errorf("stdout %q; want %q", out, want)
	}
	for _, id := range []string{"0-0", "0-1", "0-2-a1"} {
		if got := rolloutFiles(t, dir1, id); len(got) != 0 {
			t.Errorf("%s still has %v in the first dir", id, got)
		}
	}
	if got := rolloutFiles(t, dir2, "0-1"); len(got) != 0 {
		t.Errorf("0-1 still has %v in the second dir", got)
	}
	if got := rolloutFiles(t, dir1, "x-keep"); len(got) != 3 {
		t.Errorf("unlisted rollout x-keep lost files: has %v", got)
	}
	if !strings.Contains(errOut, "capture writes still in flight") || !strings.Contains(errOut, "0-0"+capture.OrphanSuffix) {
		t.Errorf("stderr does not warn about live claims and name the orphan file: %q", errOut)
	}
}

func TestClearReportsBadLines(t *testing.T) {
	dir := t.TempDir()
	st, _ := capture.Open(dir)
	seedRollout(t, st, "1-0")
	inFile := filepath.Join(t.TempDir(), "rollouts.jsonl")
	in := "[1,2]\n" + `{"_ng_rollout_id": "a/b"}` + "\n" + `{"_ng_task_index": 1, "_ng_rollout_index": 0}` + "\n"
	capturetest.WriteFile(t, inFile, []byte(in), 0o644)
	out, errOut, code := runCLI(t, "", "clear", "--capture-dir", dir, "--in", inFile, "--force", "--wait", "0")
	if code != ExitFailure {
		t.Errorf("exit %d; want %d", code, ExitFailure)
	}
	if !strings.Contains(out, "cleared 1 rollout ") {
		t.Errorf("stdout %q; the valid rollout must still be cleared", out)
	}
	for _, want := range []string{"line 1: not cleared", "line 2: not cleared", "invalid rollout id"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q: %s", want, errOut)
		}
	}
	if got := rolloutFiles(t, dir, "1-0"); len(got) != 0 {
		t.Errorf("1-0 still has %v", got)
	}
}

func TestClearUsage(t *testing.T) {
	checkExits(t, []exitCase{
		{"no capture dir", []string{"clear"}, ExitUsage, "--capture-dir is required"},
		{"missing capture dir", []string{"clear", "--capture-dir", "/nonexistent/dir"}, ExitNotFound, "does not exist"},
		{"missing input", []string{"clear", "--capture-dir", t.TempDir(), "--in", "/nonexistent/in.jsonl"}, ExitNotFound, "does not exist"},
		{"input is a dir", []string{"clear", "--capture-dir", t.TempDir(), "--in", gymCapture}, ExitNotFound, "--in " + gymCapture + " is a directory, not a file"},
		{"negative wait", []string{"clear", "--capture-dir", t.TempDir(), "--wait", "-1s"}, ExitUsage, "must be >= 0"},
		{"positional argument", []string{"clear", "--capture-dir", t.TempDir(), "extra"}, ExitUsage, "unknown command"},
	})
}

// A live call holds clear: without --force the rollout is left untouched and clear exits 1 once the
// wait is over; a claim released during the wait lets clear go ahead.
func TestClearWaitsForLiveCalls(t *testing.T) {
	dir := t.TempDir()
	st, _ := capture.Open(dir)
	if err := st.Append("2-0", []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	c, err := st.Claim("2-0", capture.NewModelCallID())
	if err != nil {
		t.Fatal(err)
	}
	in := `{"_ng_task_index": 2, "_ng_rollout_index": 0}` + "\n"
	out, errOut, code := runCLI(t, in, "clear", "--capture-dir", dir, "--wait", "20ms")
	if code != ExitFailure {
		t.Errorf("exit %d with a call in flight; want %d", code, ExitFailure)
	}
	if !strings.Contains(errOut, "rollout 2-0: not cleared: 1 capture writes still in flight") || !strings.Contains(out, "1 not cleared") {
		t.Errorf("stdout %q stderr %q", out, errOut)
	}
	if got := rolloutFiles(t, dir, "2-0"); len(got) != 2 {
		t.Errorf("rollout with a call in flight was touched: has %v", got)
	}
	// Released while clear waits (the wait is long; when the release comes first, clear finds
	// nothing live at once): cleared, exit 0.
	go func() {
		time.Sleep(20 * time.Millisecond)
		c.Release()
	}()
	out, errOut, code = runCLI(t, in, "clear", "--capture-dir", dir, "--wait", "30s")
	if code != ExitOK || out != "cleared 1 rollout (1 listed, 0 had nothing to clear)\n" {
		t.Errorf("exit %d stdout %q stderr %q", code, out, errOut)
	}
	if got := rolloutFiles(t, dir, "2-0"); len(got) != 0 {
		t.Errorf("2-0 still has %v", got)
	}
}

// TestOrphanHint: after clear --force with a call in flight, the call's line goes to the orphan
// file; calls and show then say so on stderr (how many lines, the file, why they are not shown)
// instead of showing 0 calls without a word.
func TestOrphanHint(t *testing.T) {
	st := capturetest.NewStore(t)
	dir := st.Dir()
	mcid := capture.NewModelCallID()
	claim, err := st.Claim("r1", mcid)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AppendExchange("r1", exchange("m", `{"prompt_tokens":1}`, 1, nil, 200, nil)); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, `{"_ng_rollout_id": "r1"}`+"\n", "clear", "--capture-dir", dir, "--force", "--wait", "0"); code != ExitOK {
		t.Fatalf("clear --force: exit %d: %s", code, errOut)
	}
	// The next attempt's capture file exists (empty, as after the gateway's first open), and the
	// call that was in flight finishes now.
	next, err := capture.OpenExisting(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := next.CapturePath("r1")
	capturetest.WriteFile(t, p, nil, 0o640)
	ex := exchange("m", `{"prompt_tokens":2}`, 1, nil, 200, nil)
	ex.ModelCallID = mcid
	if err := st.AppendExchange("r1", ex); err != nil {
		t.Fatal(err)
	}
	claim.Release()
	op := filepath.Join(dir, "r1"+capture.OrphanSuffix)
	if _, err := os.Stat(op); err != nil {
		t.Fatalf("no orphan file: %v", err)
	}
	want := "rollout r1: 1 line in " + op + " not shown: calls of an earlier attempt, still in flight when the rollout was cleared (clear --force)"
	for _, args := range [][]string{{"calls", dir, "r1"}, {"show", dir, "r1"}} {
		out, errOut, code := runCLI(t, "", args...)
		if code != ExitOK || !strings.Contains(errOut, want) || !strings.Contains(errOut, "r1"+capture.ClearedSuffix) {
			t.Errorf("%q: exit %d, stderr %q; want 0 and %q", args, code, errOut, want)
		}
		if args[0] == "calls" && strings.Count(out, "\n") != 1 {
			t.Errorf("calls shows more than its header: %q", out)
		}
	}
	// Without the capture file, the not-found message names the orphan file too.
	os.Remove(p)
	if _, errOut, code := runCLI(t, "", "calls", dir, "r1"); code != ExitNotFound || !strings.Contains(errOut, op+" holds 1 line of calls in flight when it was cleared") {
		t.Errorf("no capture file: exit %d, stderr %q", code, errOut)
	}
	// A rollout without an orphan file gets no hint.
	if err := st.AppendExchange("r2", exchange("m", `{"prompt_tokens":1}`, 1, nil, 200, nil)); err != nil {
		t.Fatal(err)
	}
	if _, errOut, _ := runCLI(t, "", "calls", dir, "r2"); strings.Contains(errOut, "not shown") {
		t.Errorf("hint without an orphan file: %q", errOut)
	}
}
