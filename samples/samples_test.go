package samples

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/lineage"
	"github.com/modelcalls/modelcalls/record"
)

var update = flag.Bool("update", false, "rewrite testdata/golden")

// harnessCaptures are real Claude Code, Codex, pi and opencode captures (lineage/testdata/README.md).
const harnessCaptures = "../lineage/testdata/captures"

func readRollout(t *testing.T, id string) ([]lineage.Call, *lineage.Lineage) {
	t.Helper()
	store, err := capture.OpenExisting(harnessCaptures)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	recs, _, err := record.ReadAvailableRecords(store, id)
	if err != nil {
		t.Fatal(err)
	}
	calls := lineage.FromRecords(recs)
	return calls, lineage.Derive(calls)
}

// TestSFTHarnessCaptures: the main chain of every real harness capture becomes lines that pass the
// fine-tuning rules, one per segment (the chain split at each compaction); the lines are pinned
// (checked by eye once), one indented JSON object after another.
func TestSFTHarnessCaptures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(harnessCaptures, "*"+capture.CaptureSuffix))
	if len(files) == 0 {
		t.Fatal("no captures")
	}
	for _, f := range files {
		id := strings.TrimSuffix(filepath.Base(f), capture.CaptureSuffix)
		t.Run(id, func(t *testing.T) {
			calls, l := readRollout(t, id)
			// The model's tool call and final answer are trained; nothing the client wrote is.
			// Across a compaction the main chain is two lines: the history up to the summary
			// request, its summary the last model turn, then the conversation after it. Claude
			// Code's summary request branches after the first call's tool call and its summary is
			// trained there; the answer before the compaction, kept verbatim after the summary,
			// is a model turn of the second line. Codex's first line is the whole first turn and
			// the summary, its second the resumed turn. With summaries as context only, each
			// summary is weight 0.
			wantWeights := [][]int{{1, 1}}
			wantContext := wantWeights
			switch id {
			case "e2e-scripted-claude-code-compact":
				wantWeights = [][]int{{1, 1}, {1, 1, 1}}
				wantContext = [][]int{{1, 0}, {1, 1, 1}}
			case "e2e-scripted-codex-compact":
				wantWeights = [][]int{{1, 1, 1}, {1, 1}}
				wantContext = [][]int{{1, 1, 0}, {1, 1}}
			}
			for _, opt := range []Options{{}, {ContextOnlySummaries: true}} {
				lines, err := SFT(calls, l, opt)
				if err != nil {
					t.Fatal(err)
				}
				var weights [][]int
				for _, line := range lines {
					if err := ValidateSFT(line); err != nil {
						t.Fatalf("invalid line: %v", err)
					}
					var w []int
					for _, m := range line.Messages {
						if m.Weight != nil {
							w = append(w, *m.Weight)
						}
					}
					weights = append(weights, w)
				}
				want := wantWeights
				if opt.ContextOnlySummaries {
					want = wantContext
				}
				if fmt.Sprint(weights) != fmt.Sprint(want) {
					t.Errorf("%+v: assistant weights per line %v, want %v", opt, weights, want)
				}
				if opt.ContextOnlySummaries {
					continue
				}
				var got []byte
				for i, line := range lines {
					b, _ := json.MarshalIndent(line, "", " ")
					if i > 0 {
						got = append(got, '\n')
					}
					got = append(got, b...)
				}
				golden := filepath.Join("testdata", "golden", id+".sft.json")
				if *update {
					os.MkdirAll(filepath.Dir(golden), 0o755)
					os.WriteFile(golden, got, 0o644)
					continue
				}
				want2, err := os.ReadFile(golden)
				if err != nil || !bytes.Equal(got, want2) {
					t.Errorf("differs from %s (go test -update rewrites it): %v", golden, err)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestValidateSFT writes the chat fine-tuning rules down as cases: each breaks one rule.
func TestValidateSFT(t *testing.T) {
	call := func(id string) SFTToolCall {
		var tc SFTToolCall
		tc.ID, tc.Type = id, "function"
		tc.Function.Name, tc.Function.Arguments = "read", `{"path":"a"}`
		return tc
	}
	good := func() SFTLine {
		return SFTLine{Messages: []SFTMessage{
			{Role: "system", Content: ptr("S")},
			{Role: "user", Content: ptr("read a")},
			{Role: "assistant", ToolCalls: []SFTToolCall{call("c1")}, Weight: ptr(1)},
			{Role: "tool", ToolCallID: "c1", Content: ptr("hello")},
			{Role: "assistant", Content: ptr("it says hello"), Weight: ptr(0)},
		}, Tools: []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"read"}}`)}}
	}
	cases := []struct {
		name  string
		edit  func(l *SFTLine)
		error string
	}{
		{"valid", func(*SFTLine) {}, ""},
		{"no messages", func(l *SFTLine) { l.Messages = nil }, "no messages"},
		{"unknown role", func(l *SFTLine) { l.Messages[0].Role = "developer" }, "role"},
		{"empty user", func(l *SFTLine) { l.Messages[1].Content = ptr("") }, "without content"},
		{"weight on user", func(l *SFTLine) { l.Messages[1].Weight = ptr(1) }, "weight on a user"},
		{"weight 2", func(l *SFTLine) { l.Messages[4].Weight = ptr(2) }, "0 or 1"},
		{"nothing trainable", func(l *SFTLine) { l.Messages[2].Weight = ptr(0) }, "weight 1"},
		{"empty assistant", func(l *SFTLine) { l.Messages[4].Content = nil }, "neither"},
		{"arguments not JSON", func(l *SFTLine) { l.Messages[2].ToolCalls[0].Function.Arguments = "{" }, "JSON arguments"},
		{"tool result for another call", func(l *SFTLine) { l.Messages[3].ToolCallID = "c9" }, "no open tool call"},
		{"tool call unanswered", func(l *SFTLine) {
			l.Messages = append(l.Messages[:3], l.Messages[4])
		}, "has no tool message"},
		{"repeated call id", func(l *SFTLine) {
			l.Messages = append(l.Messages, SFTMessage{Role: "user", Content: ptr("again")},
				SFTMessage{Role: "assistant", ToolCalls: []SFTToolCall{call("c1")}, Weight: ptr(1)},
				SFTMessage{Role: "tool", ToolCallID: "c1", Content: ptr("x")})
		}, "repeated"},
		{"bad tool", func(l *SFTLine) { l.Tools[0] = json.RawMessage(`{"name":"read"}`) }, "tool 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := good()
			tc.edit(&l)
			err := ValidateSFT(&l)
			if tc.error == "" && err != nil || tc.error != "" && (err == nil || !strings.Contains(err.Error(), tc.error)) {
				t.Errorf("got %v, want %q", err, tc.error)
			}
		})
	}
}

// TestSFTWeights: an assistant turn the client injected is weight 0, and a generation that appears
// twice in one line is trained once.
func TestSFTWeights(t *testing.T) {
	chat := func(msgs string) []byte { return []byte(`{"model":"m","messages":[` + msgs + `]}`) }
	answer := func(text string) []byte {
		return []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + text + `"},"finish_reason":"stop"}]}`)
	}
	calls := []lineage.Call{
		{ID: "c0", Dialect: "chat", Completed: true, Request: chat(`{"role":"user","content":"hi"}`), Response: answer("hello")},
		{ID: "c1", Index: 1, Dialect: "chat", Completed: true, Request: chat(`{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"go"},{"role":"assistant","content":"injected"},{"role":"user","content":"on"}`), Response: answer("done")},
	}
	l := lineage.Derive(calls)
	lines, err := SFT(calls, l, Options{})
	if err != nil {
		t.Fatal(err)
	}
	line := lines[0]
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1", len(lines))
	}
	if err := ValidateSFT(line); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range line.Messages {
		if m.Role == "assistant" {
			got = append(got, *m.Content+"="+string(rune('0'+*m.Weight)))
		}
	}
	if want := []string{"hello=1", "injected=0", "done=1"}; !slices.Equal(got, want) {
		t.Errorf("assistant turns %v, want %v", got, want)
	}
}

// TestTokenRows: the main chain glued where prefixes hold, the loss mask exactly on generated ids,
// and a new row (with its reason) at a drift and after a call without ids.
func TestTokenRows(t *testing.T) {
	ids := func(v ...int64) []int64 { return v }
	calls := []lineage.Call{
		{ID: "c0", Completed: true, Tokens: &lineage.TokenIDs{Prompt: ids(1, 2), Generated: ids(3, 4), LogProbs: []float64{-0.5, -0.25}}},
		{ID: "c1", Index: 1, Completed: true, Tokens: &lineage.TokenIDs{Prompt: ids(1, 2, 3, 4, 5), Generated: ids(6)}},
		// re-rendered history: 3 became 9
		{ID: "c2", Index: 2, Completed: true, Tokens: &lineage.TokenIDs{Prompt: ids(1, 2, 9, 4, 5, 6, 7), Generated: ids(8), LogProbs: []float64{-1}}},
	}
	// The lineage is given (the drift would keep c2 off the chain if derived from ids).
	l := &lineage.Lineage{MainChain: []string{"c0", "c1", "c2"}, Calls: []lineage.Node{{CallID: "c0"}, {CallID: "c1"}, {CallID: "c2"}}}
	reward := 1.0
	rows := TokenRows("r1", &reward, calls, l, Options{})
	if len(rows) != 2 {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	r := rows[0]
	if !slices.Equal(r.InputIDs, ids(1, 2, 3, 4, 5, 6)) || !slices.Equal(r.LossMask, []int32{0, 0, 1, 1, 0, 1}) ||
		!slices.Equal(r.RolloutLogprobs, []float64{0, 0, -0.5, -0.25, 0, 0}) || !slices.Equal(r.ModelCallIDs, []string{"c0", "c1"}) ||
		!slices.Equal(r.PromptStarts, []int32{0, 4}) || !slices.Equal(r.GenerationStarts, []int32{2, 5}) || !slices.Equal(r.Ends, []int32{4, 6}) {
		t.Errorf("row 0: %+v", r)
	}
	if r := rows[1]; r.SplitReason != "token_prefix_mismatch at 2 (parent_prompt)" || !slices.Equal(r.LossMask, []int32{0, 0, 0, 0, 0, 0, 0, 1}) || r.Segment != 1 {
		t.Errorf("row 1: %+v", r)
	}

	calls[1].Tokens = nil
	rows = TokenRows("r1", nil, calls, l, Options{})
	if len(rows) != 2 || rows[1].SplitReason != SplitNoTokenIDs || !slices.Equal(rows[1].ModelCallIDs, []string{"c2"}) {
		t.Errorf("without ids in the middle: %+v", rows)
	}
}

// TestSFTPaths: with every path, the abandoned branch gets its own line in which the shared
// generation is not trained again.
func TestSFTPaths(t *testing.T) {
	chat := func(msgs string) []byte { return []byte(`{"model":"m","messages":[` + msgs + `]}`) }
	answer := func(text string) []byte {
		return []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + text + `"},"finish_reason":"stop"}]}`)
	}
	calls := []lineage.Call{
		{ID: "c0", Dialect: "chat", Completed: true, Request: chat(`{"role":"user","content":"hi"}`), Response: answer("hello")},
		{ID: "c1", Index: 1, Dialect: "chat", Completed: true, Request: chat(`{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"a"}`), Response: answer("A")},
		{ID: "c2", Index: 2, Dialect: "chat", Completed: true, Request: chat(`{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"b"}`), Response: answer("B")},
	}
	lines, err := SFTPaths(calls, lineage.Derive(calls), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		if err := ValidateSFT(l); err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, m := range l.Messages {
			if m.Role == "assistant" {
				s = append(s, *m.Content+"="+string(rune('0'+*m.Weight)))
			}
		}
		got = append(got, strings.Join(s, " "))
	}
	if want := []string{"hello=1 B=1", "hello=0 A=1"}; !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
}

// vllmLine is a capture line of a Chat call answered in vLLM's shape with return_token_ids: the
// prompt's ids at the top, the choice's generated ids and one logprob per id.
func vllmLine(id, messages, answer string, prompt, gen []int64) []byte {
	ids := func(v []int64) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	var lps []string
	for range gen {
		lps = append(lps, `{"token":"t","logprob":-0.5,"bytes":[116],"top_logprobs":[]}`)
	}
	return []byte(`{"model_call_id":"` + id + `","dialect":"chat","model_ref":null,"started_at":1.0,"completed_at":2.0,"latency_ms":1.0,"latency_ttft_ms":null,"status_code":200,"error_category":null,` +
		`"request":{"model":"m","messages":[` + messages + `],"return_token_ids":true,"logprobs":true},` +
		`"response":{"id":"x","object":"chat.completion","model":"m","prompt_token_ids":` + ids(prompt) + `,"choices":[{"index":0,"message":{"role":"assistant","content":"` + answer + `"},` +
		`"logprobs":{"content":[` + strings.Join(lps, ",") + `]},"finish_reason":"stop","token_ids":` + ids(gen) + `}],"usage":{"prompt_tokens":` + strconv.Itoa(len(prompt)) + `,"completion_tokens":` + strconv.Itoa(len(gen)) + `}}}`)
}

// TestTokensFromCapture: ids read from vLLM-shaped capture lines (samples.TokenIDs) give the main
// chain one token row whose loss mask covers exactly the generated ids, and an audit that passes.
func TestTokensFromCapture(t *testing.T) {
	dir := t.TempDir()
	lines := [][]byte{
		vllmLine(strings.Repeat("a", 32), `{"role":"user","content":"hi"}`, "hello", []int64{1, 2, 3}, []int64{4, 5}),
		vllmLine(strings.Repeat("b", 32), `{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"more"}`, "ok", []int64{1, 2, 3, 4, 5, 6, 7}, []int64{8}),
	}
	if err := os.WriteFile(filepath.Join(dir, "r.capture.jsonl"), append(bytes.Join(lines, []byte("\n")), '\n'), 0o640); err != nil {
		t.Fatal(err)
	}
	store, err := capture.OpenExisting(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	calls, _, err := lineage.ReadCalls(store, "r", TokenIDs)
	if err != nil {
		t.Fatal(err)
	}
	l := lineage.Derive(calls)
	if a := l.Calls[1].Audit; a == nil || !a.OK || l.Calls[1].Relation != lineage.RelationExtends {
		t.Fatalf("call 1: %+v", l.Calls[1])
	}
	rows := TokenRows("r", nil, calls, l, Options{})
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	r := rows[0]
	if !slices.Equal(r.InputIDs, []int64{1, 2, 3, 4, 5, 6, 7, 8}) || !slices.Equal(r.LossMask, []int32{0, 0, 0, 1, 1, 0, 0, 1}) ||
		!slices.Equal(r.RolloutLogprobs, []float64{0, 0, 0, -0.5, -0.5, 0, 0, -0.5}) {
		t.Errorf("row %+v", r)
	}
}
