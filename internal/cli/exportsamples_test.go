package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/modelcalls/modelcalls/samples"
)

func writeRollouts(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rollouts.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExportSamplesSFT: --min-reward keeps the rollouts at or above it, and every line written
// passes the fine-tuning rules.
func TestExportSamplesSFT(t *testing.T) {
	in := writeRollouts(t, `{"_ng_rollout_id":"e2e-scripted-codex","reward":1.0}`, `{"_ng_rollout_id":"e2e-scripted-pi-chat","reward":0.0}`,
		`{"_ng_rollout_id":"e2e-scripted-pi-messages"}`)
	outPath := filepath.Join(t.TempDir(), "sft.jsonl")
	_, errOut, code := runCLI(t, "", "export", "samples", "--capture-dir", lineageCaptures, "--in", in, "--format", "sft", "--out", outPath, "--min-reward", "0.5")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "1 sft rows from 1 of 3 rollouts; skipped: 2 below --min-reward") {
		t.Errorf("summary: %s", errOut)
	}
	f, err := os.Open(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	n := 0
	for sc.Scan() {
		var l samples.SFTLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if err := samples.ValidateSFT(&l); err != nil {
			t.Errorf("line %d: %v", n, err)
		}
		n++
	}
	if n != 1 {
		t.Errorf("%d lines", n)
	}
}

// TestExportSamplesCompaction: a rollout whose main chain crosses a real compaction (Codex) is two
// sft lines and two token-less... rows; the summary, the first line's last turn, is trained by
// default and weight 0 with --summaries context.
func TestExportSamplesCompaction(t *testing.T) {
	for _, tc := range []struct {
		summaries string
		weight    int
	}{{"train", 1}, {"context", 0}} {
		in := writeRollouts(t, `{"_ng_rollout_id":"e2e-scripted-codex-compact","reward":1.0}`)
		out, errOut, code := runCLI(t, "", "export", "samples", "--capture-dir", lineageCaptures, "--in", in, "--format", "sft", "--out", "-", "--summaries", tc.summaries)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || !strings.Contains(errOut, "2 sft rows from 1 of 1 rollouts") {
			t.Fatalf("--summaries %s: %d lines: %s", tc.summaries, len(lines), errOut)
		}
		var first samples.SFTLine
		if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
			t.Fatal(err)
		}
		last := first.Messages[len(first.Messages)-1]
		if last.Role != "assistant" || last.Weight == nil || *last.Weight != tc.weight || !strings.Contains(*last.Content, "<summary>") {
			t.Errorf("--summaries %s: first line ends %+v, want the summary with weight %d", tc.summaries, last, tc.weight)
		}
	}
}

// TestExportSamplesParquet: the Parquet file reads back as the same rows the JSONL export writes.
// TestExportSamplesTokensWithoutIDs: rollouts captured without token ids give no tokens rows, and
// the summary says why and how to capture them; a rollout with no captured calls is counted as
// such, not as unclean.
func TestExportSamplesTokensWithoutIDs(t *testing.T) {
	in := writeRollouts(t, `{"_ng_rollout_id":"e2e-scripted-codex","reward":1.0}`, `{"_ng_rollout_id":"never-ran","reward":0.0}`)
	_, errOut, code := runCLI(t, "", "export", "samples", "--capture-dir", lineageCaptures, "--in", in, "--format", "tokens",
		"--out", filepath.Join(t.TempDir(), "tokens.jsonl"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"0 tokens rows from 0 of 2 rollouts; skipped: 0 below --min-reward, 1 without captured calls, 0 not clean (--status), 0 without a main chain, 1 without token ids,",
		"1 rollout has no main-chain call with prompt and generated token ids: capture with modelcalls proxy (or run) --tokens vllm|sglang|llama-server",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestExportSamplesParquet(t *testing.T) {
	dir := t.TempDir()
	pq, js := filepath.Join(dir, "t.parquet"), filepath.Join(dir, "t.jsonl")
	for _, out := range []string{pq, js} {
		if _, errOut, code := runCLI(t, "", "export", "samples", "--capture-dir", lineageCaptures, "--format", "transitions", "--out", out, "--status", "any"); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	}
	fromPQ, err := parquet.ReadFile[samples.Transition](pq)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON []samples.Transition
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var tr samples.Transition
		if err := json.Unmarshal([]byte(line), &tr); err != nil {
			t.Fatal(err)
		}
		fromJSON = append(fromJSON, tr)
	}
	// One transition per captured call: per line of the captures.
	files, _ := filepath.Glob(filepath.Join(lineageCaptures, "*.capture.jsonl"))
	calls := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		calls += strings.Count(strings.TrimSpace(string(b)), "\n") + 1
	}
	if len(fromPQ) != calls || !reflect.DeepEqual(fromPQ, fromJSON) {
		t.Errorf("parquet %d rows, jsonl %d rows, %d captured calls; equal %v", len(fromPQ), len(fromJSON), calls,
			reflect.DeepEqual(fromPQ, fromJSON))
	}
}

func TestExportSamplesExits(t *testing.T) {
	checkExits(t, []exitCase{
		{"no format", []string{"export", "samples", "--capture-dir", lineageCaptures, "--out", "-"}, ExitUsage, "--format"},
		{"sft parquet", []string{"export", "samples", "--capture-dir", lineageCaptures, "--format", "sft", "--out", "x.parquet"}, ExitUsage, "JSON Lines only"},
		{"no out", []string{"export", "samples", "--capture-dir", lineageCaptures, "--format", "sft"}, ExitUsage, "--out"},
		{"bad status", []string{"export", "samples", "--capture-dir", lineageCaptures, "--format", "sft", "--out", "-", "--status", "x"}, ExitUsage, "--status"},
		{"bad summaries", []string{"export", "samples", "--capture-dir", lineageCaptures, "--format", "sft", "--out", "-", "--summaries", "x"}, ExitUsage, "--summaries"},
		{"missing dir", []string{"export", "samples", "--capture-dir", "/nonexistent-dir", "--format", "sft", "--out", "-"}, ExitNotFound, "does not exist"},
	})
}
