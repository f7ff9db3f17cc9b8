package modelcalls

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
	"github.com/modelcalls/modelcalls/internal/capturetest/jsonmember"
	"github.com/modelcalls/modelcalls/rollout"
)

var update = flag.Bool("update", false, "rewrite golden files")

// cut removes the given [start, end) ranges (sorted, disjoint) from b.
func cut(b []byte, ranges ...[2]int) []byte {
	var out []byte
	pos := 0
	for _, r := range ranges {
		out = append(out, b[pos:r[0]]...)
		pos = r[1]
	}
	return append(out, b[pos:]...)
}

// checkSplice verifies that out is in with only the value of ng_model_call_capture (and of
// ng_agent_observations when joined) replaced, or with ng_model_call_capture appended as the last
// member: every other byte identical and in order.
func checkSplice(t testing.TB, in, out []byte, joined bool) {
	t.Helper()
	if !json.Valid(out) {
		t.Fatalf("output is not JSON: %s", out)
	}
	inSpans, outSpans := jsonmember.Members(t, in), jsonmember.Members(t, out)
	var inCut, outCut [][2]int
	if joined {
		a, ok1 := jsonmember.Last(inSpans, FieldAgentObservations)
		b, ok2 := jsonmember.Last(outSpans, FieldAgentObservations)
		if !ok1 || !ok2 {
			t.Fatal("observations missing")
		}
		inCut, outCut = append(inCut, [2]int{a.ValueStart, a.ValueEnd}), append(outCut, [2]int{b.ValueStart, b.ValueEnd})
	}
	oc, ok := jsonmember.Last(outSpans, FieldModelCallCapture)
	if !ok {
		t.Fatalf("no %s in %s", FieldModelCallCapture, out)
	}
	if ic, had := jsonmember.Last(inSpans, FieldModelCallCapture); had {
		inCut, outCut = append(inCut, [2]int{ic.ValueStart, ic.ValueEnd}), append(outCut, [2]int{oc.ValueStart, oc.ValueEnd})
	} else {
		if outSpans[len(outSpans)-1] != oc {
			t.Fatalf("appended %s is not the last member: %s", FieldModelCallCapture, out)
		}
		outCut = append(outCut, [2]int{oc.Start, oc.ValueEnd})
	}
	sortRanges(inCut)
	sortRanges(outCut)
	if a, b := cut(in, inCut...), cut(out, outCut...); !bytes.Equal(a, b) {
		t.Fatalf("bytes outside the spliced values changed\n in: %s\nout: %s", a, b)
	}
}

func sortRanges(r [][2]int) {
	if len(r) == 2 && r[1][0] < r[0][0] {
		r[0], r[1] = r[1], r[0]
	}
}

// spliceDir builds the capture dir the splice goldens merge against (deterministic content).
func spliceDir(t testing.TB) string {
	dir := t.TempDir()
	capturefile.WriteCapture(t, dir, "u-1", ok("call-u1", 10)+"\n")
	capturefile.WriteCapture(t, dir, "0-0", ok("call-00", 20)+"\n"+ok("call-01", 5)+"\n")
	capturefile.WriteCapture(t, dir, "7-2-a3", ok("call-72", 1)+"\n")
	return dir
}

// TestMergeSpliceGolden merges testdata/merge/splice.in.jsonl (records with unicode, escapes, odd
// whitespace, nested and repeated ng_model_call_capture, ...) and compares with the golden output
// byte for byte; each attached line is also checked structurally with checkSplice. Run with
// -update to rewrite the golden file after a deliberate change.
func TestMergeSpliceGolden(t *testing.T) {
	m, err := NewMerger([]string{spliceDir(t)}, MergeOptions{DrainTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.ReadFile("testdata/merge/splice.in.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	for n, line := range bytes.SplitAfter(in, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		body := bytes.TrimSuffix(line, []byte("\n"))
		out, res, err := m.Merge(context.Background(), body)
		switch {
		case err != nil:
			if !bytes.Equal(out, body) {
				t.Errorf("line %d: error %v but the line was changed", n+1, err)
			}
			fmt.Fprintf(&got, "# line %d: error: %v\n", n+1, err)
		case !res.Attached:
			if !bytes.Equal(out, body) {
				t.Errorf("line %d: not attached but changed", n+1)
			}
			fmt.Fprintf(&got, "# line %d: untouched\n", n+1)
		default:
			checkSplice(t, body, out, res.ObservationsJoined)
		}
		got.Write(out)
		got.WriteByte('\n')
	}
	golden := "testdata/merge/splice.golden.jsonl"
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		gl, wl := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("golden line %d\n got: %s\nwant: %s", i+1, g, w)
			}
		}
	}
}

func TestMergeLineErrors(t *testing.T) {
	m, err := NewMerger([]string{t.TempDir()}, MergeOptions{DrainTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, line string
		wantErr    bool
		invalidID  bool
	}{
		{"array", `[1,2]`, true, false},
		{"not JSON", `{"_ng_task_index": 1,`, true, false},
		{"NaN reward", `{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": NaN}`, true, false},
		{"empty", ``, true, false},
		{"no rollout fields", `{"question": "q", "answer": 4}`, false, false},
		{"empty object", `{}`, false, false},
		{"only task index", `{"_ng_task_index": 3}`, true, false},
		{"null indices", `{"_ng_task_index": null, "_ng_rollout_index": null}`, true, false},
		{"invalid explicit id", `{"_ng_rollout_id": "../etc"}`, true, true},
		{"explicit id not a string", `{"_ng_rollout_id": 5}`, true, true},
		{"derived id invalid", `{"_ng_task_index": "a/b", "_ng_rollout_index": 0}`, true, true},
		{"bad attempt index", `{"_ng_task_index": 1, "_ng_rollout_index": 0, "_ng_attempt_index": "x"}`, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, res, err := m.Merge(context.Background(), []byte(c.line))
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if string(out) != c.line || res.Attached {
				t.Errorf("line changed (attached %v): %s", res.Attached, out)
			}
			if err != nil && !errors.Is(err, ErrNotRolloutRecord) {
				t.Errorf("error %v does not wrap ErrNotRolloutRecord", err)
			}
			if errors.Is(err, rollout.ErrInvalidID) != c.invalidID {
				t.Errorf("errors.Is(err, rollout.ErrInvalidID) = %v, want %v (%v)", !c.invalidID, c.invalidID, err)
			}
		})
	}
}

func TestMergeWithoutDirsIsANoOp(t *testing.T) {
	line := []byte(`{"_ng_task_index": 0, "_ng_rollout_index": 0}`)
	out, res, err := MergeRecord(context.Background(), line, nil, MergeOptions{})
	if err != nil || res.Attached || !bytes.Equal(out, line) || res.RolloutID != "0-0" {
		t.Errorf("got %s %+v %v", out, res, err)
	}
	if _, _, err := MergeRecord(context.Background(), line, []string{filepath.Join(t.TempDir(), "missing")}, MergeOptions{}); err == nil {
		t.Error("a missing capture dir was accepted")
	}
}

// mergeCapture merges a minimal record of rollout id and returns the attachment.
func mergeCapture(t *testing.T, dirs []string, id string, opts MergeOptions) (map[string]any, MergeResult) {
	t.Helper()
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = -1
	}
	line := []byte(`{"_ng_rollout_id":"` + id + `","reward":1.0}`)
	out, res, err := MergeRecord(context.Background(), line, dirs, opts)
	if err != nil || !res.Attached {
		t.Fatalf("merge: %v (attached %v)", err, res.Attached)
	}
	checkSplice(t, line, out, res.ObservationsJoined)
	return capturefile.DecodeObject(t, out)[FieldModelCallCapture].(map[string]any), res
}

func gapsOf(c map[string]any) string {
	if _, ok := c["gaps"]; !ok {
		return "[]"
	}
	return capturefile.JSONOf(c["gaps"])
}

func callIndices(c map[string]any) string {
	var idx []string
	for _, call := range c["calls"].([]any) {
		idx = append(idx, fmt.Sprint(call.(map[string]any)["call_index"]))
	}
	return "[" + strings.Join(idx, ",") + "]"
}

// writeStaleClaim writes a claim of this host by a process that cannot exist.
func writeStaleClaim(t *testing.T, store *capture.Store, id string) {
	t.Helper()
	dir, err := store.ClaimsPath(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	body, _ := json.Marshal(capture.ClaimInfo{PID: 1 << 30, Host: host, StartedAt: 1})
	if err := os.WriteFile(filepath.Join(dir, "dead-call"), body, 0o640); err != nil {
		t.Fatal(err)
	}
}

func TestMergeGaps(t *testing.T) {
	cases := []struct {
		name     string
		setup    func(t *testing.T, dir string, s *capture.Store) (release func())
		timeout  time.Duration
		wantGaps string
		wantIdx  string
	}{
		{"no capture file", nil, 0, `[{"code":"model_call_capture_no_records"}]`, "[]"},
		{"empty file", func(t *testing.T, dir string, s *capture.Store) func() {
			capturefile.WriteCapture(t, dir, "r", "")
			return nil
		}, 0, `[{"code":"model_call_capture_no_records"}]`, "[]"},
		{"blank-only file", func(t *testing.T, dir string, s *capture.Store) func() {
			capturefile.WriteCapture(t, dir, "r", "\n  \n")
			return nil
		}, 0, `[{"code":"model_call_capture_no_records"}]`, "[]"},
		{"clean", func(t *testing.T, dir string, s *capture.Store) func() {
			capturefile.WriteCapture(t, dir, "r", ok("a", 1)+"\n")
			return nil
		}, 0, `[]`, "[0]"},
		{"damaged line kept around", func(t *testing.T, dir string, s *capture.Store) func() {
			capturefile.WriteCapture(t, dir, "r", ok("a", 1)+"\n{torn\n"+ok("b", 2)+"\n")
			return nil
		}, 0, `[{"code":"model_call_capture_records_unreadable","detail":"count=1"}]`, "[0,2]"},
		{"only damage", func(t *testing.T, dir string, s *capture.Store) func() {
			capturefile.WriteCapture(t, dir, "r", "{torn\n"+badModelRef+"\n")
			return nil
		}, 0, `[{"code":"model_call_capture_records_unreadable","detail":"count=2"}]`, "[]"},
		{"marker", func(t *testing.T, dir string, s *capture.Store) func() {
			capturefile.WriteCapture(t, dir, "r", ok("a", 1)+"\n")
			if err := s.MarkIncomplete("r"); err != nil {
				t.Fatal(err)
			}
			return nil
		}, 0, `[{"code":"model_call_capture_incomplete"}]`, "[0]"},
		{"marker without file", func(t *testing.T, dir string, s *capture.Store) func() {
			if err := s.MarkIncomplete("r"); err != nil {
				t.Fatal(err)
			}
			return nil
		}, 0, `[{"code":"model_call_capture_incomplete"}]`, "[]"},
		{"stale claim", func(t *testing.T, dir string, s *capture.Store) func() {
			capturefile.WriteCapture(t, dir, "r", ok("a", 1)+"\n")
			writeStaleClaim(t, s, "r")
			return nil
		}, 0, `[{"code":"model_call_capture_incomplete","detail":"stale_claims=1"}]`, "[0]"},
		{"live claim outlasts the wait", func(t *testing.T, dir string, s *capture.Store) func() {
			capturefile.WriteCapture(t, dir, "r", ok("a", 1)+"\n")
			c := capturefile.ClaimCall(t, s, "r", "in-flight")
			return func() { c.Release() }
		}, 20 * time.Millisecond, `[{"code":"model_call_capture_pending","detail":"count=1"}]`, "[0]"},
		{"live claim, nothing written yet", func(t *testing.T, dir string, s *capture.Store) func() {
			c := capturefile.ClaimCall(t, s, "r", "in-flight")
			return func() { c.Release() }
		}, -1, `[{"code":"model_call_capture_pending","detail":"count=1"},{"code":"model_call_capture_no_records"}]`, "[]"},
		{"everything, in order", func(t *testing.T, dir string, s *capture.Store) func() {
			capturefile.WriteCapture(t, dir, "r", "{torn\n"+ok("a", 1)+"\n")
			s.MarkIncomplete("r")
			writeStaleClaim(t, s, "r")
			c := capturefile.ClaimCall(t, s, "r", "in-flight")
			return func() { c.Release() }
		}, -1, `[{"code":"model_call_capture_records_unreadable","detail":"count=1"},{"code":"model_call_capture_incomplete","detail":"stale_claims=1"},{"code":"model_call_capture_pending","detail":"count=1"}]`, "[1]"},
		{"capture path unreadable", func(t *testing.T, dir string, s *capture.Store) func() {
			if err := os.Mkdir(filepath.Join(dir, "r"+capture.CaptureSuffix), 0o750); err != nil {
				t.Fatal(err)
			}
			return nil
		}, 0, `unreadable`, "[]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := capturefile.OpenStore(t, dir)
			if c.setup != nil {
				if release := c.setup(t, dir, s); release != nil {
					defer release()
				}
			}
			got, res := mergeCapture(t, []string{dir}, "r", MergeOptions{DrainTimeout: c.timeout, DrainPoll: 5 * time.Millisecond})
			gaps := gapsOf(got)
			if c.wantGaps == "unreadable" {
				if len(res.Gaps) != 1 || res.Gaps[0].Code != rollout.GapCaptureUnreadable || res.Gaps[0].Detail == "" {
					t.Errorf("gaps = %s, want one model_call_capture_unreadable with a detail", gaps)
				}
			} else if gaps != c.wantGaps {
				t.Errorf("gaps\n got %s\nwant %s", gaps, c.wantGaps)
			}
			if idx := callIndices(got); idx != c.wantIdx {
				t.Errorf("call indices %s, want %s", idx, c.wantIdx)
			}
			if got["rollout_id"] != "r" || res.RolloutID != "r" {
				t.Errorf("rollout_id = %v", got["rollout_id"])
			}
			if n := got["metrics"].(map[string]any)["num_calls"]; fmt.Sprint(n) != fmt.Sprint(res.Calls) {
				t.Errorf("num_calls %v, result %d", n, res.Calls)
			}
		})
	}
}

// TestMergeWaitsForOutstandingWrite: a call appended before its claim is released is in the merge,
// whenever the merge started.
func TestMergeWaitsForOutstandingWrite(t *testing.T) {
	dir := t.TempDir()
	s := capturefile.OpenStore(t, dir)
	claim := capturefile.ClaimCall(t, s, "r", "c1")
	type result struct {
		capture map[string]any
		res     MergeResult
	}
	done := make(chan result, 1)
	go func() {
		line := []byte(`{"_ng_rollout_id":"r"}`)
		out, res, err := MergeRecord(context.Background(), line, []string{dir}, MergeOptions{DrainTimeout: time.Minute, DrainPoll: time.Millisecond})
		if err != nil {
			t.Error(err)
		}
		var m map[string]map[string]any
		json.Unmarshal(out, &m)
		done <- result{m[FieldModelCallCapture], res}
	}()
	if err := s.Append("r", []byte(ok("c1", 1))); err != nil {
		t.Fatal(err)
	}
	if err := claim.Release(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.res.Calls != 1 || gapsOf(r.capture) != "[]" {
		t.Errorf("calls %d gaps %s, want the appended call and no gap", r.res.Calls, gapsOf(r.capture))
	}
}

func TestMergeCancelledWhileWaiting(t *testing.T) {
	dir := t.TempDir()
	s := capturefile.OpenStore(t, dir)
	claim := capturefile.ClaimCall(t, s, "r", "c1")
	defer claim.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	line := []byte(`{"_ng_rollout_id":"r"}`)
	out, _, err := MergeRecord(ctx, line, []string{dir}, MergeOptions{DrainTimeout: time.Hour})
	if !errors.Is(err, context.Canceled) || !bytes.Equal(out, line) {
		t.Errorf("err = %v, out %s", err, out)
	}
}

func TestMergeStoreSelection(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	capturefile.WriteCapture(t, second, "r", ok("in-second", 1)+"\n")
	got, _ := mergeCapture(t, []string{first, second}, "r", MergeOptions{})
	if callIndices(got) != "[0]" || gapsOf(got) != "[]" {
		t.Errorf("second dir not used: %s", capturefile.JSONOf(got))
	}
	// A marker in the first dir selects it, even though the second has the file.
	if err := capturefile.OpenStore(t, first).MarkIncomplete("r"); err != nil {
		t.Fatal(err)
	}
	got, _ = mergeCapture(t, []string{first, second}, "r", MergeOptions{})
	if callIndices(got) != "[]" || gapsOf(got) != `[{"code":"model_call_capture_incomplete"}]` {
		t.Errorf("first dir not selected: %s", capturefile.JSONOf(got))
	}
	if s, err := storeForRollout("r", []string{filepath.Join(first, "missing"), second}); err != nil || s == nil || s.Dir() != second {
		t.Errorf("storeForRollout = %v, %v", s, err)
	}
	if s, err := storeForRollout("none", []string{first, second}); err != nil || s != nil {
		t.Errorf("storeForRollout(none) = %v, %v", s, err)
	}
}

func TestMergePayloads(t *testing.T) {
	dir := t.TempDir()
	capturefile.WriteCapture(t, dir, "r", ok("a", 1)+"\n")
	for _, include := range []bool{false, true} {
		got, _ := mergeCapture(t, []string{dir}, "r", MergeOptions{IncludePayloads: include})
		call := got["calls"].([]any)[0].(map[string]any)
		for _, f := range payloadFields {
			if _, present := call[f]; present != include {
				t.Errorf("include=%v: %s present=%v", include, f, present)
			}
		}
		if want := 29 + 4*btoi(include); len(call) != want {
			t.Errorf("include=%v: %d fields, want %d", include, len(call), want)
		}
		if include && capturefile.JSONOf(call["request"]) != `{"model":"m"}` {
			t.Errorf("request = %s", capturefile.JSONOf(call["request"]))
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
