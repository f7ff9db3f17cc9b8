//go:build e2e && unix

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/samples"
)

// samplesTurns are the prompts of the pi runs of the llama-samples upstream: the first starts a
// session, each later one continues it (pi -c), all under one rollout.
var samplesTurns = []string{"Say hello", "Say it again", "Once more"}

// runLlamaSamples runs pi on Chat without tools (pi --no-tools), so llama-server gives logprobs on
// its streamed calls, three times in a row under one rollout through `modelcalls run --tokens
// llama-server`, each run after the first continuing pi's session: a real harness's main chain of
// extends edges whose calls all carry generated ids. Each call gets the checks of every run (its
// record against the wire, the members --tokens added); then the token export's rows against the
// wire (checkTokens, which includes the samples check), the lineage of the rollout (a chain of
// extends, the answers authored by the model, each edge's token-prefix audit against the ids on
// the wire), and the main chain's `export samples --format tokens` rows (checkSamplesChain).
func (s *suite) runLlamaSamples(t *testing.T) {
	const name = "llama-samples"
	url, dir := s.llamaServer(t, name, "tiny-chatml.gguf")
	tap, front := tapIn(t, url)
	capDir := filepath.Join(dir, "capture")
	rig := &upstreamRig{name: name, bin: s.bin, tap: tap, captureDir: capDir, stopUpstream: front.Close,
		upstreamURL: front.URL, answer: func(string) string { return tinyAnswer }, tokens: "llama-server"}
	exe, ok := s.harnesses["pi"]
	if !ok {
		t.Skip("pi is not selected")
	}
	var res *runResult
	t.Run("pi-continued", func(t *testing.T) { res = s.runPiContinued(t, rig, exe, dir) })
	if res == nil {
		return
	}
	t.Run("tokens", func(t *testing.T) {
		for _, line := range checkTokens(t, s.bin, rig, []*runResult{res}) {
			s.report.note(name + ": " + line)
		}
	})
	t.Run("lineage", func(t *testing.T) {
		for _, line := range checkLineageChain(t, s.bin, rig, res, url) {
			s.report.note(name + ": " + line)
		}
	})
	t.Run("sft", func(t *testing.T) { s.report.note(name + ": " + checkSFTChain(t, s.bin, rig, res)) })
	s.report.add(name, res)
}

// runPiContinued runs pi --no-tools once per samplesTurns entry, in one HOME and project dir, under
// `modelcalls run --rollout ID --upstream <tap> --tokens llama-server`; every run after the first
// passes -c. Each run must print the model's answer and make exactly one model call, whose
// request carries the whole conversation so far (the earlier prompts and answers, in order), with
// its capture line and record checked against the wire. It returns all calls as one run.
func (s *suite) runPiContinued(t *testing.T, rig *upstreamRig, exe, dir string) *runResult {
	run := piRun("pi-chat", DialectChat, "openai-completions", "e2e-model", withV1)
	id := "e2e-" + rig.name + "-pi-continued"
	runDir := filepath.Join(dir, "runs", "pi-continued")
	home, project := filepath.Join(runDir, "home"), filepath.Join(dir, "projects", "pi-continued")
	writeFile(t, filepath.Join(project, "hello.txt"), newNonce(t)+"\n")
	res := &runResult{run: "pi-continued", dialect: DialectChat, rolloutID: id, home: home, project: project, exe: exe,
		tokenCaptures: map[string]json.RawMessage{}}
	for k, prompt := range samplesTurns {
		harnessArgs, env := run.command(t, home, run.baseURL(rig.upstreamURL), prompt)
		harnessArgs = append([]string{"--no-tools"}, harnessArgs...)
		if k > 0 {
			harnessArgs = append([]string{"-c"}, harnessArgs...)
		}
		args := append([]string{"run", "--rollout", id, "--upstream", rig.upstreamURL, "--capture-dir", rig.captureDir,
			"--name", proxyName, "--tokens", rig.tokens, "--", exe}, harnessArgs...)
		rig.tap.Take()
		started := time.Now()
		stdout, stderr, err := runProcess(rig.bin, args, env, home, project, harnessTimeout)
		finished := time.Now()
		res.wall += finished.Sub(started)
		writeFile(t, filepath.Join(runDir, fmt.Sprintf("stdout.%d", k)), stdout)
		writeFile(t, filepath.Join(runDir, fmt.Sprintf("stderr.%d", k)), stderr)
		if err != nil {
			t.Fatalf("run %d: pi %s: %v\nstdout:\n%s\nstderr (tail):\n%s", k, strings.Join(args, " "), err, stdout, tail(stderr, 40))
		}
		if strings.Contains(stderr, "panic:") || strings.Contains(stderr, "DATA RACE") {
			t.Errorf("run %d: run's gateway logged a panic or data race:\n%s", k, tail(stderr, 40))
		}
		if strings.TrimRight(stdout, "\r\n") != tinyAnswer {
			t.Errorf("run %d: pi printed %q, want exactly %q\nstderr (tail):\n%s", k, stdout, tinyAnswer, tail(stderr, 20))
		}
		var calls []TapEntry
		for _, e := range rig.tap.Take() {
			switch {
			case e.Dialect() != "":
				calls = append(calls, e)
			case isRender(rig.tokens, e):
				res.renders = append(res.renders, e)
			default:
				res.passed = append(res.passed, fmt.Sprintf("%s %s -> %d", e.Method, e.Path, e.Status))
			}
		}
		if len(calls) != 1 {
			t.Fatalf("run %d: %d model calls reached the upstream, want 1 (no tools: one answer)", k, len(calls))
		}
		e := calls[0]
		checkPiConversation(t, k, e.ReqBody)

		checkNoGapFiles(t, rig.captureDir, id)
		if n := captureLines(t, rig.captureDir, id); n != k+1 {
			t.Fatalf("run %d: capture file has %d lines, want %d (one per run so far)", k, n, k+1)
		}
		recs := readRecords(t, rig.bin, rig.captureDir, id)
		if len(recs) != k+1 {
			t.Fatalf("run %d: modelcalls calls gives %d records, want %d", k, len(recs), k+1)
		}
		r := recs[k]
		obs := Observe(DialectChat, mustDecode(t, e))
		if !eqStr(r.ResponseID, obs.ResponseID) {
			t.Errorf("run %d: the last record has response_id %v, the upstream answered %v", k, deref(r.ResponseID), deref(obs.ResponseID))
		}
		tcs := readTokenCaptures(t, rig.captureDir, id)
		res.tokenCaptures[r.ModelCallID] = tcs[r.ModelCallID]
		what := fmt.Sprintf("run %d call", k)
		if refusesLogprobs(rig.tokens, r) {
			t.Errorf("%s: pi --no-tools sent a streamed request with tools; llama-server gives no logprobs on it", what)
		}
		checked := checkTokenRequest(t, what, rig.tokens, r, tcs[r.ModelCallID], e)
		checkRecord(t, what, r, checked, obs, nil, DialectChat, started, finished)
		res.records, res.calls = recs, append(res.calls, e)
	}
	return res
}

// checkPiConversation checks the k-th request pi sent: a system message, then for each earlier
// run its prompt and the model's answer, then this run's prompt (pi sends user text as a list of
// text parts or a string; both are read).
func checkPiConversation(t *testing.T, k int, body []byte) {
	t.Helper()
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("run %d: request: %v", k, err)
	}
	var want, got []string
	for i := 0; i <= k; i++ {
		want = append(want, "user: "+samplesTurns[i])
		if i < k {
			want = append(want, "assistant: "+tinyAnswer)
		}
	}
	for _, m := range req.Messages {
		if m.Role == "system" || m.Role == "developer" {
			continue
		}
		var text string
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &text) != nil && json.Unmarshal(m.Content, &parts) == nil {
			for _, p := range parts {
				text += p.Text
			}
		}
		got = append(got, m.Role+": "+text)
	}
	if !slices.Equal(got, want) {
		t.Errorf("run %d: pi sent the conversation %q, want %q (pi -c continues the session)", k, got, want)
	}
}

// lineageJSON is what `modelcalls lineage --format json` prints, as far as this test reads it.
type lineageJSON struct {
	MainChain []string `json:"main_chain"`
	Calls     []struct {
		ModelCallID  string  `json:"model_call_id"`
		CallIndex    int     `json:"call_index"`
		ParentCallID *string `json:"parent_call_id"`
		Relation     string  `json:"relation"`
		Evidence     string  `json:"evidence"`
		NewMessages  int     `json:"new_messages"`
		MainChain    bool    `json:"main_chain"`
		Messages     []struct {
			Role       string `json:"role"`
			Author     string `json:"author"`
			FromCallID string `json:"from_call_id"`
		} `json:"messages"`
		TokenAudit *struct {
			OK       bool   `json:"ok"`
			Position *int   `json:"position"`
			In       string `json:"in"`
			Expected *int64 `json:"expected"`
			Got      *int64 `json:"got"`
		} `json:"token_audit"`
	} `json:"calls"`
	Summary map[string]int `json:"summary"`
}

// checkLineageChain checks the rollout's lineage and its main chain's token rows against the wire:
//   - `modelcalls lineage --format json`: call k extends call k-1 (message matching), all calls on
//     the main chain, the earlier answers in each request authored by the model and attributed
//     to the call that gave each (turn j to call j), and each edge's token audit equal to the one computed here from
//     the ids on the wire (the parent's /tokenize answer and logprob entries, the child's
//     /tokenize answer): exact, or the first differing position, where it lies, and both ids;
//   - where the audit fails in the parent's generation, llama-server's own /detokenize of the
//     child's prompt from there starts with the parent's answer, and of the parent's generated
//     ids gives that answer: the template rendered the same text back as other tokens;
//   - the text tree shows the chain;
//   - `export samples --format tokens`: the main chain's rows hold every call once, in order,
//     and start anew exactly at the failed edges with the audit's position (checkSamples, run
//     by checkTokens, checks the loss mask and logprobs of each row).
//
// llamaURL is llama-server's own address (not the tap), for /detokenize. It returns summary lines.
func checkLineageChain(t *testing.T, bin string, rig *upstreamRig, res *runResult, llamaURL string) []string {
	t.Helper()
	out, err := exec.Command(bin, "lineage", "--capture-dir", rig.captureDir, res.rolloutID, "--format", "json").Output()
	if err != nil {
		t.Fatalf("modelcalls lineage --format json: %v", err)
	}
	var l lineageJSON
	if err := json.Unmarshal(out, &l); err != nil {
		t.Fatalf("lineage JSON: %v\n%s", err, out)
	}
	if len(l.Calls) != len(res.records) {
		t.Fatalf("lineage has %d calls, the capture %d", len(l.Calls), len(res.records))
	}
	var ids []string
	for _, r := range res.records {
		ids = append(ids, r.ModelCallID)
	}
	if !slices.Equal(l.MainChain, ids) {
		t.Errorf("main chain %v, want every call in order %v", l.MainChain, ids)
	}
	// Each call's ids as they crossed the wire: prompt ids from /tokenize, generated ids from
	// the logprob entries.
	prompts, gens := make([][]int64, len(ids)), make([][]int64, len(ids))
	for k, r := range res.records {
		p, err := renderedPrompt(t, res.renders, DialectChat, r.Request)
		if err != nil {
			t.Fatalf("call %d: %v", k, err)
		}
		prompts[k] = p
		entries, _ := sentLogprobs(t, mustDecode(t, res.calls[k]))
		for _, en := range entries {
			gens[k] = append(gens[k], en.ID)
		}
	}
	var failed []string // the failed audits as a split reason names them, by child
	var notes []string
	for k, c := range l.Calls {
		what := fmt.Sprintf("lineage call %d", k)
		if k == 0 {
			if c.Relation != "root" || c.ParentCallID != nil {
				t.Errorf("%s: %s of %v, want root", what, c.Relation, derefAny(c.ParentCallID))
			}
			continue
		}
		if c.Relation != "extends" || c.Evidence != "messages" || c.ParentCallID == nil || *c.ParentCallID != ids[k-1] ||
			!c.MainChain || c.NewMessages != 1 {
			t.Errorf("%s: %s of %v by %s, +%d messages, main chain %v; want extends of %s by messages, +1, on the main chain",
				what, c.Relation, derefAny(c.ParentCallID), c.Evidence, c.NewMessages, c.MainChain, ids[k-1])
		}
		answers := 0
		for _, m := range c.Messages {
			switch {
			case m.Role == "assistant":
				// Turn j is call j's answer, though the tiny model says the same words each time.
				if m.Author != "model" || answers >= k || m.FromCallID != ids[answers] {
					t.Errorf("%s: answer %d authored by %s from %q, want model from call %d", what, answers, m.Author, m.FromCallID, answers)
				}
				answers++
			case m.Author != "client":
				t.Errorf("%s: %s message authored by %s, want client", what, m.Role, m.Author)
			}
		}
		if answers != k {
			t.Errorf("%s: %d answers in the context, want %d", what, answers, k)
		}

		// The audit, computed from the wire.
		parent := append(slices.Clone(prompts[k-1]), gens[k-1]...)
		child := prompts[k]
		pos := 0
		for pos < len(parent) && pos < len(child) && parent[pos] == child[pos] {
			pos++
		}
		a := c.TokenAudit
		if a == nil {
			t.Errorf("%s: no token audit on an edge whose both ends carry ids", what)
			continue
		}
		if pos == len(parent) {
			if !a.OK {
				t.Errorf("%s: audit %s, the parent's prompt and generated ids are a prefix of the child's", what, mustJSON(a))
			}
			notes = append(notes, fmt.Sprintf("%s: token audit exact (%d of %d prompt ids carried over)", what, pos, len(child)))
			continue
		}
		in := "parent_prompt"
		if pos >= len(prompts[k-1]) {
			in = "parent_generation"
		}
		var got *int64
		if pos < len(child) {
			got = &child[pos]
		}
		if a.OK || a.Position == nil || *a.Position != pos || a.In != in || a.Expected == nil || *a.Expected != parent[pos] ||
			!eqInt64p(a.Got, got) {
			t.Errorf("%s: audit %s, want differs at %d (%s): expected %d, got %v", what, mustJSON(a), pos, in, parent[pos], derefAny(got))
		}
		failed = append(failed, fmt.Sprintf("%d (%s)", pos, in))
		note := fmt.Sprintf("%s: token audit differs at %d (%s), expected id %d, got %v", what, pos, in, parent[pos], derefAny(got))
		if in == "parent_generation" {
			// The history before the answer rendered the same; the answer came back as other ids.
			answer := answerText(t, res.records[k-1].Response)
			genText := detokenize(t, llamaURL, gens[k-1])
			childText := detokenize(t, llamaURL, child[len(prompts[k-1]):])
			if genText != answer || !strings.HasPrefix(childText, answer) {
				t.Errorf("%s: the parent's generated ids read %q, the child's prompt from its end reads %.80q; want both to give the answer %q",
					what, genText, childText, answer)
			}
			note += fmt.Sprintf(": the template re-rendered the answer %q as ids %v, generated as %v", answer,
				child[len(prompts[k-1]):min(len(child), len(prompts[k-1])+len(gens[k-1])+4)], gens[k-1])
		}
		notes = append(notes, note)
	}

	// The tree, as a user reads it.
	text, err := exec.Command(bin, "lineage", "--capture-dir", rig.captureDir, res.rolloutID).Output()
	if err != nil {
		t.Fatalf("modelcalls lineage: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(text)), "\n")
	var chain []string
	for _, line := range lines {
		if strings.HasPrefix(line, "* #") {
			chain = append(chain, strings.Join(strings.Fields(line)[:3], " "))
		}
	}
	wantChain := []string{"* #0 root"}
	for k := 1; k < len(ids); k++ {
		wantChain = append(wantChain, fmt.Sprintf("* #%d extends", k))
	}
	if !slices.Equal(chain, wantChain) || !strings.HasPrefix(lines[len(lines)-1], fmt.Sprintf("main chain %d calls; 1 roots, %d extends",
		len(ids), len(ids)-1)) {
		t.Errorf("modelcalls lineage shows\n%s\nwant the chain %q", text, wantChain)
	}

	// The main chain's token rows: every call once, in order, split exactly at the failed edges.
	notes = append(notes, checkSamplesChain(t, filepath.Join(filepath.Dir(rig.captureDir), "samples-tokens.jsonl"), res, ids, failed)...)
	return notes
}

// checkSamplesChain reads the `export samples --format tokens` file checkTokens wrote and checks
// the rollout's rows: together they hold the main chain's calls once each, in order, and a row
// starts anew exactly where an edge's audit failed, naming the audit's position.
func checkSamplesChain(t *testing.T, path string, res *runResult, ids []string, failed []string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("export samples file: %v", err)
	}
	var rows []samples.TokenRow
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r samples.TokenRow
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("samples row: %v", err)
		}
		if r.RolloutID == res.rolloutID {
			rows = append(rows, r)
		}
	}
	var glued, reasons []string
	generated := 0
	for i, r := range rows {
		if r.Segment != i {
			t.Errorf("row %d has segment %d", i, r.Segment)
		}
		glued = append(glued, r.ModelCallIDs...)
		if i > 0 {
			reasons = append(reasons, r.SplitReason)
		}
		for _, m := range r.LossMask {
			generated += int(m)
		}
	}
	if !slices.Equal(glued, ids) {
		t.Errorf("the token rows glue calls %v, want the main chain %v", glued, ids)
	}
	var want []string
	for _, at := range failed {
		want = append(want, "token_prefix_mismatch at "+at)
	}
	if len(rows) != len(failed)+1 || !slices.Equal(reasons, want) {
		t.Errorf("%d token rows split for %q, want %d split for %q (one per failed audit)", len(rows), reasons, len(failed)+1, want)
	}
	return []string{fmt.Sprintf("export samples tokens: main chain of %d calls in %d rows, %d ids under the loss mask, splits %q",
		len(ids), len(rows), generated, reasons)}
}

// answerText is the text of the first choice of a captured Chat response (reassembled when it
// streamed).
func answerText(t *testing.T, response json.RawMessage) string {
	t.Helper()
	var r struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(response, &r); err != nil || len(r.Choices) == 0 {
		t.Fatalf("captured response has no choice: %v: %.300s", err, response)
	}
	return r.Choices[0].Message.Content
}

// detokenize asks llama-server's /detokenize for the text of ids.
func detokenize(t *testing.T, llamaURL string, ids []int64) string {
	t.Helper()
	resp, err := http.Post(llamaURL+"/detokenize", "application/json", strings.NewReader(mustJSON(map[string]any{"tokens": ids})))
	if err != nil {
		t.Fatalf("/detokenize: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Content string `json:"content"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/detokenize answered %d: %v", resp.StatusCode, err)
	}
	return out.Content
}

func eqInt64p(a, b *int64) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }

// checkSFTChain runs `export samples --format sft` on the capture dir: one line, valid by the
// fine-tuning rules, holding the conversation pi had (each prompt, then the model's answer), every
// answer with weight 1: each call's generation trained once, though all answers are the same words.
func checkSFTChain(t *testing.T, bin string, rig *upstreamRig, res *runResult) string {
	t.Helper()
	out := filepath.Join(filepath.Dir(rig.captureDir), "samples-sft.jsonl")
	cmd := exec.Command(bin, "export", "samples", "--capture-dir", rig.captureDir, "--format", "sft", "--out", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if b, err := cmd.Output(); err != nil {
		t.Fatalf("modelcalls export samples --format sft: %v\n%s%s", err, b, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) != 1 {
		t.Fatalf("export samples --format sft wrote %d lines, want 1 (one rollout)", len(lines))
	}
	var line samples.SFTLine
	if err := json.Unmarshal(lines[0], &line); err != nil {
		t.Fatalf("sft line: %v", err)
	}
	if err := samples.ValidateSFT(&line); err != nil {
		t.Errorf("sft line breaks a fine-tuning rule: %v", err)
	}
	var got, want []string
	for i, p := range samplesTurns {
		want = append(want, "user: "+p, fmt.Sprintf("assistant (weight 1): %s", answerText(t, res.records[i].Response)))
	}
	for _, m := range line.Messages {
		if m.Role == "system" {
			continue
		}
		s := m.Role + ": " + derefString(m.Content)
		if m.Weight != nil {
			s = fmt.Sprintf("%s (weight %d): %s", m.Role, *m.Weight, derefString(m.Content))
		}
		got = append(got, s)
	}
	if !slices.Equal(got, want) {
		t.Errorf("sft line holds\n%q\nwant\n%q", got, want)
	}
	return fmt.Sprintf("export samples sft: one line of %d messages, %d answers with weight 1", len(line.Messages), len(samplesTurns))
}

func derefString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
