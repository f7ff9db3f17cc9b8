package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/internal/stats"
)

func TestStatsJSONGolden(t *testing.T) {
	out, errOut, code := runCLI(t, "", "stats", gymCapture, "--json")
	if code != ExitOK {
		t.Fatalf("exit %d; stderr %s", code, errOut)
	}
	checkGolden(t, "stats/gym-capture.json", out)
	var r stats.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json output is not one report object: %v", err)
	}
	// Facts of the fixture (testdata/gym-capture/README.md at the repository root): 39 capture files, 4-0 marked
	// incomplete, one torn line in 3-0.
	if r.Rollouts != 39 || r.IncompleteRollouts != 1 || r.DamagedLines != 1 || r.RolloutsWithDamage != 1 {
		t.Errorf("rollouts %d incomplete %d damaged %d/%d; want 39, 1, 1/1", r.Rollouts, r.IncompleteRollouts, r.DamagedLines, r.RolloutsWithDamage)
	}
	perModel := 0
	for _, m := range r.Models {
		perModel += m.Calls
	}
	if perModel != r.Calls {
		t.Errorf("per-model calls add up to %d; run has %d", perModel, r.Calls)
	}
}

// exchange returns a capture line with the given model, usage object, latency and TTFT.
func exchange(model, usage string, latency float64, ttft *float64, status int, category *string) *capture.Exchange {
	resp := fmt.Sprintf(`{"model":%q,"usage":%s}`, model, usage)
	if usage == "" {
		resp = fmt.Sprintf(`{"model":%q}`, model)
	}
	return &capture.Exchange{
		ModelCallID: capture.NewModelCallID(), Dialect: "chat", StartedAt: 1, CompletedAt: 2,
		LatencyMS: latency, LatencyTTFTMS: ttft, StatusCode: &status, ErrorCategory: category,
		Response: json.RawMessage(resp),
	}
}

// TestStatsComputed builds a capture dir whose statistics are known by construction.
func TestStatsComputed(t *testing.T) {
	st := capturetest.NewStore(t)
	dir := st.Dir()
	f := func(v float64) *float64 { return &v }
	rl := "rate_limit"
	// Model a: ten calls with latencies 10..100 ms over two rollouts, TTFT 1..10 ms; cache known on
	// four calls, three of them hits (7+8+9 cached tokens).
	for i := 1; i <= 10; i++ {
		usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":1,"total_tokens":%d}`, 10*i, 10*i+1)
		if i >= 7 {
			usage = fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":1,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`, 10*i, 10*i+1, map[int]int{7: 7, 8: 8, 9: 9, 10: 0}[i])
		}
		id := "a-1"
		if i%2 == 0 {
			id = "a-2"
		}
		if err := st.AppendExchange(id, exchange("a", usage, float64(10*i), f(float64(i)), 200, nil)); err != nil {
			t.Fatal(err)
		}
	}
	// Model b: two rate-limited calls without usage or TTFT.
	for range 2 {
		if err := st.AppendExchange("b-1", exchange("b", "", 5, nil, 429, &rl)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.MarkIncomplete("b-1"); err != nil {
		t.Fatal(err)
	}
	// A damaged line and a marker-only rollout.
	p, _ := st.CapturePath("b-1")
	fh, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString("{torn\n")
	fh.Close()
	if err := st.MarkIncomplete("c-1"); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := runCLI(t, "", "stats", dir, "--json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r stats.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	check := func(name string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v; want %v", name, got, want)
		}
	}
	check("rollouts", r.Rollouts, 4)
	check("incomplete", r.IncompleteRollouts, 2)
	check("damaged", r.DamagedLines, 1)
	check("calls", r.Calls, 12)
	check("errors", r.Errors, 2)
	check("errors_by_category", r.ErrorsByCategory, map[string]int{"rate_limit": 2})
	check("tokens in", *r.Tokens.In, 550)
	check("tokens total", *r.Tokens.Total, 560)
	check("cache known/hits", [2]int{r.Cache.Known, r.Cache.Hits}, [2]int{4, 3})
	check("hit rate", *r.Cache.HitRate, 0.75)
	check("cached tokens", *r.Cache.CachedTokens, 24)
	// Latencies: 5, 5, 10, 20, ..., 100 (12 samples). Nearest rank: p50 = rank 6 = 40,
	// p90 = rank ceil(10.8) = 11 = 90, p99 = rank 12 = 100.
	check("latency p50/p90/p99", [3]float64{*r.LatencyMS.P50, *r.LatencyMS.P90, *r.LatencyMS.P99}, [3]float64{40, 90, 100})
	check("ttft count", r.TTFTMS.Count, 10)
	check("ttft p50/p90", [2]float64{*r.TTFTMS.P50, *r.TTFTMS.P90}, [2]float64{5, 9})
	if len(r.Models) != 2 || *r.Models[0].Model != "a" || *r.Models[1].Model != "b" {
		t.Fatalf("models = %+v; want a then b", r.Models)
	}
	check("b hit rate", r.Models[1].Cache.HitRate, (*float64)(nil))
	check("b latency p99", *r.Models[1].LatencyMS.P99, 5)

	table, _, code := runCLI(t, "", "stats", dir, "--format", "table")
	if code != ExitOK {
		t.Fatalf("table exit %d", code)
	}
	for _, want := range []string{"4 (2 incomplete, 1 with damaged lines)", "2 (rate_limit 2)", "75.0% (3 of 4 calls", "40.00 / 90.00 / 100.00 / 100.00 (12 calls)", "p50 ms"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestStatsEmptyAndErrors(t *testing.T) {
	empty := t.TempDir()
	out, _, code := runCLI(t, "", "stats", empty, "--json")
	if code != ExitOK || !strings.Contains(out, `"calls": 0`) || !strings.Contains(out, `"models": []`) {
		t.Errorf("empty dir: exit %d, output %s", code, out)
	}
	if out, _, code := runCLI(t, "", "stats", empty); code != ExitOK || !strings.Contains(out, "calls") {
		t.Errorf("empty dir table: exit %d, output %s", code, out)
	}

	_, errOut, code := runCLI(t, "", "stats", "/nonexistent/dir")
	if code != ExitNotFound || !strings.Contains(errOut, "does not exist") {
		t.Errorf("missing dir: exit %d, stderr %q; want %d", code, errOut, ExitNotFound)
	}
	if _, _, code := runCLI(t, "", "stats"); code != ExitUsage {
		t.Errorf("no DIR: exit %d; want %d", code, ExitUsage)
	}

	// A capture "file" that cannot be read is reported; the others still count.
	bad := t.TempDir()
	if err := os.Mkdir(filepath.Join(bad, "x-1.capture.jsonl"), 0o755); err != nil {
		t.Fatal(err)
	}
	st, _ := capture.Open(bad)
	if err := st.AppendExchange("ok-1", exchange("m", `{"prompt_tokens":1}`, 1, nil, 200, nil)); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCLI(t, "", "stats", bad, "--json")
	if code != ExitFailure || !strings.Contains(errOut, "rollout x-1 not counted") || !strings.Contains(out, `"calls": 1`) {
		t.Errorf("unreadable capture: exit %d, stderr %q, output %s", code, errOut, out)
	}
}

// TestStatsJSONRounded: every number of stats --json that is not a count is rounded as the TSV
// prints it: milliseconds to 2 decimals, the hit rate to 4, in the run, per model and per group.
func TestStatsJSONRounded(t *testing.T) {
	st := capturetest.NewStore(t)
	dir := st.Dir()
	f := func(v float64) *float64 { return &v }
	// Latencies 1.2 and 1.4: their float mean is 1.2999999999999998. Cache known on three calls,
	// one hit: 0.333...
	for i, lat := range []float64{1.2, 1.4, 1.4} {
		usage := `{"prompt_tokens":3,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":0}}`
		if i == 0 {
			usage = `{"prompt_tokens":3,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":2}}`
		}
		if err := st.AppendExchange("r1", exchange("m", usage, lat, f(lat/3), 200, nil)); err != nil {
			t.Fatal(err)
		}
	}
	for _, by := range []string{"model", "rollout", "dialect"} {
		out, errOut, code := runCLI(t, "", "stats", dir, "--json", "--by", by)
		if code != ExitOK {
			t.Fatalf("--by %s: exit %d: %s", by, code, errOut)
		}
		dec := json.NewDecoder(strings.NewReader(out))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		floats := 0
		var walk func(path string, v any)
		walk = func(path string, v any) {
			switch x := v.(type) {
			case map[string]any:
				for k, e := range x {
					walk(path+"."+k, e)
				}
			case []any:
				for i, e := range x {
					walk(fmt.Sprintf("%s[%d]", path, i), e)
				}
			case json.Number:
				s := x.String()
				dot := strings.IndexByte(s, '.')
				if dot < 0 {
					return
				}
				floats++
				want := 2
				if strings.HasSuffix(path, ".hit_rate") {
					want = 4
				}
				if decimals := len(s) - dot - 1; decimals > want {
					t.Errorf("--by %s: %s = %s: %d decimals, want at most %d", by, path, s, decimals, want)
				}
			}
		}
		walk("", v)
		if floats == 0 {
			t.Fatalf("--by %s: no fractional number in %s", by, out)
		}
		if !strings.Contains(out, `"mean": 1.33`) || !strings.Contains(out, `"hit_rate": 0.3333`) {
			t.Errorf("--by %s: want mean 1.33 and hit_rate 0.3333 in\n%s", by, out)
		}
	}
}

// TestStatsDamageNote: damaged lines and incomplete rollouts are named on stderr in every format
// (the TSV has no column for them); a clean dir gives no note.
func TestStatsDamageNote(t *testing.T) {
	for _, format := range []string{"tsv", "json", "table"} {
		_, errOut, code := runCLI(t, "", "stats", gymCapture, "--format", format)
		want := "modelcalls stats: 1 rollout has damaged capture lines, skipped: 3-0 (1 line); 1 rollout is marked incomplete (a capture write failed, calls may be missing): 4-0"
		if code != ExitOK || !strings.Contains(errOut, want) {
			t.Errorf("--format %s: exit %d, stderr %q; want the note %q", format, code, errOut, want)
		}
	}
	clean := t.TempDir()
	st, _ := capture.Open(clean)
	if err := st.AppendExchange("ok-1", exchange("m", `{"prompt_tokens":1}`, 1, nil, 200, nil)); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, "", "stats", clean); code != ExitOK || errOut != "" {
		t.Errorf("clean dir: exit %d, stderr %q; want 0 and nothing", code, errOut)
	}
	// More rollouts than the note names: the rest are counted.
	for i := range maxNamedRollouts + 2 {
		if err := st.MarkIncomplete(fmt.Sprintf("inc-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, errOut, _ := runCLI(t, "", "stats", clean); !strings.Contains(errOut, "7 rollouts are marked incomplete") || !strings.Contains(errOut, "inc-4 and 2 more") {
		t.Errorf("many incomplete rollouts: stderr %q", errOut)
	}
}

// TestStatsTSVGolden: the TSV of the fixture, one line for the run and one per model, with the
// maximum of both latency and TTFT.
func TestStatsTSVGolden(t *testing.T) {
	out, errOut, code := runCLI(t, "", "stats", gymCapture, "--format", "tsv")
	if code != ExitOK {
		t.Fatalf("exit %d; stderr %s", code, errOut)
	}
	checkGolden(t, "stats/gym-capture.tsv", out)
	header := strings.Split(strings.SplitN(out, "\n", 2)[0], "\t")
	if !slices.Contains(header, "latency_ms_max") || !slices.Contains(header, "ttft_ms_max") {
		t.Errorf("TSV header %q lacks latency_ms_max or ttft_ms_max", header)
	}
}

// TestSeveralCaptureDirs: calls, show and stats with --capture-dir repeated read each rollout from
// the first dir that holds it, as merge does, instead of the last dir given only.
func TestSeveralCaptureDirs(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	sa, _ := capture.Open(a)
	sb, _ := capture.Open(b)
	add := func(st *capture.Store, id string, n int, model string) {
		t.Helper()
		for range n {
			if err := st.AppendExchange(id, exchange(model, `{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}`, 1, nil, 200, nil)); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(sa, "only-a", 1, "ma")
	add(sb, "only-b", 2, "mb")
	add(sa, "both", 3, "ma") // read from a (given first)
	add(sb, "both", 5, "mb")

	// stats: every rollout of both dirs, "both" once, from a.
	out, errOut, code := runCLI(t, "", "stats", "--capture-dir", a, "--capture-dir", b, "--json")
	if code != ExitOK {
		t.Fatalf("stats: exit %d: %s", code, errOut)
	}
	var r stats.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Rollouts != 3 || r.Calls != 1+2+3 {
		t.Errorf("stats over a and b: %d rollouts, %d calls; want 3 and 6", r.Rollouts, r.Calls)
	}
	if want := "modelcalls stats: 1 rollout is in more than one capture dir, counted once, from the first --capture-dir that holds it (as merge reads it): both (in " + b + ", read from " + a + ")"; !strings.Contains(errOut, want) {
		t.Errorf("stats stderr %q; want %q", errOut, want)
	}
	// The order of the dirs decides, as for merge.
	out, _, _ = runCLI(t, "", "stats", "--capture-dir", b, "--capture-dir", a, "--json")
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Calls != 1+2+5 {
		t.Errorf("stats over b and a: %d calls; want 8 (%v)", r.Calls, err)
	}
	// merge agrees on which dir a rollout is read from.
	merged, _, _ := runCLI(t, `{"_ng_rollout_id": "both"}`+"\n", "merge", "--capture-dir", a, "--capture-dir", b, "--wait", "0")
	if !strings.Contains(merged, `"num_calls":3`) && !strings.Contains(merged, `"num_calls": 3`) {
		t.Errorf("merge does not read both from a: %s", merged)
	}

	for _, tc := range []struct {
		name  string
		args  []string
		calls int
		note  string
	}{
		{"calls, in the first dir", []string{"calls", "--capture-dir", a, "--capture-dir", b, "only-a", "--json"}, 1, ""},
		{"calls, in the second dir", []string{"calls", "--capture-dir", a, "--capture-dir", b, "only-b", "--json"}, 2, ""},
		{"calls, in both", []string{"calls", "--capture-dir", a, "--capture-dir", b, "both", "--json"}, 3,
			"modelcalls calls: rollout both is also in " + b + ", not shown: it is read from " + a + ", the first --capture-dir that holds it (as merge reads it)"},
		{"calls, in both, b first", []string{"calls", "--capture-dir", b, "--capture-dir", a, "both", "--json"}, 5, "is also in " + a},
	} {
		out, errOut, code := runCLI(t, "", tc.args...)
		if code != ExitOK || strings.Count(out, "\n") != tc.calls || !strings.Contains(errOut, tc.note) {
			t.Errorf("%s: exit %d, %d records, stderr %q; want 0, %d and %q", tc.name, code, strings.Count(out, "\n"), errOut, tc.calls, tc.note)
		}
		if tc.note == "" && strings.Contains(errOut, "also in") {
			t.Errorf("%s: note about another dir: %q", tc.name, errOut)
		}
	}
	checkExits(t, []exitCase{
		{"show, in the first dir", []string{"show", "--capture-dir", a, "--capture-dir", b, "only-a", "0"}, ExitOK, ""},
		{"show, in the second dir", []string{"show", "--capture-dir", a, "--capture-dir", b, "only-b", "1"}, ExitOK, ""},
		{"show, in both", []string{"show", "--capture-dir", a, "--capture-dir", b, "both"}, ExitOK, "rollout both is also in " + b},
		{"in neither", []string{"calls", "--capture-dir", a, "--capture-dir", b, "nope"}, ExitNotFound, "rollout nope has no capture in " + a + ", " + b},
		{"calls, second dir missing", []string{"calls", "--capture-dir", a, "--capture-dir", filepath.Join(b, "x"), "only-a"}, ExitNotFound, "capture dir " + filepath.Join(b, "x") + " does not exist"},
		{"stats, second dir missing", []string{"stats", "--capture-dir", a, "--capture-dir", filepath.Join(b, "x")}, ExitNotFound, "capture dir " + filepath.Join(b, "x") + " does not exist"},
		{"show, second dir missing", []string{"show", "--capture-dir", a, "--capture-dir", filepath.Join(b, "x"), "only-a"}, ExitNotFound, "does not exist"},
		{"error category of the second dir", []string{"stats", "--capture-dir", a, "--capture-dir", b, "--error", "nope_category"}, ExitUsage, "nor one a call in " + a + ", " + b + " has"},
	})
}
