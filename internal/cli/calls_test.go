package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/golden")

// gymCapture is the capture dir NeMo Gym wrote for the shared fixtures
// (testdata/gym-capture/README.md at the repository root).
var gymCapture = capturetest.GymCaptureDir()

// runCLI runs the command line through Main with buffers and returns stdout, stderr and the exit code.
func runCLI(t testing.TB, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code
}

// exitCase is one command line and how it must end: the exit code, and a piece of stderr ("" for
// any).
type exitCase struct {
	name string
	args []string
	code int
	msg  string
}

// checkExits runs each case through Main, one subtest each.
func checkExits(t *testing.T, cases []exitCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, "", tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.msg)
			}
		})
	}
}

// checkGolden compares got with testdata/golden/<name>, rewriting it with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		capturetest.WriteFile(t, path, []byte(got), 0o644)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run go test -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\n got: %s\nwant: %s", path, clipText(got), clipText(string(want)))
	}
}

func clipText(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

// jsonLines decodes each line of out as a JSON object, keeping key order.
func jsonLines(t *testing.T, out string) []map[string]json.RawMessage {
	t.Helper()
	var objs []map[string]json.RawMessage
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("output line %d is not a JSON object: %v: %s", len(objs)+1, err, clipText(sc.Text()))
		}
		objs = append(objs, m)
	}
	return objs
}

// compactJSON removes insignificant whitespace (Gym's file is written with ", " and ": ").
func compactJSON(t *testing.T, v []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		t.Fatalf("compact %s: %v", v, err)
	}
	return b.String()
}

var payloadKeys = []string{"request", "response", "request_raw", "response_raw"}

func TestCallsJSONGolden(t *testing.T) {
	tests := []struct {
		id       string
		payloads bool
	}{
		{id: "0-5"},    // Responses stream: reasoning + function call
		{id: "1-1"},    // DeepSeek chat stream: reasoning_content, cached tokens
		{id: "2-8"},    // Anthropic stream
		{id: "3-0"},    // six chat calls and a torn line
		{id: "4-0"},    // incomplete marker
		{id: "4-1"},    // request body that is not JSON
		{id: "4-2"},    // stream that died half-way
		{id: "4-4-a1"}, // resumed attempt
		{id: "4-1", payloads: true},
		{id: "0-3", payloads: true},
	}
	for _, tc := range tests {
		name := tc.id
		args := []string{"calls", gymCapture, tc.id, "--json"}
		if tc.payloads {
			name += "-payloads"
			args = append(args, "--include-payloads")
		}
		t.Run(name, func(t *testing.T) {
			out, errOut, code := runCLI(t, "", args...)
			if code != ExitOK {
				t.Fatalf("exit %d; stderr: %s", code, errOut)
			}
			checkGolden(t, "calls/"+name+".jsonl", out)

			records := jsonLines(t, out)
			if len(records) == 0 {
				t.Fatal("no records")
			}
			for i, rec := range records {
				n := 29
				if tc.payloads {
					n = 33
				}
				if len(rec) != n {
					t.Errorf("record %d has %d fields; want %d", i, len(rec), n)
				}
				for _, k := range payloadKeys {
					if _, ok := rec[k]; ok != tc.payloads {
						t.Errorf("record %d: payload field %q present = %v; want %v", i, k, ok, tc.payloads)
					}
				}
				if string(rec["tool_calls"]) == "null" {
					t.Errorf("record %d: tool_calls is null; want []", i)
				}
			}
		})
	}
}

// TestCallsAgreeWithGym checks the identity fields of every record against what NeMo Gym itself
// attached in merged-by-gym.jsonl: the identity fields, which none of the places where modelcalls
// differs from Gym on purpose touch (Anthropic thinking_tokens counted as tokens_reasoning, latencies
// summed with compensated float addition, the fields Gym's snapshot lacks).
func TestCallsAgreeWithGym(t *testing.T) {
	data := capturetest.ReadFile(t, capturetest.Testdata("gym-capture", "merged-by-gym.jsonl"))
	checked := 0
	for _, rec := range jsonLines(t, string(data)) {
		var att struct {
			RolloutID string                       `json:"rollout_id"`
			Calls     []map[string]json.RawMessage `json:"calls"`
		}
		if err := json.Unmarshal(rec["ng_model_call_capture"], &att); err != nil {
			t.Fatal(err)
		}
		t.Run(att.RolloutID, func(t *testing.T) {
			out, errOut, code := runCLI(t, "", "calls", gymCapture, att.RolloutID, "--json")
			if len(att.Calls) == 0 {
				if code != ExitNotFound && code != ExitOK {
					t.Errorf("exit %d; stderr %s", code, errOut)
				}
				return
			}
			if code != ExitOK {
				t.Fatalf("exit %d; stderr: %s", code, errOut)
			}
			got := jsonLines(t, out)
			if len(got) != len(att.Calls) {
				t.Fatalf("%d records; Gym attached %d", len(got), len(att.Calls))
			}
			for i := range got {
				for _, k := range []string{"model_call_id", "call_index", "model_ref", "dialect", "status_code", "response_id", "model", "started_at", "completed_at", "latency_total_ms", "latency_ttft_ms"} {
					if compactJSON(t, got[i][k]) != compactJSON(t, att.Calls[i][k]) {
						t.Errorf("call %d %s = %s; Gym says %s", i, k, got[i][k], att.Calls[i][k])
					}
				}
			}
			checked++
		})
	}
	if checked < 35 {
		t.Errorf("only %d rollouts compared", checked)
	}
}

func TestCallsTable(t *testing.T) {
	out, errOut, code := runCLI(t, "", "calls", gymCapture, "3-0", "--format", "table")
	if code != ExitOK {
		t.Fatalf("exit %d; stderr: %s", code, errOut)
	}
	for _, want := range []string{"dialect", "latency ms", "deepseek-reasoner", "tool_calls", "1: weather", "calls 6  tokens in 439 out 560 reasoning 143 total 999  cached 320", "damaged lines 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "│ chat ") {
			rows++
		}
	}
	if rows != 6 {
		t.Errorf("%d call rows; want 6:\n%s", rows, out)
	}
	if !strings.Contains(errOut, "3-0.capture.jsonl:7: damaged line skipped") {
		t.Errorf("stderr does not report the damaged line 7: %q", errOut)
	}
}

func TestCallsIncompleteAndLocal(t *testing.T) {
	out, errOut, code := runCLI(t, "", "calls", gymCapture, "4-0", "--format", "table")
	if code != ExitOK || !strings.Contains(errOut, "marked incomplete") || !strings.Contains(out, "incomplete") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and the incomplete marker reported", code, out, errOut)
	}

	st := capturetest.NewStore(t)
	dir := st.Dir()
	status, cat, src, reason := 502, "connection", "local", "upstream_unreachable"
	attempted := true
	ex := &capture.Exchange{ModelCallID: capture.NewModelCallID(), Dialect: "chat", StartedAt: 1, CompletedAt: 2,
		LatencyMS: 3.5, StatusCode: &status, ErrorCategory: &cat, ResponseSource: &src, LocalResponseReason: &reason,
		UpstreamAttempted: &attempted}
	if err := st.AppendExchange("local-1", ex); err != nil {
		t.Fatal(err)
	}
	// A replayed run's call: answered locally, status 200, no error.
	ok, replaySrc, replayReason := 200, "local", "replay"
	ex = &capture.Exchange{ModelCallID: capture.NewModelCallID(), Dialect: "chat", StartedAt: 1, CompletedAt: 2,
		LatencyMS: 1, StatusCode: &ok, ResponseSource: &replaySrc, LocalResponseReason: &replayReason,
		Response: []byte(`{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)}
	if err := st.AppendExchange("local-1", ex); err != nil {
		t.Fatal(err)
	}
	upSrc := "upstream"
	ex = &capture.Exchange{ModelCallID: capture.NewModelCallID(), Dialect: "chat", StartedAt: 1, CompletedAt: 2,
		LatencyMS: 1, StatusCode: &ok, ResponseSource: &upSrc}
	if err := st.AppendExchange("local-1", ex); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCLI(t, "", "calls", dir, "local-1", "--format", "table")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	// The error column holds error_category only; who answered is in the source column.
	want := map[string][2]string{"0": {"connection", "local: upstream_unreachable"}, "1": {"", "local: replay"}, "2": {"", "upstream"}}
	header, rows := tableCells(out)
	errCol, srcCol := slices.Index(header, "error"), slices.Index(header, "source")
	if errCol < 0 || srcCol < 0 || len(rows) != 3 {
		t.Fatalf("no error and source columns, or not 3 rows:\n%s", out)
	}
	for _, row := range rows {
		if w := want[row[0]]; row[errCol] != w[0] || row[srcCol] != w[1] {
			t.Errorf("call %s: error %q source %q; want %q %q\n%s", row[0], row[errCol], row[srcCol], w[0], w[1], out)
		}
	}
	// show's rollout summary keeps them apart too.
	out, _, _ = runCLI(t, "", "show", dir, "local-1")
	for _, want := range []string{"error connection  [local: upstream_unreachable]", "ms  [local: replay]"} {
		if !strings.Contains(out, want) {
			t.Errorf("show summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "error local") {
		t.Errorf("show summary lists a local answer as an error:\n%s", out)
	}
}

// tableCells splits a box-drawn table into its header and row cells, trimmed.
func tableCells(out string) (header []string, rows [][]string) {
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "│") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "│"), "│") {
			cells = append(cells, strings.TrimSpace(c))
		}
		if header == nil {
			header = cells
		} else {
			rows = append(rows, cells)
		}
	}
	return header, rows
}

func TestCallsRecordDamageKeepsIndex(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		`{"model_call_id":"a","dialect":"chat","status_code":200,"response":{"model":"x","usage":{"prompt_tokens":1,"completion_tokens":2}}}`,
		``,
		`{"model_call_id":"b","dialect":"chat","status_code":"200"}`, // wrong envelope type: damaged
		`[1,2]`, // not an object: damaged
		`{"model_call_id":"c","dialect":"messages","status_code":200}`,
	}
	capturetest.WriteFile(t, filepath.Join(dir, "r.capture.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	out, errOut, code := runCLI(t, "", "calls", dir, "r", "--json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	recs := jsonLines(t, out)
	if len(recs) != 2 || string(recs[0]["call_index"]) != "0" || string(recs[1]["call_index"]) != "3" {
		t.Fatalf("records %v; want call_index 0 and 3 (damaged lines keep their index, blank lines do not)", out)
	}
	for _, want := range []string{"r.capture.jsonl:3:", "r.capture.jsonl:4:"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q: %s", want, errOut)
		}
	}
	if strings.Index(errOut, ":3:") > strings.Index(errOut, ":4:") {
		t.Errorf("damaged lines not reported in line order: %s", errOut)
	}
}

// TestTypoPaths: a capture dir or input file that is not there, given as a person types it, gets
// the paths next to it a typo could have meant, and a lone argument that names no directory says
// which reading was taken (a path is the capture dir; an id-like name is not a dir here).
func TestTypoPaths(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{"captures", "captures-old", ".hidden-captures", "other"} {
		os.Mkdir(filepath.Join(base, d), 0o755)
	}
	capturetest.WriteFile(t, filepath.Join(base, "rollouts.jsonl"), nil, 0o644)
	capturetest.WriteFile(t, filepath.Join(base, "capture"), nil, 0o644) // a file is no dir to suggest
	t.Chdir(base)
	checkExits(t, []exitCase{
		{"positional dir typo", []string{"calls", "./captrues"}, ExitNotFound,
			"capture dir ./captrues does not exist; did you mean ./captures?"},
		{"positional dir typo, absolute", []string{"calls", filepath.Join(base, "captrues"), "r1"}, ExitNotFound,
			"did you mean " + filepath.Join(base, "captures") + "?"},
		{"flag dir typo, trailing slash", []string{"stats", "--capture-dir", "captrues/"}, ExitNotFound,
			"capture dir captrues/ does not exist; did you mean captures?"},
		{"prefix of two dirs", []string{"merge", "--capture-dir", "captur", "--in", "rollouts.jsonl"}, ExitNotFound,
			"did you mean captures or captures-old?"},
		{"in file typo", []string{"merge", "--capture-dir", "captures", "--in", "rollout.jsonl"}, ExitNotFound,
			"--in rollout.jsonl does not exist; did you mean rollouts.jsonl?"},
		{"nothing like it", []string{"stats", "zzzzzzzz"}, ExitNotFound, "capture dir zzzzzzzz does not exist\n"},
		{"id-like lone argument", []string{"calls", "captrues"}, ExitUsage,
			"calls: missing --capture-dir DIR (or the capture dir as the first argument: there is no directory captrues here, did you mean captures?)"},
		{"lone dir, rollout missing", []string{"lineage", "captures"}, ExitUsage, "lineage: missing ROLLOUT_ID after the capture dir captures"},
	})
}

func TestCallsExitCodes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain")
	capturetest.WriteFile(t, file, nil, 0o644)
	checkExits(t, []exitCase{
		{"missing dir", []string{"calls", "/nonexistent/capture", "0-0"}, ExitNotFound, "does not exist"},
		{"dir is a file", []string{"calls", file, "0-0"}, ExitNotFound, "not a directory"},
		{"missing rollout", []string{"calls", gymCapture, "4-3"}, ExitNotFound, "rollout 4-3 has no capture"},
		{"slash in id", []string{"calls", gymCapture, "a/b"}, ExitUsage, "only ASCII letters, digits"},
		{"leading dot", []string{"calls", gymCapture, ".x"}, ExitUsage, "must start with an ASCII letter or digit"},
		{"too long", []string{"calls", gymCapture, strings.Repeat("a", 201)}, ExitUsage, "at most 200"},
		{"one argument, not a dir", []string{"calls", "0-0"}, ExitUsage, "calls: missing --capture-dir DIR"},
		{"no arguments", []string{"calls"}, ExitUsage, "calls: missing --capture-dir DIR and ROLLOUT_ID"},
		{"mistyped column", []string{"calls", gymCapture, "3-0", "--columns", "model,latnecy"}, ExitUsage,
			`--columns: unknown column "latnecy"; did you mean latency? (layouts: compact, wide, full; columns: call_index,`},
		{"mistyped layout", []string{"calls", gymCapture, "3-0", "--columns", "compcat"}, ExitUsage, "did you mean compact?"},
		{"unknown rollout", []string{"calls", gymCapture, "0-9"}, ExitNotFound, "did you mean 0-0"},
		{"flag dir and positional dir", []string{"calls", "--capture-dir", gymCapture, gymCapture, "0-0"}, ExitUsage, "calls: unexpected argument"},
		{"three arguments", []string{"calls", gymCapture, "0-0", "x"}, ExitUsage, `calls: unexpected argument "x"`},
		{"flag dir", []string{"calls", "--capture-dir", gymCapture, "0-0"}, ExitOK, ""},
		{"payloads without json", []string{"calls", gymCapture, "0-0", "--include-payloads"}, ExitUsage, "--include-payloads needs --format json"},
		{"payloads with tsv", []string{"calls", gymCapture, "0-0", "--include-payloads", "--format", "tsv"}, ExitUsage, "--include-payloads needs --format json"},
		{"payloads with format json", []string{"calls", gymCapture, "0-0", "--include-payloads", "--format", "json"}, ExitOK, ""},
		{"json and table", []string{"calls", gymCapture, "0-0", "--json", "--format", "table"}, ExitUsage, "--json and --format table disagree"},
		{"bad format", []string{"calls", gymCapture, "0-0", "--format", "csv"}, ExitUsage, `--format "csv": want table, tsv or json`},
		{"bad status", []string{"calls", gymCapture, "0-0", "--status", "abc"}, ExitUsage, `--status "abc"`},
		{"unknown flag", []string{"calls", gymCapture, "0-0", "--bogus"}, ExitUsage, "unknown flag"},
		{"found", []string{"calls", gymCapture, "0-0"}, ExitOK, ""},
		{"marker only is found", []string{"calls", gymCapture, "4-0", "--json"}, ExitOK, ""},
	})
}

// TestFilterEmptyValue: an empty filter value (an unset shell variable) is a usage error naming the
// flag, for calls and stats, instead of turning the filter off.
func TestFilterEmptyValue(t *testing.T) {
	var cases []exitCase
	for _, cmd := range [][]string{{"calls", gymCapture, "0-0"}, {"stats", gymCapture}} {
		for _, flag := range []string{"--model", "--status", "--error"} {
			for _, v := range []string{"", " ", "a,", ",b"} {
				args := append(slices.Clone(cmd), flag, v)
				cases = append(cases, exitCase{cmd[0] + " " + flag + "=" + strconv.Quote(v), args, ExitUsage,
					`for "` + flag + `" flag: empty value`})
			}
		}
		// A value after a good one is checked too.
		cases = append(cases, exitCase{cmd[0] + " repeated", append(slices.Clone(cmd), "--model", "m", "--model", ""), ExitUsage,
			`for "--model" flag: empty value`})
		// A quoted comma stays inside one value, as with pflag's string slices.
		cases = append(cases, exitCase{cmd[0] + " quoted comma", append(slices.Clone(cmd), "--model", `"a,b",c`), ExitOK, ""})
	}
	checkExits(t, cases)
}

// TestModelFilterNoMatch: a --model value no call has is said on stderr with the models there are
// (model names are free-form: exit 0 stays); a value that matches gives no note.
func TestModelFilterNoMatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		note string // "" for none
	}{
		{"calls typo", []string{"calls", gymCapture, "3-0", "--model", "deepseek", "--format", "json"},
			`modelcalls calls: no call of rollout 3-0 has model "deepseek"; its models: deepseek-reasoner, gpt-4.1-nano-2025-04-14, m, openai/gpt-oss-120b; did you mean deepseek-reasoner?`},
		{"calls two misses, one hit", []string{"calls", gymCapture, "3-0", "--model", "a,deepseek-reasoner", "--model", "b", "--format", "json"},
			`no call of rollout 3-0 has model "a" or "b"; its models: `},
		{"calls match", []string{"calls", gymCapture, "3-0", "--model", "deepseek-reasoner", "--format", "json"}, ""},
		{"stats typo", []string{"stats", gymCapture, "--model", "gpt-5-nano", "--format", "json"},
			`modelcalls stats: no call in ` + gymCapture + ` has model "gpt-5-nano"; the models in ` + gymCapture + `: claude-3-7-sonnet-20250219, `},
		{"stats did you mean", []string{"stats", gymCapture, "--model", "gpt-5-nano"}, "; did you mean gpt-5-nano-2025-08-07?"},
		{"stats match", []string{"stats", gymCapture, "--model", "gpt-5-nano-2025-08-07"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, "", tc.args...)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if tc.note == "" {
				if strings.Contains(errOut, "has model") {
					t.Errorf("a note although the model matched: %s", errOut)
				}
				return
			}
			if !strings.Contains(errOut, tc.note) {
				t.Errorf("stderr lacks %q:\n%s", tc.note, errOut)
			}
			if tc.args[0] == "calls" && !strings.Contains(tc.name, "hit") && out != "" {
				t.Errorf("records although no call matched: %s", out)
			}
		})
	}
}

// TestCallsLayoutByContent: the layout is the widest whose cells fit whole, so long model names
// get a narrower layout than short ones at the same width; a long tool-call list counts at 20
// columns and is the one cell cut, the model staying whole.
func TestCallsLayoutByContent(t *testing.T) {
	rec := func(model string, tools ...string) modelcalls.ModelCallRecord {
		r := modelcalls.ModelCallRecord{Model: &model}
		for _, n := range tools {
			r.ToolCalls = append(r.ToolCalls, modelcalls.ToolCall{Name: &n})
		}
		return r
	}
	short := []modelcalls.ModelCallRecord{rec("m")}
	long := []modelcalls.ModelCallRecord{rec("claude-sonnet-4-5-20250929")}
	tools := []modelcalls.ModelCallRecord{rec("m", "read_file", "read_file", "bash", "grep", "write_file")}
	width := func(layout string, recs []modelcalls.ModelCallRecord) int {
		cols, _ := resolveCallsColumns(layout)
		return callsTableWidth(cols, callsRows(cols, recs))
	}
	for _, tc := range []struct {
		recs  []modelcalls.ModelCallRecord
		width int
		want  string
	}{
		{short, 0, "full"},
		{short, width("full", short), "full"},
		{long, width("full", short), "wide"},
		{long, width("full", long), "full"},
		{long, width("wide", long) - 1, "compact"},
		{tools, width("full", short) + minToolCallsWidth - len("tool calls"), "full"},
		{short, 20, "compact"},
	} {
		if got := callsLayoutFor(tc.recs, tc.width); got != tc.want {
			t.Errorf("%s at %d columns: layout %s, want %s", *tc.recs[0].Model, tc.width, got, tc.want)
		}
	}
	cols, _ := resolveCallsColumns("full")
	rows := callsRows(cols, tools)
	w := width("full", tools)
	cutToolCalls(cols, rows, w)
	if rows[0][12] != "5: read_file, read_…" || rows[0][2] != "m" {
		t.Errorf("cut to %d columns: %q", w, rows[0])
	}
}
