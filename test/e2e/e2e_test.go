//go:build e2e && unix

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// Environment knobs of the matrix (all optional):
//
//	MODELCALLS_E2E_HARNESSES  comma list of harnesses (claude-code,codex,gemini-cli,opencode,pi,qwen-code); default all
//	MODELCALLS_E2E_UPSTREAMS  comma list of upstreams (scripted,scripted-gzip,scripted-compact,llama,llama-tools,llama-tokens,llama-samples); default all
//	MODELCALLS_E2E_CACHE      cache dir for llama-server and the harnesses (default ~/.cache/modelcalls-e2e)
//	MODELCALLS_E2E_WORKDIR    keep every file of the run here (default: a temp dir, removed)
//	MODELCALLS_E2E_REPORT     also write the summary table (markdown) to this file
//	MODELCALLS_E2E_RACE       non-empty: build modelcalls with -race (its data races fail the proxy's exit)
const (
	envHarnesses = "MODELCALLS_E2E_HARNESSES"
	envUpstreams = "MODELCALLS_E2E_UPSTREAMS"
	envWorkdir   = "MODELCALLS_E2E_WORKDIR"
	envReport    = "MODELCALLS_E2E_REPORT"

	tinyAnswer     = "Hello from a tiny model." // what the tiny GGUF models say
	harnessTimeout = 5 * time.Minute
	proxyName      = "e2e-upstream" // --name: recorded as model_ref.name
)

var allHarnesses = []string{"claude-code", "codex", "gemini-cli", "opencode", "pi", "qwen-code"}

func listEnv(name string, def []string) []string {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// suite is what every upstream's matrix shares.
type suite struct {
	repo      string            // repository root
	work      string            // work dir of this run
	bin       string            // modelcalls binary built from the repo
	harnesses map[string]string // installer name -> executable
	report    *report
}

// TestE2E runs every selected harness through `modelcalls proxy` against every selected
// upstream, then merges the rollouts, and checks the captures against what reached the upstream.
func TestE2E(t *testing.T) {
	start := time.Now()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	work := os.Getenv(envWorkdir)
	if work == "" {
		work = t.TempDir()
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("work dir: %s", work)
	s := &suite{repo: repo, work: work, report: &report{}}

	harnessNames := listEnv(envHarnesses, allHarnesses)
	for _, h := range harnessNames {
		if !slices.Contains(allHarnesses, h) {
			t.Fatalf("%s: unknown harness %q (known: %s)", envHarnesses, h, strings.Join(allHarnesses, ","))
		}
	}
	upstreams := listEnv(envUpstreams, []string{"scripted", "scripted-gzip", "scripted-compact", "llama", "llama-tools", "llama-tokens", "llama-samples"})

	stepStart := time.Now()
	s.bin = buildModelcalls(t, repo, work)
	s.report.step("build modelcalls", time.Since(stepStart))

	stepStart = time.Now()
	s.harnesses = installHarnesses(t, repo, harnessNames)
	s.report.step("install harnesses ("+strings.Join(harnessNames, ",")+")", time.Since(stepStart))

	for _, up := range upstreams {
		switch up {
		case "scripted":
			t.Run("scripted", func(t *testing.T) { s.runScripted(t, "scripted", false) })
		case "scripted-gzip":
			t.Run("scripted-gzip", func(t *testing.T) { s.runScripted(t, "scripted-gzip", true) })
		case "scripted-compact":
			// Claude Code (/compact) and Codex (compacting after a turn) continuing one session
			// under one rollout: real compactions and their lineage.
			t.Run("scripted-compact", s.runScriptedCompact)
		case "llama":
			t.Run("llama", func(t *testing.T) { s.runLlama(t, "llama", "tiny-chatml.gguf", nil, nil) })
		case "llama-tools":
			// The tool model calls exec_command(cmd="cat hello.txt") until a tool result is in
			// the prompt: only Codex offers that tool, so only Codex runs here, for two turns.
			if _, ok := s.harnesses["codex"]; !ok {
				continue
			}
			t.Run("llama-tools", func(t *testing.T) {
				s.runLlama(t, "llama-tools", "tiny-tool-exec_command.gguf", []string{"codex"},
					&ScriptedToolCall{Name: "exec_command", Arguments: map[string]any{"cmd": "cat hello.txt"}})
			})
		case "llama-tokens":
			// pi on Chat under `modelcalls run --upstream ... --tokens llama-server`: the token
			// ids and logprobs of every call, and their export.
			if _, ok := s.harnesses["pi"]; !ok {
				continue
			}
			t.Run("llama-tokens", s.runLlamaTokens)
		case "llama-samples":
			// pi on Chat without tools, three runs continuing one session under one rollout with
			// --tokens llama-server: a real main chain whose calls all carry generated ids, its
			// lineage, token audit and `export samples --format tokens` rows.
			if _, ok := s.harnesses["pi"]; !ok {
				continue
			}
			t.Run("llama-samples", s.runLlamaSamples)
		default:
			t.Fatalf("%s: unknown upstream %q (known: scripted, scripted-gzip, scripted-compact, llama, llama-tools, llama-tokens, llama-samples)",
				envUpstreams, up)
		}
	}
	s.report.step("total", time.Since(start))
	text := s.report.String()
	t.Log("\n" + text)
	if p := os.Getenv(envReport); p != "" {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Errorf("write report: %v", err)
		}
	}
}

// buildModelcalls builds ./cmd/modelcalls and checks it has the commands the matrix needs.
func buildModelcalls(t *testing.T, repo, work string) string {
	t.Helper()
	bin := filepath.Join(work, "bin", "modelcalls")
	args := []string{"build", "-o", bin}
	if os.Getenv("MODELCALLS_E2E_RACE") != "" {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/modelcalls")...)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/modelcalls: %v\n%s", err, out)
	}
	for _, sub := range []string{"proxy", "merge", "calls"} {
		if out, err := exec.Command(bin, sub, "--help").CombinedOutput(); err != nil {
			t.Fatalf("modelcalls %s --help: %v\n%s", sub, err, out)
		}
	}
	return bin
}

// installHarnesses runs scripts/install-harnesses.sh (cached, pinned versions).
func installHarnesses(t *testing.T, repo string, names []string) map[string]string {
	t.Helper()
	cmd := exec.Command(filepath.Join(repo, "scripts", "install-harnesses.sh"), names...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/install-harnesses.sh: %v", err)
	}
	exes := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, exe, ok := strings.Cut(line, " ")
		if ok {
			exes[name] = exe
		}
	}
	for _, n := range names {
		if exes[n] == "" {
			t.Fatalf("install-harnesses.sh printed no command for %s:\n%s", n, out)
		}
	}
	return exes
}

// newNonce returns a fresh "e2e-nonce-<16 hex>".
func newNonce(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "e2e-nonce-" + hex.EncodeToString(b)
}

// upstreamRig is one upstream behind a tap behind a modelcalls proxy.
type upstreamRig struct {
	name       string // "scripted" or "llama"
	bin        string // modelcalls binary
	tap        *Tap
	proxy      *modelcallsProc
	captureDir string
	// upstreamURL is the model server's address (behind the tap): what each harness's own setup
	// names; `modelcalls run` points it at the gateway.
	upstreamURL string
	scripted    *Scripted // nil for llama-server
	// answer is the text the harness must print, given the nonce in its hello.txt.
	answer func(nonce string) string
	// twoTurns: the upstream drives a tool call, so every harness must make at least two calls.
	twoTurns bool
	// gzip: the upstream compresses answers when the client accepts gzip.
	gzip bool
	// only, when set, names the runs this upstream serves.
	only []string
	// dialects, when set, are the dialects this upstream speaks; runs of other dialects are left
	// out (llama-server has no Gemini generateContent endpoint).
	dialects []string
	// toolCall, for a model that calls a tool (llama-tools), is the call it makes on the first
	// turn (CallID not checked: llama-server makes it up).
	toolCall *ScriptedToolCall
	// stopUpstream closes what stands behind the proxy, so a replay is answered from the capture only.
	stopUpstream func()
	// tokens, when set, is the --tokens engine of the runs' gateways (`modelcalls run --tokens`).
	tokens string
}

// runScripted runs the harnesses against the scripted upstream, gzip-compressing its answers
// (as real providers do when the client accepts it) when gz is set.
func (s *suite) runScripted(t *testing.T, name string, gz bool) {
	dir := filepath.Join(s.work, name)
	project := filepath.Join(dir, "project") // FilePath must be known before the server starts
	sc := &Scripted{FilePath: filepath.Join(project, "hello.txt"), Gzip: gz}
	up := capturetest.NewServer(t, sc.ServeHTTP)
	rig := s.newRig(t, name, dir, up.URL)
	stopTap := rig.stopUpstream
	rig.stopUpstream = func() { stopTap(); up.Close() }
	rig.scripted = sc
	rig.gzip = gz
	rig.answer = AnswerForNonce
	rig.twoTurns = true
	s.runMatrix(t, rig, func(run harnessRun) string { return project })
}

// runLlama runs the harnesses (all, or only) against llama-server serving one of the tiny models.
func (s *suite) runLlama(t *testing.T, name, modelFile string, only []string, toolCall *ScriptedToolCall) {
	url, dir := s.llamaServer(t, name, modelFile)
	rig := s.newRig(t, name, dir, url)
	rig.answer = func(string) string { return tinyAnswer }
	rig.only, rig.toolCall, rig.twoTurns = only, toolCall, toolCall != nil
	rig.dialects = []string{DialectChat, DialectResponses, DialectMessages}
	s.runMatrix(t, rig, func(run harnessRun) string {
		p := filepath.Join(dir, "projects", run.name)
		return p
	})
}

// llamaServer builds llama-server (or finds it in the cache) and starts it with one of the tiny
// models, for the upstream name; it returns the server's URL and the upstream's work dir.
func (s *suite) llamaServer(t *testing.T, name, modelFile string) (url, dir string) {
	stepStart := time.Now()
	cmd := exec.Command(filepath.Join(s.repo, "scripts", "build-llama-server.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/build-llama-server.sh: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	server := lines[len(lines)-1]
	s.report.step(name+": llama-server build or cache hit", time.Since(stepStart))

	dir = filepath.Join(s.work, name)
	model := filepath.Join(s.repo, "test", "e2e", "testdata", "models", modelFile)
	stepStart = time.Now()
	url = startLlama(t, server, model, filepath.Join(dir, "llama-server.log"))
	s.report.step(name+": llama-server start", time.Since(stepStart))
	return url, dir
}

func (s *suite) newRig(t *testing.T, name, dir, upstreamURL string) *upstreamRig {
	t.Helper()
	tap, front := tapIn(t, upstreamURL)
	capDir := filepath.Join(dir, "capture")
	p := startProxy(t, s.bin, front.URL, capDir, filepath.Join(dir, "proxy.log"))
	return &upstreamRig{name: name, bin: s.bin, tap: tap, proxy: p, captureDir: capDir, stopUpstream: front.Close, upstreamURL: front.URL}
}

// runMatrix runs every selected harness run through rig, then the probe, merge and shutdown checks.
func (s *suite) runMatrix(t *testing.T, rig *upstreamRig, projectDir func(harnessRun) string) {
	var done []*runResult
	for _, run := range harnessRuns() {
		exe, ok := s.harnesses[run.harness]
		if !ok || (rig.only != nil && !slices.Contains(rig.only, run.name)) ||
			(rig.dialects != nil && !slices.Contains(rig.dialects, run.dialect)) {
			continue
		}
		t.Run(run.name, func(t *testing.T) {
			res := s.runOne(t, rig, run, exe, projectDir(run))
			if res != nil {
				done = append(done, res)
			}
		})
	}
	t.Run("probe", func(t *testing.T) {
		if rig.toolCall != nil {
			t.Skip("the tool model answers a tool-less prompt with tool-call text")
		}
		if res := probe(t, rig); res != nil {
			done = append(done, res)
		}
	})
	t.Run("merge", func(t *testing.T) { checkMerge(t, s.bin, rig, done) })
	t.Run("proxy-shutdown", func(t *testing.T) {
		if err := rig.proxy.stop(); err != nil {
			t.Errorf("proxy did not shut down cleanly on SIGTERM: %v\n%s", err, rig.proxy.logTail())
		}
		log := rig.proxy.log.String()
		if strings.Contains(log, "DATA RACE") || strings.Contains(log, "panic:") {
			t.Errorf("proxy log shows a data race or panic; see %s", filepath.Join(filepath.Dir(rig.captureDir), "proxy.log"))
		}
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				t.Logf("proxy: %s", line)
			}
		}
	})
	t.Run("replay", func(t *testing.T) { s.checkReplay(t, rig, done) })
	for _, r := range done {
		s.report.add(rig.name, r)
	}
}

// runResult is what one run left, for the merge check and the report.
type runResult struct {
	run       string
	dialect   string
	rolloutID string
	records   []record
	passed    []string // non-captured requests seen by the upstream: "HEAD /api/hello 404"
	wall      time.Duration
	output    string
	// For a replay of the run (nil harness for the probe): what ran, where, with which nonce.
	harness                   *harnessRun
	exe, project, home, nonce string
	// calls are the model calls the upstream saw, in order; renders (--tokens llama-server) the
	// gateway's own /apply-template and /tokenize calls.
	calls, renders []TapEntry
	// tokenCaptures holds each captured line's token_capture object by model_call_id (--tokens).
	tokenCaptures map[string]json.RawMessage
}

func (s *suite) runOne(t *testing.T, rig *upstreamRig, run harnessRun, exe, project string) *runResult {
	rolloutID := "e2e-" + rig.name + "-" + run.name
	runDir := filepath.Join(s.work, rig.name, "runs", run.name)
	home := filepath.Join(runDir, "home")
	nonce := newNonce(t)
	writeFile(t, filepath.Join(project, "hello.txt"), nonce+"\n")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	// The harness is set up as its user would set it up for the model server itself, and started
	// through `modelcalls run`, which starts a gateway of its own writing to the rig's capture dir
	// and points the harness at it: by environment variables, or by the harness's own override
	// mechanism (Codex -c, opencode OPENCODE_CONFIG_CONTENT, pi PI_CODING_AGENT_DIR).
	harnessArgs, env := run.command(t, home, run.baseURL(rig.upstreamURL), harnessPrompt)
	args := []string{"run", "--rollout", rolloutID, "--upstream", rig.upstreamURL, "--capture-dir", rig.captureDir, "--name", proxyName}
	if rig.tokens != "" {
		args = append(args, "--tokens", rig.tokens)
	}
	args = append(append(args, "--", exe), harnessArgs...)

	rig.tap.Take() // nothing from an earlier run may count for this one
	if rig.scripted != nil {
		rig.scripted.Take()
	}
	started := time.Now()
	stdout, stderr, err := runProcess(rig.bin, args, env, home, project, harnessTimeout)
	wall := time.Since(started)
	finished := time.Now()
	writeFile(t, filepath.Join(runDir, "stdout"), stdout)
	writeFile(t, filepath.Join(runDir, "stderr"), stderr)
	entries := rig.tap.Take()
	var served []Served
	if rig.scripted != nil {
		served = rig.scripted.Take()
	}
	if err != nil {
		t.Fatalf("%s %s: %v (after %s)\nstdout:\n%s\nstderr (tail):\n%s", run.harness, strings.Join(args, " "), err,
			wall.Round(time.Millisecond), stdout, tail(stderr, 40))
	}
	res := &runResult{run: run.name, dialect: run.dialect, rolloutID: rolloutID, wall: wall, output: stdout,
		harness: &run, exe: exe, project: project, home: home, nonce: nonce}

	// The harness's own output is the model's answer, unchanged.
	if want := rig.answer(nonce); strings.TrimRight(stdout, "\r\n") != want {
		t.Errorf("harness printed %q, want exactly %q\nstderr (tail):\n%s", stdout, want, tail(stderr, 20))
	}

	var calls []TapEntry
	for _, e := range entries {
		if e.Dialect() != "" {
			calls = append(calls, e)
			continue
		}
		if isRender(rig.tokens, e) {
			res.renders = append(res.renders, e)
			continue
		}
		if strings.Contains(e.Path, "ng-rollout") {
			t.Errorf("non-captured %s %s reached the upstream with the rollout prefix", e.Method, e.Path)
		}
		res.passed = append(res.passed, fmt.Sprintf("%s %s -> %d", e.Method, e.Path, e.Status))
	}
	if len(calls) == 0 {
		t.Fatalf("no model call reached the upstream")
	}
	if rig.twoTurns && len(calls) < 2 {
		t.Errorf("%d model calls, want at least 2 (tool call, then answer)", len(calls))
	}

	lines := captureLines(t, rig.captureDir, rolloutID)
	if lines != len(calls) {
		t.Errorf("capture file has %d lines, the upstream answered %d model calls", lines, len(calls))
	}
	checkNoGapFiles(t, rig.captureDir, rolloutID)
	recs := readRecords(t, rig.bin, rig.captureDir, rolloutID)
	res.records, res.calls = recs, calls
	if rig.tokens != "" {
		res.tokenCaptures = readTokenCaptures(t, rig.captureDir, rolloutID)
	}
	if len(recs) != len(calls) {
		t.Fatalf("modelcalls calls: %d records, the upstream answered %d model calls", len(recs), len(calls))
	}
	servedByID := map[string]Served{}
	for _, sv := range served {
		servedByID[sv.ResponseID] = sv
	}
	if rig.scripted != nil {
		toolCalls := 0
		for _, sv := range served {
			if sv.ToolCall != nil {
				toolCalls++
			}
		}
		if toolCalls != 1 {
			t.Errorf("the scripted upstream made %d tool calls in this run, want 1", toolCalls)
		}
	}
	used := map[int]bool{}
	for i, e := range calls {
		if compressed := e.RespHeader.Get("Content-Encoding") == "gzip"; compressed != (rig.gzip && acceptsGzip(e.ReqHeader)) {
			t.Errorf("call %d: answer gzip-compressed %v; upstream compresses %v, harness accepts gzip %v (%q)", i,
				compressed, rig.gzip, acceptsGzip(e.ReqHeader), e.ReqHeader.Get("Accept-Encoding"))
		}
		obs := Observe(e.Dialect(), mustDecode(t, e))
		j := matchRecord(recs, obs, i, used)
		if j < 0 {
			t.Errorf("call %d (%s %s): no record with response_id %v", i, e.Method, e.Path, deref(obs.ResponseID))
			continue
		}
		used[j] = true
		var sv *Served
		if obs.ResponseID != nil {
			if x, ok := servedByID[*obs.ResponseID]; ok {
				sv = &x
			}
		}
		if rig.scripted != nil && sv == nil {
			t.Errorf("call %d: the scripted upstream has no account of response %v", i, deref(obs.ResponseID))
		}
		if res.tokenCaptures != nil {
			// The upstream got the client's request plus what --tokens added; the rest of the
			// record is checked against the client's request.
			e = checkTokenRequest(t, fmt.Sprintf("call %d", i), rig.tokens, recs[j], res.tokenCaptures[recs[j].ModelCallID], e)
		}
		checkRecord(t, fmt.Sprintf("call %d", i), recs[j], e, obs, sv, run.dialect, started, finished)
	}
	if rig.toolCall != nil {
		checkModelToolLoop(t, rig.toolCall, recs, calls, nonce)
	}
	return res
}

// checkModelToolLoop checks a real model's tool loop: the first call's record holds the tool
// call the model made (as llama-server parsed it), the last holds none, and the request after
// the tool call carried the tool's output (the nonce), so the harness really ran it.
func checkModelToolLoop(t *testing.T, want *ScriptedToolCall, recs []record, calls []TapEntry, nonce string) {
	t.Helper()
	wantArgs, _ := json.Marshal(want.Arguments)
	first, last := recs[0], recs[len(recs)-1]
	if len(first.ToolCalls) != 1 || !eqStr(first.ToolCalls[0].Name, &want.Name) ||
		!jsonEqual(first.ToolCalls[0].Arguments, wantArgs) || first.ToolCalls[0].CallID == nil || *first.ToolCalls[0].CallID == "" {
		t.Errorf("first call: tool_calls %s, want one %s(%s) with a call id", mustJSON(first.ToolCalls), want.Name, wantArgs)
	}
	if len(last.ToolCalls) != 0 {
		t.Errorf("last call: tool_calls %s, want none (the answer)", mustJSON(last.ToolCalls))
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(calls[len(calls)-1].ReqBody, &req); err != nil {
		t.Fatalf("last request: %v", err)
	}
	if out, ok := toolResult(calls[len(calls)-1].Dialect(), req); !ok || !strings.Contains(out, nonce) {
		t.Errorf("the request after the tool call carries tool output %q, want it to contain %s", out, nonce)
	}
}

func deref(p *string) string {
	if p == nil {
		return "<none>"
	}
	return *p
}

// matchRecord finds the record for the i-th upstream call: by response id when the upstream
// gave one, else by position.
func matchRecord(recs []record, obs Observed, i int, used map[int]bool) int {
	if obs.ResponseID != nil {
		for j, r := range recs {
			if !used[j] && r.ResponseID != nil && *r.ResponseID == *obs.ResponseID {
				return j
			}
		}
		return -1
	}
	if i < len(recs) && !used[i] {
		return i
	}
	return -1
}

// expectedSessionID applies the gateway's client id rule (docs/format.md section 3.6) to the
// headers the upstream saw (the gateway forwards headers unchanged): the first present of
// x-session-id, x-claude-code-session-id, session-id, session_id; several different values give
// none.
func expectedSessionID(h http.Header) *string {
	for _, name := range []string{"x-session-id", "x-claude-code-session-id", "session-id", "session_id"} {
		vals := h.Values(name)
		if len(vals) == 0 {
			continue
		}
		for _, v := range vals[1:] {
			if v != vals[0] {
				return nil
			}
		}
		return &vals[0]
	}
	return nil
}

// checkRecord compares one captured record with what the upstream saw and said.
func checkRecord(t *testing.T, what string, r record, e TapEntry, obs Observed, sv *Served, dialect string,
	started, finished time.Time) {
	t.Helper()
	errf := func(format string, args ...any) {
		t.Errorf(what+" ("+deref(r.ResponseID)+"): "+format, args...)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(r.ModelCallID) {
		errf("model_call_id %q is not 32 lowercase hex", r.ModelCallID)
	}
	if r.Dialect == nil || *r.Dialect != dialect || e.Dialect() != dialect {
		errf("dialect %v (path %s), want %s", r.Dialect, e.Path, dialect)
	}
	if r.ModelRef == nil || r.ModelRef.Type != "responses_api_models" || r.ModelRef.Name != proxyName {
		errf("model_ref %+v, want {responses_api_models %s}", r.ModelRef, proxyName)
	}
	wantModel := obs.Model
	if wantModel == nil {
		var req struct {
			Model *string `json:"model"`
		}
		_ = json.Unmarshal(e.ReqBody, &req)
		wantModel = req.Model
	}
	if !eqStr(r.Model, wantModel) {
		errf("model %v, upstream said %v", derefAny(r.Model), derefAny(wantModel))
	}
	if r.StatusCode == nil || *r.StatusCode != e.Status {
		errf("status_code %v, upstream answered %d", derefAny(r.StatusCode), e.Status)
	}
	if r.UpstreamStatusCode == nil || *r.UpstreamStatusCode != e.Status || !eqStr(r.ResponseSource, ptr("upstream")) ||
		r.UpstreamAttempted == nil || !*r.UpstreamAttempted {
		errf("provenance source=%v attempted=%v upstream_status=%v, want upstream/true/%d",
			derefAny(r.ResponseSource), derefAny(r.UpstreamAttempted), derefAny(r.UpstreamStatusCode), e.Status)
	}
	if r.ErrorCategory != nil {
		errf("error_category %q on a %d answer", *r.ErrorCategory, e.Status)
	}
	if !eqInt(r.TokensIn, obs.TokensIn) || !eqInt(r.TokensOut, obs.TokensOut) || !eqInt(r.TokensTotal, obs.TokensAll) {
		errf("tokens in/out/total %v/%v/%v, upstream reported %v/%v/%v", derefAny(r.TokensIn), derefAny(r.TokensOut),
			derefAny(r.TokensTotal), derefAny(obs.TokensIn), derefAny(obs.TokensOut), derefAny(obs.TokensAll))
	}
	if r.TokensIn == nil || r.TokensOut == nil {
		errf("tokens unknown (in %v, out %v): the upstream reported usage", derefAny(r.TokensIn), derefAny(r.TokensOut))
	}
	if !eqInt(r.CachedTokens, obs.Cached) {
		errf("cached_tokens %v, upstream reported %v", derefAny(r.CachedTokens), derefAny(obs.Cached))
	}
	if r.LatencyTotalMS == nil || *r.LatencyTotalMS <= 0 {
		errf("latency_total_ms %v, want > 0", derefAny(r.LatencyTotalMS))
	}
	if r.LatencyTTFTMS == nil || *r.LatencyTTFTMS <= 0 || (r.LatencyTotalMS != nil && *r.LatencyTTFTMS > *r.LatencyTotalMS) {
		errf("latency_ttft_ms %v, want 0 < ttft <= latency %v", derefAny(r.LatencyTTFTMS), derefAny(r.LatencyTotalMS))
	}
	slack := 2.0 // seconds: clocks are the same, this is only rounding and process start
	if r.StartedAt == nil || r.CompletedAt == nil || *r.StartedAt < float64(started.UnixNano())/1e9-slack ||
		*r.CompletedAt > float64(finished.UnixNano())/1e9+slack || *r.CompletedAt < *r.StartedAt {
		errf("started_at %v completed_at %v outside the harness run [%v, %v]", derefAny(r.StartedAt), derefAny(r.CompletedAt),
			started.Unix(), finished.Unix())
	}
	if want := expectedSessionID(e.ReqHeader); !eqStr(r.ClientSessionID, want) {
		errf("client_session_id %v, the harness sent %v", derefAny(r.ClientSessionID), derefAny(want))
	}
	if !jsonEqual(r.Request, e.ReqBody) {
		errf("captured request differs from the body the upstream received")
	}
	if len(r.Response) == 0 || string(r.Response) == "null" {
		errf("response not captured")
	}
	if r.FinishReason == nil && dialect != DialectResponses {
		errf("finish_reason null")
	}
	if dialect == DialectResponses && !eqStr(r.ResponseStatus, ptr("completed")) {
		errf("response_status %v, want completed", derefAny(r.ResponseStatus))
	}
	if sv == nil {
		return
	}
	// The scripted upstream's own account: tool call, reasoning.
	if sv.ToolCall == nil {
		if len(r.ToolCalls) != 0 {
			errf("tool_calls %s on a text answer", mustJSON(r.ToolCalls))
		}
	} else {
		wantArgs, _ := json.Marshal(sv.ToolCall.Arguments)
		if len(r.ToolCalls) != 1 || !eqStr(r.ToolCalls[0].CallID, &sv.ToolCall.CallID) ||
			!eqStr(r.ToolCalls[0].Name, &sv.ToolCall.Name) || !jsonEqual(r.ToolCalls[0].Arguments, wantArgs) {
			errf("tool_calls %s, upstream called %s(%s) id %s", mustJSON(r.ToolCalls), sv.ToolCall.Name, wantArgs,
				sv.ToolCall.CallID)
		}
	}
	var wantReasoning *string
	if sv.Reasoning != "" {
		wantReasoning = &sv.Reasoning
	}
	if !eqStr(r.ReasoningContent, wantReasoning) {
		errf("reasoning_content %v, upstream sent %v", derefAny(r.ReasoningContent), derefAny(wantReasoning))
	}
	wantFinish := map[string][2]string{DialectChat: {"tool_calls", "stop"}, DialectMessages: {"tool_use", "end_turn"},
		DialectGemini: {"STOP", "STOP"}}
	if w, ok := wantFinish[dialect]; ok {
		f := w[1]
		if sv.ToolCall != nil {
			f = w[0]
		}
		if !eqStr(r.FinishReason, &f) {
			errf("finish_reason %v, want %s", derefAny(r.FinishReason), f)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func eqStr(a, b *string) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }
func eqInt(a, b *int) bool    { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }

func derefAny[T any](p *T) any {
	if p == nil {
		return "null"
	}
	return *p
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return mustJSON(x) == mustJSON(y)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// record is a ModelCallRecord as `modelcalls calls --json --include-payloads` prints it (the
// seed's JSON field names), read black-box.
type record struct {
	ModelCallID string  `json:"model_call_id"`
	ResponseID  *string `json:"response_id"`
	CallIndex   int     `json:"call_index"`
	ModelRef    *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"model_ref"`
	Model               *string         `json:"model"`
	Dialect             *string         `json:"dialect"`
	StatusCode          *int            `json:"status_code"`
	ResponseStatus      *string         `json:"response_status"`
	FinishReason        *string         `json:"finish_reason"`
	StartedAt           *float64        `json:"started_at"`
	CompletedAt         *float64        `json:"completed_at"`
	TokensIn            *int            `json:"tokens_in"`
	TokensOut           *int            `json:"tokens_out"`
	TokensReasoning     *int            `json:"tokens_reasoning"`
	TokensTotal         *int            `json:"tokens_total"`
	Request             json.RawMessage `json:"request"`
	Response            json.RawMessage `json:"response"`
	ToolCalls           []toolCall      `json:"tool_calls"`
	ReasoningContent    *string         `json:"reasoning_content"`
	CacheHit            *bool           `json:"cache_hit"`
	CachedTokens        *int            `json:"cached_tokens"`
	ErrorCategory       *string         `json:"error_category"`
	LatencyTotalMS      *float64        `json:"latency_total_ms"`
	LatencyTTFTMS       *float64        `json:"latency_ttft_ms"`
	ResponseSource      *string         `json:"response_source"`
	UpstreamAttempted   *bool           `json:"upstream_attempted"`
	UpstreamStatusCode  *int            `json:"upstream_status_code"`
	LocalResponseReason *string         `json:"local_response_reason"`
	ClientSessionID     *string         `json:"client_session_id"`
}

type toolCall struct {
	CallID    *string         `json:"call_id"`
	Name      *string         `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// readRecords runs `modelcalls calls DIR ID --json --include-payloads` (one record per line).
func readRecords(t *testing.T, bin, dir, id string) []record {
	t.Helper()
	cmd := exec.Command(bin, "calls", dir, id, "--json", "--include-payloads")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("modelcalls calls %s %s --json: %v\n%s", dir, id, err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("modelcalls calls wrote to stderr: %s", stderr.String())
	}
	var recs []record
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var r record
		if err := dec.Decode(&r); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("modelcalls calls --json output: %v\n%s", err, out)
		}
		recs = append(recs, r)
	}
	for i, r := range recs {
		if r.CallIndex != i {
			t.Errorf("record %d has call_index %d", i, r.CallIndex)
		}
	}
	return recs
}

// captureLines counts the non-blank lines of <dir>/<id>.capture.jsonl.
func captureLines(t *testing.T, dir, id string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, id+".capture.jsonl"))
	if err != nil {
		t.Fatalf("capture file: %v", err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("capture file does not end with a newline")
	}
	n := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 {
			n++
		}
	}
	return n
}

// checkNoGapFiles: no incomplete marker, no outstanding claim once the harness has exited.
func checkNoGapFiles(t *testing.T, dir, id string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, id+".capture.incomplete")); err == nil {
		t.Errorf("%s.capture.incomplete exists: a capture write failed", id)
	}
	store, err := capture.OpenExisting(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := store.Claims(id); err != nil || c.Live+c.Stale > 0 {
		t.Errorf("claims still outstanding after the harness exited: %+v %v", c, err)
	}
}

// runProcess runs exe in its own process group with a minimal environment (PATH, HOME, locale
// and the run's variables: nothing of the caller's credentials), and kills the whole group
// when it exits or the timeout passes, so helpers a harness leaves behind do not outlive it.
func runProcess(exe string, args, env []string, home, dir string, timeout time.Duration) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"LANG=C.UTF-8",
		"TERM=dumb",
		"NO_COLOR=1",
		"CI=true",
	}, env...)
	cmd.Stdin = nil // /dev/null: every harness runs non-interactively
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftovers of the group; ESRCH when none
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s: %w", timeout, err)
	}
	return stdout.String(), stderr.String(), err
}

// startLlama starts llama-server on 127.0.0.1 with model and waits until /health answers 200.
func startLlama(t *testing.T, server, model, logPath string) string {
	t.Helper()
	port := capturetest.FreePort(t)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(server, "-m", model, "--host", "127.0.0.1", "--port", fmt.Sprint(port),
		"--jinja", "--offline", "--no-webui", "-c", "262144")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start llama-server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		logf.Close()
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("llama-server exited before it was ready: %v\n%s", err, tail(string(b), 30))
		default:
		}
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("llama-server not ready after 60s\n%s", tail(string(b), 30))
		}
		time.Sleep(100 * time.Millisecond) // polling an external process's readiness: nothing to wait on
	}
}

// modelcallsProc is a running modelcalls command (proxy or replay) started by startModelcalls.
type modelcallsProc struct {
	cmd     *exec.Cmd
	base    string // http://127.0.0.1:PORT: where the command serves, from its listening line
	admin   string // http://127.0.0.1:PORT of its admin listener; "" when its log named none
	exited  chan error
	logDone chan struct{} // closed when the log pipe reached EOF
	once    sync.Once
	err     error

	log    capturetest.Buffer // every log line, in order
	stdout capturetest.Buffer // stdout, when started with stdoutApart
}

func (p *modelcallsProc) logTail() string { return tail(p.log.String(), 30) }

// errStillRunning is what stop returns for a command it had to kill.
var errStillRunning = errors.New("still running 60s after SIGTERM")

// stop sends SIGTERM (once: graceful drain) and returns the exit status once the last log line is
// in p.log; a command still running 60 s later is killed and reported as errStillRunning.
func (p *modelcallsProc) stop() error {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case p.err = <-p.exited:
		case <-time.After(60 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
			p.err = errStillRunning
		}
		<-p.logDone
	})
	return p.err
}

// modelcallsRun is what startModelcalls runs and what it waits for.
type modelcallsRun struct {
	args    []string // the subcommand and its flags
	env     []string // KEY=VALUE added to the test's environment
	logPath string   // the log is also written here, line by line; "" for no file
	// stdoutApart keeps stdout in p.stdout; otherwise it is interleaved with stderr in the log.
	stdoutApart bool
	// listening reads one log line: base is the URL the command serves on if the line announces
	// it ("" otherwise), admin an admin listener's URL the line names ("" otherwise). Lines after
	// the first with a base are not read.
	listening func(line string) (base, admin string)
}

// startModelcalls starts `bin run.args...` and copies its log (stderr, and stdout unless
// run.stdoutApart) line by line into p.log and run.logPath. It returns once run.listening has read
// a base URL from a line, with p.base and the last admin URL named up to that line in p.admin;
// it fails the test, showing the log, if the command exits first or logs no such line in 30 s.
// At cleanup the command is stopped as by p.stop (SIGTERM, killed after 60 s) unless the test
// stopped it; its exit status is not checked there: the callers of p.stop check it.
func startModelcalls(t *testing.T, bin string, run modelcallsRun) *modelcallsProc {
	t.Helper()
	name := "modelcalls " + run.args[0]
	if run.logPath != "" {
		if err := os.MkdirAll(filepath.Dir(run.logPath), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, run.args...)
	if run.env != nil {
		cmd.Env = append(os.Environ(), run.env...)
	}
	p := &modelcallsProc{cmd: cmd, exited: make(chan error, 1), logDone: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if run.stdoutApart {
		cmd.Stdout = &p.stdout
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { err := cmd.Wait(); pw.Close(); p.exited <- err }()
	found := make(chan [2]string, 1) // base, admin
	go func() {
		defer close(p.logDone)
		var logf *os.File
		if run.logPath != "" {
			logf, _ = os.Create(run.logPath)
		}
		if logf != nil {
			defer logf.Close()
		}
		waiting, admin := true, ""
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Text()
			p.log.Write([]byte(line + "\n"))
			if logf != nil {
				fmt.Fprintln(logf, line)
			}
			if !waiting {
				continue
			}
			base, a := run.listening(line)
			if a != "" {
				admin = a
			}
			if base != "" {
				found <- [2]string{base, admin}
				waiting = false
			}
		}
	}()
	t.Cleanup(func() { _ = p.stop() })
	select {
	case addrs := <-found:
		p.base, p.admin = addrs[0], addrs[1]
		return p
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("%s exited at start: %v\n%s", name, err, p.log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s logged no listening address in 30s:\n%s", name, p.log.String())
	}
	return nil
}

var listenAddrRE = regexp.MustCompile(`127\.0\.0\.1:([0-9]+)`)

// startProxy starts `modelcalls proxy --upstream URL --capture-dir DIR --listen 127.0.0.1:0
// --name NAME` and reads its listening address from the first log line naming one (other than
// the upstream's); the log is also written to logPath.
func startProxy(t *testing.T, bin, upstream, capDir, logPath string, extra ...string) *modelcallsProc {
	t.Helper()
	upstreamPort := upstream[strings.LastIndex(upstream, ":")+1:]
	return startModelcalls(t, bin, modelcallsRun{
		args: append([]string{"proxy", "--upstream", upstream, "--capture-dir", capDir,
			"--listen", "127.0.0.1:0", "--name", proxyName}, extra...),
		logPath: logPath,
		listening: func(line string) (string, string) {
			for _, m := range listenAddrRE.FindAllStringSubmatch(line, -1) {
				if m[1] != upstreamPort && m[1] != "0" {
					return "http://" + m[0], ""
				}
			}
			return "", ""
		},
	})
}

// probe sends one JSON and one streaming Chat call through the proxy directly, and checks the
// x-nemo-gym-model-call-id response header names the captured line.
func probe(t *testing.T, rig *upstreamRig) *runResult {
	id := "e2e-" + rig.name + "-probe"
	rig.tap.Take()
	if rig.scripted != nil {
		rig.scripted.Take()
	}
	started := time.Now()
	var headerIDs []string
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"e2e-model","messages":[{"role":"user","content":"Say hello"}],"stream":%v%s}`,
			stream, map[bool]string{true: `,"stream_options":{"include_usage":true}`}[stream])
		req, _ := http.NewRequest(http.MethodPost, rig.proxy.base+"/ng-rollout/"+id+"/v1/chat/completions",
			strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Session-Id", "probe-session")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("probe stream=%v: status %d: %s", stream, resp.StatusCode, b)
		}
		hid := resp.Header.Get("X-Nemo-Gym-Model-Call-Id")
		if hid == "" {
			t.Errorf("probe stream=%v: no x-nemo-gym-model-call-id header", stream)
		}
		headerIDs = append(headerIDs, hid)
		want := tinyAnswer
		if rig.scripted != nil {
			want = PlainAnswer
		}
		if !stream && !bytes.Contains(b, []byte(want)) {
			t.Errorf("probe: JSON body does not carry %q: %s", want, b)
		}
	}
	// Calls that are not model calls pass through, prefix stripped, uncaptured, unchanged.
	type passed struct {
		method, path string
		status       int
		body         []byte
	}
	var through []passed
	for _, pt := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/messages/count_tokens", `{"model":"e2e-model","messages":[{"role":"user","content":"Say hello"}]}`},
		{http.MethodGet, "/v1/models", ""},
	} {
		req, _ := http.NewRequest(pt.method, rig.proxy.base+"/ng-rollout/"+id+pt.path, strings.NewReader(pt.body))
		if pt.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("probe %s %s: %v", pt.method, pt.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Header.Get("X-Nemo-Gym-Model-Call-Id") != "" {
			t.Errorf("probe %s %s: answered with x-nemo-gym-model-call-id: it was captured", pt.method, pt.path)
		}
		through = append(through, passed{pt.method, pt.path, resp.StatusCode, b})
	}
	finished := time.Now()
	entries := rig.tap.Take()
	var served []Served
	if rig.scripted != nil {
		served = rig.scripted.Take()
	}
	if len(entries) != 2+len(through) {
		t.Fatalf("probe: the upstream saw %d requests, want %d", len(entries), 2+len(through))
	}
	for i, pt := range through {
		e := entries[2+i]
		if e.Method != pt.method || e.Path != pt.path || e.Status != pt.status || !bytes.Equal(e.RespBody, pt.body) {
			t.Errorf("probe %s %s: upstream saw %s %s -> %d; client got %d, same body %v", pt.method, pt.path, e.Method,
				e.Path, e.Status, pt.status, bytes.Equal(e.RespBody, pt.body))
		}
	}
	entries = entries[:2]
	recs := readRecords(t, rig.bin, rig.captureDir, id)
	if len(recs) != 2 {
		t.Fatalf("probe: %d records, want 2 (the pass-through calls must not be captured)", len(recs))
	}
	for i, r := range recs {
		if r.ModelCallID != headerIDs[i] {
			t.Errorf("probe call %d: x-nemo-gym-model-call-id %q, captured model_call_id %q", i, headerIDs[i], r.ModelCallID)
		}
		var sv *Served
		if i < len(served) {
			sv = &served[i]
		}
		checkRecord(t, fmt.Sprintf("probe call %d", i), r, entries[i], Observe(DialectChat, mustDecode(t, entries[i])), sv,
			DialectChat, started, finished)
		if !eqStr(r.ClientSessionID, ptr("probe-session")) {
			t.Errorf("probe call %d: client_session_id %v, want probe-session", i, derefAny(r.ClientSessionID))
		}
	}
	return &runResult{run: "probe", dialect: DialectChat, rolloutID: id, wall: finished.Sub(started), records: recs}
}

// checkMerge writes a rollouts file naming every run's rollout id (plus a row that is not a
// rollout), runs `modelcalls merge`, and checks each merged record: other fields byte-identical,
// ng_model_call_capture with the run's calls, metrics that sum them, and no gaps.
func checkMerge(t *testing.T, bin string, rig *upstreamRig, runs []*runResult) {
	if len(runs) == 0 {
		t.Skip("no run finished")
	}
	dir := filepath.Dir(rig.captureDir)
	var in bytes.Buffer
	var lines []string
	for _, r := range runs {
		// "2.50" and the key order must come out byte-identical.
		line := fmt.Sprintf(`{"_ng_rollout_id":"%s","harness":"%s","reward":2.50,"extra":{"b":[1,"x"],"a":null}}`,
			r.rolloutID, r.run)
		lines = append(lines, line)
		in.WriteString(line + "\n")
	}
	const notRollout = `{"note":"not a rollout row"}`
	lines = append(lines, notRollout)
	in.WriteString(notRollout + "\n")
	inPath := filepath.Join(dir, "rollouts.jsonl")
	writeFile(t, inPath, in.String())

	cmd := exec.Command(bin, "merge", "--capture-dir", rig.captureDir, "--in", inPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	writeFile(t, filepath.Join(dir, "merged.jsonl"), string(out))
	if err != nil {
		t.Fatalf("modelcalls merge: %v\n%s", err, stderr.String())
	}
	got := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(got) != len(lines) {
		t.Fatalf("merge wrote %d lines for %d input lines", len(got), len(lines))
	}
	if got[len(got)-1] != notRollout {
		t.Errorf("a row without rollout fields changed: %s", got[len(got)-1])
	}
	for i, r := range runs {
		prefix := strings.TrimSuffix(lines[i], "}") + `,"ng_model_call_capture":`
		if !strings.HasPrefix(got[i], prefix) || !strings.HasSuffix(got[i], "}") {
			t.Errorf("%s: merged line does not keep the record's bytes and append ng_model_call_capture last:\n%.300s",
				r.rolloutID, got[i])
			continue
		}
		var merged struct {
			Capture struct {
				RolloutID string `json:"rollout_id"`
				Metrics   struct {
					NumCalls       int      `json:"num_calls"`
					TokensIn       *int     `json:"tokens_in"`
					TokensOut      *int     `json:"tokens_out"`
					TokensTotal    *int     `json:"tokens_total"`
					CachedTokens   *int     `json:"cached_tokens"`
					LatencyTotalMS *float64 `json:"latency_total_ms"`
				} `json:"metrics"`
				Calls []map[string]json.RawMessage `json:"calls"`
				Gaps  []map[string]any             `json:"gaps"`
			} `json:"ng_model_call_capture"`
		}
		if err := json.Unmarshal([]byte(got[i]), &merged); err != nil {
			t.Errorf("%s: merged line: %v", r.rolloutID, err)
			continue
		}
		c := merged.Capture
		if c.RolloutID != r.rolloutID {
			t.Errorf("%s: rollout_id %q", r.rolloutID, c.RolloutID)
		}
		if len(c.Gaps) != 0 {
			t.Errorf("%s: unexpected gaps %v", r.rolloutID, c.Gaps)
		}
		if len(c.Calls) != len(r.records) || c.Metrics.NumCalls != len(r.records) {
			t.Errorf("%s: %d calls, num_calls %d; the capture has %d", r.rolloutID, len(c.Calls), c.Metrics.NumCalls,
				len(r.records))
			continue
		}
		sumIn, sumOut, sumTotal := 0, 0, 0
		for j, call := range c.Calls {
			var mcid string
			_ = json.Unmarshal(call["model_call_id"], &mcid)
			if mcid != r.records[j].ModelCallID {
				t.Errorf("%s: call %d model_call_id %s, capture has %s", r.rolloutID, j, mcid, r.records[j].ModelCallID)
			}
			if _, ok := call["request"]; ok {
				t.Errorf("%s: call %d carries request without --include-payloads", r.rolloutID, j)
			}
			sumIn += *r.records[j].TokensIn
			sumOut += *r.records[j].TokensOut
			sumTotal += *r.records[j].TokensTotal
		}
		if !eqInt(c.Metrics.TokensIn, &sumIn) || !eqInt(c.Metrics.TokensOut, &sumOut) || !eqInt(c.Metrics.TokensTotal, &sumTotal) {
			t.Errorf("%s: metrics tokens %v/%v/%v, calls sum to %d/%d/%d", r.rolloutID, derefAny(c.Metrics.TokensIn),
				derefAny(c.Metrics.TokensOut), derefAny(c.Metrics.TokensTotal), sumIn, sumOut, sumTotal)
		}
	}
}

// report collects the summary table of a matrix run.
type report struct {
	mu    sync.Mutex
	steps []string
	rows  []string
	notes []string // free lines after the tables (token counts and findings)
}

func (r *report) note(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, line)
}

func (r *report) step(name string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, fmt.Sprintf("| %s | %.1f s |", name, d.Seconds()))
}

func (r *report) add(upstream string, res *runResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ins, outs, ttfts []string
	for _, rec := range res.records {
		ins = append(ins, fmt.Sprint(derefAny(rec.TokensIn)))
		outs = append(outs, fmt.Sprint(derefAny(rec.TokensOut)))
		ttfts = append(ttfts, fmt.Sprintf("%v/%v", derefAny(rec.LatencyTTFTMS), derefAny(rec.LatencyTotalMS)))
	}
	passed := strings.Join(res.passed, "; ")
	if passed == "" {
		passed = "-"
	}
	r.rows = append(r.rows, fmt.Sprintf("| %s | %s | %s | %d | %s | %s | %s | %.1f s | %s |", upstream, res.run, res.dialect,
		len(res.records), strings.Join(ins, ", "), strings.Join(outs, ", "), strings.Join(ttfts, ", "),
		res.wall.Seconds(), passed))
}

func (r *report) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	b.WriteString("| upstream | run | dialect | calls captured | tokens in | tokens out | TTFT/latency ms | harness wall | passed through uncaptured |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, row := range r.rows {
		b.WriteString(row + "\n")
	}
	b.WriteString("\n| step | time |\n|---|---|\n")
	for _, s := range r.steps {
		b.WriteString(s + "\n")
	}
	if len(r.notes) > 0 {
		b.WriteString("\n")
		for _, n := range r.notes {
			b.WriteString("- " + n + "\n")
		}
	}
	return b.String()
}

func mustDecode(t *testing.T, e TapEntry) []byte {
	t.Helper()
	b, err := e.DecodedBody()
	if err != nil {
		t.Fatalf("%s %s: %v", e.Method, e.Path, err)
	}
	return b
}
