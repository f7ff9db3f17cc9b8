package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/internal/capturetest/jsonmember"
	"github.com/modelcalls/modelcalls/rollout"
)

// ---- the merge command ----

// topLevelMember locates the value of the last top-level member named key in the JSON object data.
func topLevelMember(t testing.TB, data []byte, key string) (start, end int, ok bool) {
	t.Helper()
	m, ok := jsonmember.Last(jsonmember.Members(t, data), key)
	return m.ValueStart, m.ValueEnd, ok
}

// checkSplice verifies that out is in with only the ng_model_call_capture value set: replaced in
// place when in had the member, else appended as the last member; every other byte identical. It
// returns the attached value.
func checkSplice(t testing.TB, in, out []byte) []byte {
	t.Helper()
	const key = "ng_model_call_capture"
	vs, ve, ok := topLevelMember(t, out, key)
	if !ok {
		t.Fatalf("output has no %s: %s", key, clipText(string(out)))
	}
	if is, ie, had := topLevelMember(t, in, key); had {
		if !bytes.Equal(out[:vs], in[:is]) || !bytes.Equal(out[ve:], in[ie:]) {
			t.Fatalf("existing %s not replaced in place:\n in: %s\nout: %s", key, clipText(string(in)), clipText(string(out)))
		}
		return out[vs:ve]
	}
	// Walk back from the value over `<ws>,<ws>"key"<ws>:<ws>`.
	isWS := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	p := vs
	for p > 0 && isWS(out[p-1]) {
		p--
	}
	if p == 0 || out[p-1] != ':' {
		t.Fatalf("no ':' before the attached value: %s", clipText(string(out)))
	}
	p--
	for p > 0 && isWS(out[p-1]) {
		p--
	}
	quoted := `"` + key + `"`
	if p < len(quoted) || string(out[p-len(quoted):p]) != quoted {
		t.Fatalf("attached member key not found: %s", clipText(string(out)))
	}
	p -= len(quoted)
	for p > 0 && isWS(out[p-1]) {
		p--
	}
	if p == 0 || out[p-1] != ',' {
		t.Fatalf("no ',' before the attached member: %s", clipText(string(out)))
	}
	p--
	for q := p; ; q-- {
		if bytes.Equal(append(slices.Clip(out[:q]), out[ve:]...), in) {
			break
		}
		if q == 0 || !isWS(out[q-1]) {
			t.Fatalf("bytes outside the attached member differ:\n in: %s\nout: %s", clipText(string(in)), clipText(string(out)))
		}
	}
	if !bytes.Equal(out[ve:], in[len(in)-(len(out)-ve):]) || bytes.IndexByte(out[ve:], '}') < 0 {
		t.Fatalf("attached member is not the last one: %s", clipText(string(out)))
	}
	return out[vs:ve]
}

// attachment is the part of ng_model_call_capture the tests look at.
type attachment struct {
	RolloutID string `json:"rollout_id"`
	Metrics   struct {
		NumCalls int `json:"num_calls"`
	} `json:"metrics"`
	Calls []map[string]json.RawMessage `json:"calls"`
	Gaps  []struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	} `json:"gaps"`
}

func decodeAttachment(t testing.TB, v []byte) attachment {
	t.Helper()
	var a attachment
	if err := json.Unmarshal(v, &a); err != nil {
		t.Fatalf("attachment: %v: %s", err, clipText(string(v)))
	}
	return a
}

// splitKeepEOL splits data into lines that keep their terminators.
func splitKeepEOL(data []byte) [][]byte { return splitAfterAll(data, "\n") }

// splitAfterAll is bytes.SplitAfter without the empty piece after a final sep.
func splitAfterAll(data []byte, sep string) [][]byte {
	pieces := bytes.SplitAfter(data, []byte(sep))
	if len(pieces) > 0 && len(pieces[len(pieces)-1]) == 0 {
		pieces = pieces[:len(pieces)-1]
	}
	return pieces
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

func TestMergeGymFixture(t *testing.T) {
	defer goleak.VerifyNone(t)
	in := capturetest.ReadFile(t, capturetest.Testdata("gym-capture", "rollouts.jsonl"))
	gym := capturetest.ReadFile(t, capturetest.Testdata("gym-capture", "merged-by-gym.jsonl"))
	out, errOut, code := runCLI(t, string(in), "merge", "--capture-dir", gymCapture)
	if code != ExitOK {
		t.Fatalf("exit %d; stderr %s", code, errOut)
	}
	inLines, outLines, gymLines := splitKeepEOL(in), splitKeepEOL([]byte(out)), splitKeepEOL(gym)
	if len(outLines) != len(inLines) || len(gymLines) != len(inLines) {
		t.Fatalf("%d output lines, %d Gym lines; want %d", len(outLines), len(gymLines), len(inLines))
	}
	for i := range inLines {
		got := decodeAttachment(t, checkSplice(t, trimEOL(inLines[i]), trimEOL(outLines[i])))
		gs, ge, _ := topLevelMember(t, trimEOL(gymLines[i]), "ng_model_call_capture")
		want := decodeAttachment(t, trimEOL(gymLines[i])[gs:ge])
		if got.RolloutID != want.RolloutID || len(got.Calls) != len(want.Calls) || got.Metrics.NumCalls != len(got.Calls) {
			t.Errorf("line %d: rollout %s with %d calls; Gym: %s with %d", i+1, got.RolloutID, len(got.Calls), want.RolloutID, len(want.Calls))
			continue
		}
		for j := range got.Calls {
			if string(got.Calls[j]["model_call_id"]) != string(want.Calls[j]["model_call_id"]) {
				t.Errorf("line %d call %d: model_call_id %s; Gym %s", i+1, j, got.Calls[j]["model_call_id"], want.Calls[j]["model_call_id"])
			}
			if _, ok := got.Calls[j]["request"]; ok {
				t.Errorf("line %d call %d: payloads attached without --include-payloads", i+1, j)
			}
		}
		if fmt.Sprint(got.Gaps) != fmt.Sprint(want.Gaps) {
			t.Errorf("line %d: gaps %v; Gym %v", i+1, got.Gaps, want.Gaps)
		}
	}
	if !strings.Contains(errOut, "merged 40 rollouts, 44 calls (1 damaged capture line); gaps: model_call_capture_incomplete=1, model_call_capture_no_records=1, model_call_capture_records_unreadable=1; passed through: 0 lines") {
		t.Errorf("summary line: %q", errOut)
	}
}

// parallelCase is one rollout of the parallel merge test.
type parallelCase struct {
	id    string
	calls int  // calls on disk before the merge starts
	late  bool // one more call is being written (claimed) when the merge starts
}

func TestMergeParallelKeepsBytesAndOrder(t *testing.T) {
	defer goleak.VerifyNone(t)
	st := capturetest.NewStore(t)
	dir := st.Dir()
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 240
	cases := make([]parallelCase, n)
	type lateWrite struct {
		id    string
		claim *capture.Claim
		delay time.Duration
	}
	var late []lateWrite
	for i := range cases {
		c := parallelCase{id: fmt.Sprintf("%d-%d", i/10, i%10), calls: rng.IntN(12), late: i%5 == 2}
		if i%6 == 2 {
			c.id = fmt.Sprintf("explicit.%d_x", i)
		}
		if i%6 == 4 {
			c.id += "-a2"
		}
		var file []byte
		for k := range c.calls {
			line, err := capture.EncodeExchange(exchange(fmt.Sprintf("model-%d", k%3), `{"prompt_tokens":3,"completion_tokens":4}`, float64(k)+0.5, nil, 200, nil))
			if err != nil {
				t.Fatal(err)
			}
			file = append(append(file, line...), '\n')
		}
		if c.calls > 0 {
			p, _ := st.CapturePath(c.id)
			capturetest.WriteFile(t, p, file, 0o640)
		}
		if c.late {
			cl, err := st.Claim(c.id, capture.NewModelCallID())
			if err != nil {
				t.Fatal(err)
			}
			// Shuffled durations: rollouts finish their last write in random order.
			late = append(late, lateWrite{c.id, cl, time.Duration(rng.IntN(150)) * time.Millisecond})
		}
		cases[i] = c
	}

	// The input: every line shape we must keep byte for byte.
	var in bytes.Buffer
	var expect []*parallelCase // per input line; nil for lines passed through
	for i := range cases {
		c := &cases[i]
		task, roll, _ := strings.Cut(strings.TrimSuffix(c.id, "-a2"), "-")
		switch {
		case strings.HasPrefix(c.id, "explicit."):
			fmt.Fprintf(&in, `{"_ng_rollout_id":%q,"ng_model_call_capture":{"stale":true},"after":[1,2.50,{"b":null}]}`+"\n", c.id)
		case strings.HasSuffix(c.id, "-a2"):
			fmt.Fprintf(&in, "{ \"_ng_task_index\" :\t%s , \"_ng_rollout_index\" : %s, \"_ng_attempt_index\": 2 }\r\n", task, roll)
		case i%6 == 0:
			fmt.Fprintf(&in, `{"_ng_task_index": %s, "_ng_rollout_index": %s, "reward": 0.5, "text": "h\u00e9llo ✓ \"q\" \\"}`+"\n", task, roll)
		default:
			fmt.Fprintf(&in, `{"output":{"deep":[{"x":1e3}]},"_ng_rollout_index":%s,"_ng_task_index":%s}`+"\n", roll, task)
		}
		expect = append(expect, c)
		if i%37 == 0 {
			in.WriteString(`{"meta": "not a rollout"}` + "\n\n")
			expect = append(expect, nil, nil)
		}
	}
	in.WriteString(`{"_ng_task_index": 999, "_ng_rollout_index": 0}`) // last line without newline
	last := parallelCase{id: "999-0"}
	expect = append(expect, &last)

	var wg sync.WaitGroup
	for _, lw := range late {
		wg.Go(func() {
			time.Sleep(lw.delay) // the in-flight call's duration
			line, err := capture.EncodeExchange(exchange("late", `{"prompt_tokens":1}`, 9, nil, 200, nil))
			if err == nil {
				err = st.Append(lw.id, line)
			}
			if err != nil {
				t.Error(err)
			}
			lw.claim.Release()
		})
	}
	out, errOut, code := runCLI(t, in.String(), "merge", "--capture-dir", dir, "--workers", "16", "--wait", "30s")
	wg.Wait()
	if code != ExitOK {
		t.Fatalf("exit %d; stderr %s", code, errOut)
	}

	inLines, outLines := splitKeepEOL(in.Bytes()), splitKeepEOL([]byte(out))
	if len(outLines) != len(inLines) {
		t.Fatalf("%d output lines; want %d", len(outLines), len(inLines))
	}
	for i, c := range expect {
		if c == nil {
			if !bytes.Equal(outLines[i], inLines[i]) {
				t.Errorf("line %d: passed-through line changed: %q -> %q", i+1, inLines[i], outLines[i])
			}
			continue
		}
		inEOL := inLines[i][len(trimEOL(inLines[i])):]
		outEOL := outLines[i][len(trimEOL(outLines[i])):]
		if !bytes.Equal(inEOL, outEOL) {
			t.Errorf("line %d: terminator %q became %q", i+1, inEOL, outEOL)
		}
		a := decodeAttachment(t, checkSplice(t, trimEOL(inLines[i]), trimEOL(outLines[i])))
		want := c.calls
		if c.late {
			want++
		}
		if a.RolloutID != c.id || len(a.Calls) != want || a.Metrics.NumCalls != want {
			t.Errorf("line %d: attachment for %s with %d calls; want %s with %d (order or quiescence broken)", i+1, a.RolloutID, len(a.Calls), c.id, want)
		}
		if want == 0 && (len(a.Gaps) != 1 || a.Gaps[0].Code != "model_call_capture_no_records") {
			t.Errorf("line %d: gaps %v; want no_records", i+1, a.Gaps)
		}
		if want > 0 && len(a.Gaps) != 0 {
			t.Errorf("line %d: unexpected gaps %v", i+1, a.Gaps)
		}
	}
	if !strings.Contains(errOut, fmt.Sprintf("merged %d rollouts", n+1)) {
		t.Errorf("summary: %q", errOut)
	}
}

func TestMergePassesThroughBadLines(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	st, _ := capture.Open(dir)
	if err := st.AppendExchange("0-0", exchange("m", `{"prompt_tokens":1}`, 1, nil, 200, nil)); err != nil {
		t.Fatal(err)
	}
	lines := []string{
		`{"_ng_task_index": 0, "_ng_rollout_index": 0}`,
		`[1, 2]`,
		`not json at all`,
		`{"_ng_rollout_id": "a/b", "x": 1}`,
		`{"_ng_task_index": 5}`,
		`{"foo": 1}`,
		``,
		`{"_ng_task_index": 0, "_ng_rollout_index": 0`,
		`{"_ng_task_index": 0, "_ng_rollout_index": 1}`,
	}
	in := strings.Join(lines, "\n") + "\n"
	out, errOut, code := runCLI(t, in, "merge", "--capture-dir", dir, "--wait", "0")
	if code != ExitFailure {
		t.Errorf("exit %d; want %d", code, ExitFailure)
	}
	outLines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(outLines) != len(lines) {
		t.Fatalf("%d output lines; want %d: %q", len(outLines), len(lines), out)
	}
	for _, i := range []int{1, 2, 3, 4, 5, 6, 7} {
		if outLines[i] != lines[i] {
			t.Errorf("line %d changed: %q -> %q", i+1, lines[i], outLines[i])
		}
	}
	for _, i := range []int{0, 8} {
		checkSplice(t, []byte(lines[i]), []byte(outLines[i]))
	}
	for _, want := range []string{
		"line 2: passed through unchanged", "line 3: passed through unchanged",
		"line 4: passed through unchanged", "invalid rollout id",
		"line 5: passed through unchanged", "line 8: passed through unchanged",
		"merged 2 rollouts, 1 call; gaps: model_call_capture_no_records=1; passed through: 7 lines (1 without rollout fields, 1 blank, 5 reported)",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	for _, silent := range []string{"line 6:", "line 7:", "line 1:", "line 9:"} {
		if strings.Contains(errOut, silent) {
			t.Errorf("stderr reports %q, which is not an error:\n%s", silent, errOut)
		}
	}
	if strings.Index(errOut, "line 2:") > strings.Index(errOut, "line 8:") {
		t.Errorf("reports are not in input order:\n%s", errOut)
	}
}

func TestMergeFilesAndOptions(t *testing.T) {
	defer goleak.VerifyNone(t)
	first, second := t.TempDir(), t.TempDir()
	st1, _ := capture.Open(first)
	st2, _ := capture.Open(second)
	for _, w := range []struct {
		st    *capture.Store
		id    string
		model string
	}{{st1, "0-0", "from-first"}, {st2, "0-0", "from-second"}, {st2, "0-1", "only-second"}} {
		if err := w.st.AppendExchange(w.id, exchange(w.model, `{"prompt_tokens":1}`, 1, nil, 200, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st1.Claim("0-2", capture.NewModelCallID()); err != nil { // never released
		t.Fatal(err)
	}
	work := t.TempDir()
	inFile := filepath.Join(work, "rollouts.jsonl")
	in := `{"_ng_task_index":0,"_ng_rollout_index":0}` + "\n" + `{"_ng_task_index":0,"_ng_rollout_index":1}` + "\n" + `{"_ng_task_index":0,"_ng_rollout_index":2}` + "\n"
	capturetest.WriteFile(t, inFile, []byte(in), 0o644)
	outFile := filepath.Join(work, "merged.jsonl")
	stdout, errOut, code := runCLI(t, "", "merge", "--capture-dir", first, "--capture-dir", second,
		"--in", inFile, "--out", outFile, "--include-payloads", "--wait", "0")
	if code != ExitOK || stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout, errOut)
	}
	data := capturetest.ReadFile(t, outFile)
	lines := splitKeepEOL(data)
	if len(lines) != 3 {
		t.Fatalf("%d lines in --out", len(lines))
	}
	models := []string{}
	for i, l := range lines {
		a := decodeAttachment(t, checkSplice(t, trimEOL(splitKeepEOL([]byte(in))[i]), trimEOL(l)))
		if len(a.Calls) == 1 {
			models = append(models, string(a.Calls[0]["model"]))
			if _, ok := a.Calls[0]["response"]; !ok {
				t.Errorf("line %d: --include-payloads did not attach the response", i+1)
			}
		}
		if i == 2 && (len(a.Gaps) != 2 || a.Gaps[0].Code != "model_call_capture_pending" || a.Gaps[0].Detail != "count=1") {
			t.Errorf("rollout with a live claim and --wait 0: gaps %v; want pending count=1 then no_records", a.Gaps)
		}
	}
	if fmt.Sprint(models) != `["from-first" "only-second"]` {
		t.Errorf("models %v; want the first dir holding each rollout to win", models)
	}
	entries, _ := os.ReadDir(work)
	if len(entries) != 2 {
		t.Errorf("work dir holds %d entries; want no temp file left", len(entries))
	}

	// --out may name the --in file: it is replaced only when everything is written.
	if _, errOut, code := runCLI(t, "", "merge", "--capture-dir", first, "--in", outFile, "--out", outFile, "--wait", "0"); code != ExitOK {
		t.Fatalf("in place: exit %d: %s", code, errOut)
	}
	again, _ := os.ReadFile(outFile)
	if len(splitKeepEOL(again)) != 3 || bytes.Count(again, []byte(`"ng_model_call_capture"`)) != 3 {
		t.Errorf("in-place merge did not replace the attachments in place:\n%s", again)
	}
}

// TestMergeManyBadLines: a file of 5,000 lines that are not JSON is passed through whole, with the
// first 10 named on stderr and the rest counted in one line, not a line of stderr each.
func TestMergeManyBadLines(t *testing.T) {
	var in strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&in, "plain text %d\n", i)
	}
	out, errOut, code := runCLI(t, in.String(), "merge", "--capture-dir", t.TempDir(), "--wait", "0")
	if code != ExitFailure || out != in.String() {
		t.Errorf("exit %d, output kept %v; want %d and every line unchanged", code, out == in.String(), ExitFailure)
	}
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if len(lines) != 12 {
		t.Fatalf("%d stderr lines, want 10 named lines, a count and the summary:\n%s", len(lines), errOut)
	}
	if !strings.HasPrefix(lines[9], "modelcalls merge: line 10: passed through unchanged") ||
		!strings.HasPrefix(lines[10], "modelcalls merge: 4990 more lines passed through unchanged too, not listed (the last is line 5000)") ||
		!strings.Contains(lines[11], "5000 reported") {
		t.Errorf("stderr:\n%s", strings.Join(lines[8:], "\n"))
	}
}

func TestMergeUsageErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	checkExits(t, []exitCase{
		{"no capture dir", []string{"merge"}, ExitUsage, "--capture-dir is required"},
		{"missing capture dir", []string{"merge", "--capture-dir", "/nonexistent/dir"}, ExitNotFound, "does not exist"},
		{"capture dir is a file", []string{"merge", "--capture-dir", file}, ExitNotFound, "not a directory"},
		{"second dir missing", []string{"merge", "--capture-dir", dir, "--capture-dir", "/nonexistent/2"}, ExitNotFound, "/nonexistent/2"},
		{"missing input", []string{"merge", "--capture-dir", dir, "--in", "/nonexistent/in"}, ExitNotFound, "--in /nonexistent/in does not exist"},
		{"input is a dir", []string{"merge", "--capture-dir", dir, "--in", dir}, ExitNotFound, "--in " + dir + " is a directory, not a file"},
		{"negative wait", []string{"merge", "--capture-dir", dir, "--wait", "-1s"}, ExitUsage, "--wait -1s: must be >= 0"},
		{"bad wait", []string{"merge", "--capture-dir", dir, "--wait", "soon"}, ExitUsage, "--wait"},
		{"zero workers", []string{"merge", "--capture-dir", dir, "--workers", "0"}, ExitUsage, "--workers 0"},
		{"positional argument", []string{"merge", "--capture-dir", dir, "x.jsonl"}, ExitUsage, "unknown command"},
		{"out dir missing", []string{"merge", "--capture-dir", dir, "--out", "/nonexistent/out.jsonl"}, ExitFailure, "create --out"},
	})
}

func TestMergeEmptyInput(t *testing.T) {
	out, errOut, code := runCLI(t, "", "merge", "--capture-dir", t.TempDir())
	if code != ExitOK || out != "" || !strings.Contains(errOut, "merged 0 rollouts, 0 calls; gaps: none; passed through: 0 lines") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestBinarySmoke builds the modelcalls binary and runs each command of this package once.
func TestBinarySmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "modelcalls")
	build := exec.Command("go", "build", "-o", bin, "github.com/modelcalls/modelcalls/cmd/modelcalls")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(stdin string, args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("run %v: %v", args, err)
		}
		return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
	}
	rollouts := capturetest.ReadFile(t, capturetest.Testdata("gym-capture", "rollouts.jsonl"))
	out, errOut, code := run(string(rollouts), "merge", "--capture-dir", gymCapture)
	if code != 0 || strings.Count(out, "\n") != 40 || !strings.Contains(errOut, "merged 40 rollouts") {
		t.Errorf("merge: exit %d, %d lines, stderr %q", code, strings.Count(out, "\n"), errOut)
	}
	if out, _, code := run("", "calls", gymCapture, "0-3", "--json"); code != 0 || strings.Count(out, "\n") != 1 {
		t.Errorf("calls --json: exit %d, output %q", code, out)
	}
	if _, errOut, code := run("", "calls", gymCapture, "4-3"); code != ExitNotFound || !strings.HasPrefix(errOut, "modelcalls: ") {
		t.Errorf("calls missing rollout: exit %d, stderr %q", code, errOut)
	}
	if out, _, code := run("", "stats", gymCapture, "--json"); code != 0 || !json.Valid([]byte(out)) {
		t.Errorf("stats --json: exit %d, output %q", code, out)
	}
	if out, _, code := run("", "clear", "--capture-dir", t.TempDir()); code != 0 || out != "cleared 0 rollouts (0 listed, 0 had nothing to clear)\n" {
		t.Errorf("clear: exit %d, output %q", code, out)
	}
}

// BenchmarkMergeCommand runs `modelcalls merge` end to end through Main over 10,000 rollouts of 20
// captured calls each (a Responses call with usage, reasoning and a tool call, ~1.3 KB per line),
// written once to b.TempDir. It reports rollouts/s and MB/s, where MB counts the input records plus
// the capture files read.
func BenchmarkMergeCommand(b *testing.B) {
	const rollouts, callsPer = 10_000, 20
	dir := b.TempDir()
	st, err := capture.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	ttft := 120.5
	status := 200
	var file []byte
	for k := range callsPer {
		ex := &capture.Exchange{
			ModelCallID: capture.NewModelCallID(), Dialect: "responses",
			ModelRef:  &rollout.ModelServerRef{Type: "responses_api_models", Name: "policy_model"},
			StartedAt: 1795968571.5 + float64(k), CompletedAt: 1795968572.25 + float64(k),
			LatencyMS: 750.25, LatencyTTFTMS: &ttft, StatusCode: &status,
			Request: json.RawMessage(`{"model":"gpt-5-mini","input":[{"role":"user","content":"What is the weather in Tokyo today? Answer briefly, then call the tool."}],"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}],"stream":false}`),
			Response: json.RawMessage(`{"id":"resp_0f35ed53160b395301693cc957829881909359e7f80cdd20b5","object":"response","status":"completed","model":"gpt-5-mini-2025-08-07",` +
				`"output":[{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"The user wants the weather; call get_weather with the city."}]},` +
				`{"type":"function_call","id":"fc_1","call_id":"call_CWXgs68YprAjp6t0371hiPOI","name":"get_weather","arguments":"{\"city\":\"Tokyo\"}"}],` +
				`"usage":{"input_tokens":366,"input_tokens_details":{"cached_tokens":256},"output_tokens":63,"output_tokens_details":{"reasoning_tokens":18},"total_tokens":429}}`),
		}
		line, err := capture.EncodeExchange(ex)
		if err != nil {
			b.Fatal(err)
		}
		file = append(append(file, line...), '\n')
	}
	var in bytes.Buffer
	for i := range rollouts {
		id := fmt.Sprintf("%d-%d", i/100, i%100)
		p, _ := st.CapturePath(id)
		capturetest.WriteFile(b, p, file, 0o640)
		fmt.Fprintf(&in, `{"_ng_task_index": %d, "_ng_rollout_index": %d, "agent_ref": {"name": "simple_agent"}, "reward": 1.0, "response": {"output_text": "It is sunny in Tokyo."}}`+"\n", i/100, i%100)
	}
	input := in.Bytes()
	bytesPerRun := int64(len(input)) + int64(rollouts)*int64(len(file))

	var errOut bytes.Buffer
	for b.Loop() {
		errOut.Reset()
		if code := Main([]string{"merge", "--capture-dir", dir}, bytes.NewReader(input), io.Discard, &errOut); code != ExitOK {
			b.Fatalf("exit %d: %s", code, errOut.String())
		}
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(rollouts*b.N)/sec, "rollouts/s")
	b.ReportMetric(float64(bytesPerRun*int64(b.N))/1e6/sec, "MB/s")
	if !strings.Contains(errOut.String(), fmt.Sprintf("merged %d rollouts, %d calls", rollouts, rollouts*callsPer)) {
		b.Errorf("summary: %s", errOut.String())
	}
}

// FuzzMergeKeepsLines: whatever the input, merge writes one line per input line, in order, each
// either unchanged or the same record with only ng_model_call_capture set.
func FuzzMergeKeepsLines(f *testing.F) {
	for _, s := range []string{
		`{"_ng_task_index": 0, "_ng_rollout_index": 1}` + "\n",
		"[1]\n{\"a\":1}\n\n",
		`{"_ng_rollout_id":"x","ng_model_call_capture":null,"z":[]}` + "\r\n" + `{"_ng_task_index":1}`,
		`{"_ng_rollout_id":"a/b"}`,
		`{ "_ng_task_index" : "t" , "_ng_rollout_index" : 2.5 , "_ng_attempt_index" : " 3 " }`,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, in []byte) {
		var out, errOut bytes.Buffer
		code := Main([]string{"merge", "--capture-dir", dir, "--wait", "0", "--workers", "3"}, bytes.NewReader(in), &out, &errOut)
		if code != ExitOK && code != ExitFailure {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		inLines, outLines := splitKeepEOL(in), splitKeepEOL(out.Bytes())
		if len(inLines) != len(outLines) {
			t.Fatalf("%d lines in, %d out", len(inLines), len(outLines))
		}
		for i := range inLines {
			if bytes.Equal(inLines[i], outLines[i]) {
				continue
			}
			a, b := trimEOL(inLines[i]), trimEOL(outLines[i])
			if !bytes.Equal(inLines[i][len(a):], outLines[i][len(b):]) {
				t.Fatalf("line %d: terminator changed", i+1)
			}
			checkSplice(t, bytes.TrimSpace(a), bytes.TrimSpace(b))
		}
		if (code == ExitFailure) != strings.Contains(errOut.String(), "passed through unchanged") {
			t.Fatalf("exit %d does not match the reports: %s", code, errOut.String())
		}
	})
}

// Records that resolve to the same rollout id each get all of its calls: merge names the rollout
// once with its record count and lines, and --duplicate-rollouts=error makes that exit 1 (after
// writing every record, as for reported lines).
func TestMergeDuplicateRollouts(t *testing.T) {
	dir := t.TempDir()
	st, _ := capture.Open(dir)
	for _, id := range []string{"0-0", "0-1"} {
		if err := st.AppendExchange(id, exchange("m", `{"prompt_tokens":1}`, 1, nil, 200, nil)); err != nil {
			t.Fatal(err)
		}
	}
	in := `{"_ng_task_index": 0, "_ng_rollout_index": 0}` + "\n" +
		`{"_ng_task_index": 0, "_ng_rollout_index": 1}` + "\n" +
		`{"_ng_rollout_id": "0-0", "try": 2}` + "\n" +
		`{"_ng_task_index": 0, "_ng_rollout_index": 0, "try": 3}` + "\n"
	const report = "rollout 0-0 merged into 3 records (lines 1, 3, 4)"
	for _, c := range []struct {
		args []string
		code int
	}{{nil, ExitOK}, {[]string{"--duplicate-rollouts", "warn"}, ExitOK}, {[]string{"--duplicate-rollouts=error"}, ExitFailure}} {
		t.Run(fmt.Sprint(c.args), func(t *testing.T) {
			out, errOut, code := runCLI(t, in, append([]string{"merge", "--capture-dir", dir, "--wait", "0"}, c.args...)...)
			if code != c.code {
				t.Errorf("exit %d; want %d: %s", code, c.code, errOut)
			}
			if n := strings.Count(out, `"ng_model_call_capture"`); n != 4 {
				t.Errorf("%d records merged; want all 4 written", n)
			}
			if strings.Count(errOut, report) != 1 || strings.Count(errOut, "merged into") != 1 {
				t.Errorf("stderr does not name rollout 0-0 once (and only it):\n%s", errOut)
			}
		})
	}
	_, errOut, code := runCLI(t, `{"_ng_task_index": 0, "_ng_rollout_index": 0}`+"\n", "merge", "--capture-dir", dir, "--wait", "0", "--duplicate-rollouts=error")
	if code != ExitOK || strings.Contains(errOut, "merged into") {
		t.Errorf("one record per rollout: exit %d: %s", code, errOut)
	}
	checkExits(t, []exitCase{{"bad duplicate-rollouts", []string{"merge", "--capture-dir", dir, "--duplicate-rollouts", "ignore"}, ExitUsage, "--duplicate-rollouts"}})
}
