//go:build e2e && unix

package e2e

import (
	"bufio"
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

	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/internal/capturetest/jsonmember"
	"github.com/modelcalls/modelcalls/samples"
	"github.com/modelcalls/modelcalls/tokens/tokenexport"
)

// isRender reports whether e is one of the calls a gateway with --tokens llama-server makes to
// llama-server itself for a call's prompt ids.
func isRender(engine string, e TapEntry) bool {
	return engine == "llama-server" && e.Method == http.MethodPost && (e.Path == "/apply-template" || e.Path == "/tokenize")
}

// runLlamaTokens runs pi on Chat under `modelcalls run --upstream <llama-server> --tokens
// llama-server` with the chatml model, with the checks of every run, then checks each call's
// token ids and logprobs against what llama-server sent, exports them as JSONL and Parquet, reads
// the Parquet file back with DuckDB, and merges.
func (s *suite) runLlamaTokens(t *testing.T) {
	const name = "llama-tokens"
	url, dir := s.llamaServer(t, name, "tiny-chatml.gguf")
	tap, front := tapIn(t, url)
	capDir := filepath.Join(dir, "capture")
	rig := &upstreamRig{name: name, bin: s.bin, tap: tap, captureDir: capDir, stopUpstream: front.Close,
		upstreamURL: front.URL, answer: func(string) string { return tinyAnswer }, tokens: "llama-server"}
	var done []*runResult
	for _, run := range harnessRuns() {
		exe, ok := s.harnesses[run.harness]
		if !ok || run.name != "pi-chat" { // --tokens asks on Chat only
			continue
		}
		t.Run(run.name, func(t *testing.T) {
			res := s.runOne(t, rig, run, exe, filepath.Join(dir, "projects", run.name))
			checkRunLog(t, res)
			done = append(done, res)
		})
	}
	t.Run("probe", func(t *testing.T) {
		if res := tokensProbe(t, rig, filepath.Join(dir, "proxy.log")); res != nil {
			done = append(done, res)
		}
	})
	t.Run("probe-completions", func(t *testing.T) {
		if res := completionsProbe(t, rig, filepath.Join(dir, "proxy-completions.log")); res != nil {
			done = append(done, res)
		}
	})
	t.Run("tokens", func(t *testing.T) {
		for _, line := range checkTokens(t, s.bin, rig, done) {
			s.report.note(name + ": " + line)
		}
	})
	t.Run("merge", func(t *testing.T) { checkMerge(t, s.bin, rig, done) })
	for _, r := range done {
		s.report.add(name, r)
	}
}

// checkRunLog checks that run's gateway logged no panic or data race, and shows what it warned of.
func checkRunLog(t *testing.T, res *runResult) {
	t.Helper()
	stderr, _ := os.ReadFile(filepath.Join(filepath.Dir(res.home), "stderr"))
	if bytes.Contains(stderr, []byte("panic:")) || bytes.Contains(stderr, []byte("DATA RACE")) {
		t.Errorf("run's gateway logged a panic or data race:\n%s", tail(string(stderr), 40))
	}
	for _, line := range strings.Split(string(stderr), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Logf("run: %s", line)
		}
	}
}

// tokenCaptureLine is a capture line's token_capture object.
type tokenCaptureLine struct {
	Engine           string          `json:"engine"`
	Added            json.RawMessage `json:"added"`
	NotAsked         string          `json:"not_asked"`
	PromptTokenIDs   []int64         `json:"prompt_token_ids"`
	PromptTokenError string          `json:"prompt_token_error"`
}

// readTokenCaptures reads <dir>/<id>.capture.jsonl and returns each line's token_capture object
// by model_call_id (absent for a line without one).
func readTokenCaptures(t *testing.T, dir, id string) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, id+".capture.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var l struct {
			ModelCallID  string          `json:"model_call_id"`
			TokenCapture json.RawMessage `json:"token_capture"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("capture line: %v", err)
		}
		if l.TokenCapture != nil {
			out[l.ModelCallID] = l.TokenCapture
		}
	}
	return out
}

// tokenRequestFields are the members --tokens adds for each engine and dialect, in the order it
// appends them; a client member named by one of aliases counts as the member set.
var tokenRequestFields = map[string]map[string][]struct {
	key, value string
	aliases    []string
}{
	"llama-server": {
		DialectChat:        {{"logprobs", "true", nil}, {"top_logprobs", "1", nil}},
		DialectCompletions: {{"logprobs", "1", []string{"n_probs"}}}, // llama-server's n_probs
	},
}

// checkTokenRequest checks the request the upstream received against the captured one: the
// client's members, in order and unchanged, then the members --tokens adds that the client did
// not set, as the line's token_capture.added records them. It returns e with the client's
// request as its body, for the checks of every record.
func checkTokenRequest(t *testing.T, what, engine string, r record, tcRaw json.RawMessage, e TapEntry) TapEntry {
	t.Helper()
	errf := func(format string, args ...any) { t.Errorf(what+": "+format, args...) }
	var tc tokenCaptureLine
	if tcRaw == nil || json.Unmarshal(tcRaw, &tc) != nil {
		errf("capture line has no token_capture object: %s", tcRaw)
		return e
	}
	if tc.Engine != engine {
		errf("token_capture.engine %q, want %q", tc.Engine, engine)
	}
	client := jsonmember.Members(t, r.Request)
	sent := jsonmember.Members(t, e.ReqBody)
	wantAdded := map[string]json.RawMessage{}
	var wantKeys []string
	for _, m := range client {
		wantKeys = append(wantKeys, m.Key)
	}
	refused := refusesLogprobs(engine, r)
	if wantNot := map[bool]string{true: "stream_with_tools"}[refused]; tc.NotAsked != wantNot {
		errf("token_capture.not_asked %q, want %q", tc.NotAsked, wantNot)
	}
	for _, f := range tokenRequestFields[engine][deref(r.Dialect)] {
		if refused {
			break // the server would answer 400: nothing is added
		}
		set := false
		for _, k := range append([]string{f.key}, f.aliases...) {
			_, ok := jsonmember.Last(client, k)
			set = set || ok
		}
		if !set {
			wantAdded[f.key] = json.RawMessage(f.value)
			wantKeys = append(wantKeys, f.key)
		}
	}
	if !jsonEqual(tc.Added, []byte(mustJSON(wantAdded))) {
		errf("token_capture.added %s, want %s", tc.Added, mustJSON(wantAdded))
	}
	if got := jsonmember.Keys(sent); !slices.Equal(got, wantKeys) {
		errf("the upstream received members %v, want the client's then the added ones: %v", got, wantKeys)
	} else {
		for i, m := range sent {
			want := wantAdded[m.Key]
			if i < len(client) {
				want = r.Request[client[i].ValueStart:client[i].ValueEnd]
			}
			if !jsonEqual(e.ReqBody[m.ValueStart:m.ValueEnd], want) {
				errf("member %s reached the upstream as %s, want %s", m.Key, e.ReqBody[m.ValueStart:m.ValueEnd], want)
			}
		}
	}
	e.ReqBody = r.Request
	return e
}

// refusesLogprobs reports whether engine refuses logprobs on the request of r: llama-server
// answers a streamed Chat call with tools and logprobs with 400 "logprobs is not supported with
// tools + stream".
func refusesLogprobs(engine string, r record) bool {
	var req struct {
		Stream bool              `json:"stream"`
		Tools  []json.RawMessage `json:"tools"`
	}
	return engine == "llama-server" && deref(r.Dialect) == DialectChat && json.Unmarshal(r.Request, &req) == nil &&
		req.Stream && len(req.Tools) > 0
}

// logprobEntry is one llama-server logprob entry of a generated token, as the tap saw it.
type logprobEntry struct {
	ID      int64   `json:"id"`
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
}

// sentLogprobs reads the first choice's logprob entries from a Chat response body as
// llama-server sent it (a JSON object, or SSE chunks each carrying its tokens' entries),
// independently of package tokens; streamed reports the SSE case.
func sentLogprobs(t *testing.T, body []byte) (entries []logprobEntry, streamed bool) {
	t.Helper()
	type chunk struct {
		Choices []struct {
			Index    int `json:"index"`
			Logprobs *struct {
				Content []logprobEntry `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	add := func(c chunk) {
		for _, ch := range c.Choices {
			if ch.Index == 0 && ch.Logprobs != nil {
				entries = append(entries, ch.Logprobs.Content...)
			}
		}
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var c chunk
		if err := json.Unmarshal(trimmed, &c); err != nil {
			t.Fatalf("response: %v", err)
		}
		add(c)
		return entries, false
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(strings.TrimRight(sc.Text(), "\r"), "data:")
		if !ok || strings.TrimSpace(data) == "[DONE]" {
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("SSE event %q: %v", data, err)
		}
		add(c)
	}
	return entries, true
}

// renderedPrompt finds the gateway's /apply-template call for a Chat request among renders, then
// the /tokenize call of the prompt it returned, and returns the ids /tokenize answered. For a
// Completions request, the /tokenize call of its prompt (a text has no template).
func renderedPrompt(t *testing.T, renders []TapEntry, dialect string, request []byte) ([]int64, error) {
	t.Helper()
	if dialect == DialectCompletions {
		var req struct {
			Prompt json.RawMessage `json:"prompt"`
		}
		if err := json.Unmarshal(request, &req); err != nil {
			return nil, err
		}
		p := req.Prompt
		var one []json.RawMessage // a list of one prompt is that prompt
		if json.Unmarshal(p, &one) == nil && len(one) == 1 {
			p = one[0]
		}
		return tokenized(renders, p)
	}
	for _, a := range renders {
		if a.Path != "/apply-template" || !jsonEqual(a.ReqBody, request) {
			continue
		}
		if a.Status != http.StatusOK {
			return nil, fmt.Errorf("/apply-template answered %d: %s", a.Status, a.RespBody)
		}
		var tmpl struct{ Prompt string }
		if err := json.Unmarshal(a.RespBody, &tmpl); err != nil {
			return nil, fmt.Errorf("/apply-template: %v", err)
		}
		return tokenized(renders, []byte(mustJSON(tmpl.Prompt)))
	}
	return nil, fmt.Errorf("no /apply-template call with the client's request (%d render calls)", len(renders))
}

// tokenized finds the /tokenize call among renders whose content is prompt (a JSON value) and
// returns the ids it answered; the call must add and parse special tokens, as llama-server's
// chat and completion endpoints tokenize.
func tokenized(renders []TapEntry, prompt []byte) ([]int64, error) {
	for _, tk := range renders {
		var req struct {
			Content      json.RawMessage `json:"content"`
			AddSpecial   bool            `json:"add_special"`
			ParseSpecial bool            `json:"parse_special"`
		}
		if tk.Path != "/tokenize" || json.Unmarshal(tk.ReqBody, &req) != nil || !jsonEqual(req.Content, prompt) {
			continue
		}
		if !req.AddSpecial || !req.ParseSpecial {
			return nil, fmt.Errorf("/tokenize asked with add_special %v, parse_special %v", req.AddSpecial, req.ParseSpecial)
		}
		var ids struct{ Tokens []int64 }
		if tk.Status != http.StatusOK || json.Unmarshal(tk.RespBody, &ids) != nil {
			return nil, fmt.Errorf("/tokenize answered %d: %s", tk.Status, tk.RespBody)
		}
		return ids.Tokens, nil
	}
	return nil, fmt.Errorf("no /tokenize call for the prompt %.200s", prompt)
}

// promptIDs returns a Completions request's prompt when it is token ids (a list of integers, or
// a list of one such list).
func promptIDs(dialect string, request []byte) ([]int64, bool) {
	var req struct {
		Prompt json.RawMessage `json:"prompt"`
	}
	if dialect != DialectCompletions || json.Unmarshal(request, &req) != nil {
		return nil, false
	}
	var ids []int64
	if json.Unmarshal(req.Prompt, &ids) == nil {
		return ids, true
	}
	var one [][]int64
	if json.Unmarshal(req.Prompt, &one) == nil && len(one) == 1 {
		return one[0], true
	}
	return nil, false
}

// jsonmemberValue returns the raw value of a top-level member of a JSON object, nil when absent.
func jsonmemberValue(obj []byte, key string) json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(obj, &m)
	return m[key]
}

// exportTokens runs `modelcalls export tokens --capture-dir DIR --in IN --out OUT [extra...]` and
// returns its summary (stdout); the command must exit 0 (every call has token data) and write
// nothing to stderr.
func exportTokens(t *testing.T, bin, dir, in, out string, incomplete bool, extra ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"export", "tokens", "--capture-dir", dir, "--in", in, "--out", out}, extra...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if incomplete && cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 1 {
		err = nil // some calls have no generated ids: the file is written, exit 1 says so
	} else if incomplete && err == nil {
		t.Errorf("modelcalls export tokens --out %s exited 0 with calls without generated ids", filepath.Base(out))
	}
	if err != nil {
		t.Fatalf("modelcalls export tokens --out %s: %v\n%s%s", filepath.Base(out), err, b, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("modelcalls export tokens --out %s wrote to stderr: %s", filepath.Base(out), stderr.String())
	}
	return string(b)
}

// readRows decodes rows from JSON lines (an export's JSONL file, or DuckDB's to_json of each row).
func readRows(t *testing.T, lines [][]byte) []tokenexport.Row {
	t.Helper()
	var rows []tokenexport.Row
	for _, l := range lines {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var r tokenexport.Row
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("row %s: %v", l, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// checkTokens exports the rollouts' tokens to JSONL and Parquet and checks every call's row
// against what crossed the wire: generated ids and logprobs are llama-server's logprob entries,
// prompt ids the /tokenize answer to the server's own render of the client's request; a count
// that differs from usage is named by the finding that says so, and no other finding appears.
// The Parquet file read back by DuckDB gives the JSONL rows. It returns one summary line per call.
func checkTokens(t *testing.T, bin string, rig *upstreamRig, runs []*runResult) []string {
	if len(runs) == 0 {
		t.Skip("no run finished")
	}
	dir := filepath.Dir(rig.captureDir)
	const reward = 0.75
	var in strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&in, `{"_ng_rollout_id":%q,"reward":%v}`+"\n", r.rolloutID, reward)
	}
	inPath := filepath.Join(dir, "tokens-rollouts.jsonl")
	writeFile(t, inPath, in.String())
	jsonlPath, parquetPath := filepath.Join(dir, "tokens.jsonl"), filepath.Join(dir, "tokens.parquet")
	incomplete, complete := false, 0
	for _, r := range runs {
		for _, rec := range r.records {
			if refusesLogprobs(rig.tokens, rec) {
				incomplete = true
			} else {
				complete++
			}
		}
	}
	summary := exportTokens(t, bin, rig.captureDir, inPath, jsonlPath, incomplete)
	t.Logf("export tokens (JSONL): %s", strings.TrimSpace(summary))
	exportTokens(t, bin, rig.captureDir, inPath, parquetPath, incomplete)
	b, err := os.ReadFile(jsonlPath)
	if err != nil {
		t.Fatal(err)
	}
	rows := readRows(t, bytes.Split(b, []byte("\n")))
	byID := map[string]tokenexport.Row{}
	for _, r := range rows {
		byID[r.ModelCallID] = r
	}

	var notes []string
	calls := 0
	for _, run := range runs {
		for i, e := range run.calls {
			calls++
			what := fmt.Sprintf("%s call %d", run.run, i)
			obs := Observe(e.Dialect(), mustDecode(t, e))
			j := slices.IndexFunc(run.records, func(r record) bool { return eqStr(r.ResponseID, obs.ResponseID) })
			if j < 0 {
				t.Errorf("%s: no record with response_id %v", what, deref(obs.ResponseID))
				continue
			}
			rec := run.records[j]
			row, ok := byID[rec.ModelCallID]
			if !ok {
				t.Errorf("%s: no exported row for model_call_id %s", what, rec.ModelCallID)
				continue
			}
			notes = append(notes, what+": "+checkCallTokens(t, what, run, rec, row, e, obs, reward))
		}
	}
	if len(rows) != calls {
		t.Errorf("export tokens wrote %d rows, the upstream answered %d model calls", len(rows), calls)
	}

	// The Parquet file, as DuckDB reads it, holds the JSONL rows.
	types, duckRows := capturetest.ReadParquetWithDuckDB(t, parquetPath)
	for col, typ := range map[string]string{"prompt_token_ids": "BIGINT[]", "generation_token_ids": "BIGINT[]",
		"generation_log_probs": "DOUBLE[]", "reward": "DOUBLE"} {
		if types[col] != typ {
			t.Errorf("DuckDB reads %s as %s, want %s", col, types[col], typ)
		}
	}
	lines := make([][]byte, len(duckRows))
	for i, r := range duckRows {
		lines[i] = r
	}
	duck := readRows(t, lines)
	if len(duck) != len(rows) {
		t.Fatalf("DuckDB read %d rows from the Parquet file, the JSONL file has %d", len(duck), len(rows))
	}
	for i := range rows {
		if d, j := mustJSON(duck[i]), mustJSON(rows[i]); d != j {
			t.Errorf("row %d:\nDuckDB %s\n JSONL %s", i, d, j)
		}
	}
	notes = append(notes, fmt.Sprintf("export tokens: %d rows; DuckDB read the same %d rows from Parquet", len(rows), len(duck)))

	// The main chains as training rows (lineage): loss mask on the generated ids only.
	notes = append(notes, checkSamples(t, bin, rig, runs, byID, inPath)...)

	// NeMo Gym's token records: one per call, the row's ids and logprobs.
	gymDir := filepath.Join(dir, "tokens-gym")
	exportTokens(t, bin, rig.captureDir, inPath, gymDir, incomplete, "--format", "gym")
	gymRecords := 0
	for _, run := range runs {
		b, err := os.ReadFile(filepath.Join(gymDir, run.rolloutID+".tokens.jsonl"))
		if os.IsNotExist(err) && !slices.ContainsFunc(run.records, func(r record) bool {
			return !refusesLogprobs(rig.tokens, r)
		}) {
			continue // no call of the rollout has complete token data: no Gym file
		}
		if err != nil {
			t.Errorf("gym export: %v", err)
			continue
		}
		var n int
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			var g struct {
				SchemaVersion      int       `json:"schema_version"`
				RolloutID          string    `json:"rollout_id"`
				ModelCallID        string    `json:"model_call_id"`
				PromptTokenIDs     []int64   `json:"prompt_token_ids"`
				GenerationTokenIDs []int64   `json:"generation_token_ids"`
				GenerationLogProbs []float64 `json:"generation_log_probs"`
			}
			if err := json.Unmarshal(line, &g); err != nil {
				t.Errorf("gym record %s: %v", line, err)
				continue
			}
			n++
			r := byID[g.ModelCallID]
			if g.SchemaVersion != 1 || g.RolloutID != run.rolloutID || !slices.Equal(g.PromptTokenIDs, r.PromptTokenIDs) ||
				!slices.Equal(g.GenerationTokenIDs, r.GenerationTokenIDs) || !slices.Equal(g.GenerationLogProbs, r.GenerationLogProbs) {
				t.Errorf("gym record of %s differs from its row:\n%s\n%s", g.ModelCallID, line, mustJSON(r))
			}
		}
		gymRecords += n
	}
	if gymRecords != complete {
		t.Errorf("gym export: %d records, %d calls with complete token data", gymRecords, complete)
	}
	return notes
}

// checkCallTokens checks one call's exported row against the wire and returns its summary.
func checkCallTokens(t *testing.T, what string, run *runResult, rec record, row tokenexport.Row, e TapEntry, obs Observed,
	reward float64) string {
	t.Helper()
	errf := func(format string, args ...any) { t.Errorf(what+": "+format, args...) }
	if row.RolloutID != run.rolloutID || row.CallIndex != int64(rec.CallIndex) || row.Dialect != deref(rec.Dialect) {
		errf("row names rollout %s call_index %d dialect %s, want %s %d %s", row.RolloutID, row.CallIndex, row.Dialect,
			run.rolloutID, rec.CallIndex, deref(rec.Dialect))
	}
	if row.Reward == nil || *row.Reward != reward {
		errf("reward %v, the rollouts file says %v", derefAny(row.Reward), reward)
	}
	if !eqInt64(row.UsagePromptTokens, obs.TokensIn) || !eqInt64(row.UsageCompletionTokens, obs.TokensOut) {
		errf("usage %v/%v, the upstream reported %v/%v", derefAny(row.UsagePromptTokens), derefAny(row.UsageCompletionTokens),
			derefAny(obs.TokensIn), derefAny(obs.TokensOut))
	}
	if obs.TokensIn == nil || obs.TokensOut == nil {
		errf("the upstream reported no usage")
		return "no usage"
	}
	explained := map[string]bool{}

	// Generated ids and logprobs: llama-server's logprob entries, one per token with text.
	sent, streamed := sentLogprobs(t, mustDecode(t, e))
	refused := refusesLogprobs("llama-server", rec)
	var ids []int64
	var lps []float64
	for _, en := range sent {
		ids = append(ids, en.ID)
		lps = append(lps, en.Logprob)
	}
	if row.Streamed != streamed {
		errf("streamed %v, the upstream answered with SSE %v", row.Streamed, streamed)
	}
	if streamed {
		// The stream's rebuilt response keeps the entries, as the JSON answer would carry them.
		if rebuilt, _ := sentLogprobs(t, rec.Response); !slices.Equal(rebuilt, sent) {
			errf("the rebuilt response carries logprob entries %v, the stream sent %v", rebuilt, sent)
		}
	}
	if refused {
		// Not asked (the server refuses logprobs on a streamed call with tools): no ids, and the
		// finding that says why.
		if len(sent) != 0 || row.GenerationTokenIDs != nil || row.TokenSource != "absent" {
			errf("streamed with tools, not asked for logprobs: server sent %d entries, row has %v (%s)", len(sent),
				row.GenerationTokenIDs, row.TokenSource)
		}
		explained["not_asked_stream_with_tools"] = true
		if !hasFinding(row, "not_asked_stream_with_tools", "the gateway did not ask llama-server for logprobs: it refuses them on a streamed request with tools, so the call has no generated ids") {
			errf("streamed with tools, not asked: want finding not_asked_stream_with_tools, findings %s", mustJSON(row.Findings))
		}
	} else if row.TokenSource != "logprob_entry_ids" {
		errf("token_source %q, want logprob_entry_ids", row.TokenSource)
	}
	if !refused && (len(ids) == 0 || !slices.Equal(row.GenerationTokenIDs, ids)) {
		errf("generation_token_ids %v, llama-server's logprob entries name %v", row.GenerationTokenIDs, ids)
	}
	if !slices.Equal(row.GenerationLogProbs, lps) {
		errf("generation_log_probs %v, llama-server sent %v", row.GenerationLogProbs, lps)
	}
	completion := *obs.TokensOut
	if !refused && len(ids) != completion {
		code := "completion_count_mismatch"
		if streamed && len(ids) < completion {
			code = "stream_tokens_lost"
		}
		explained[code] = true
		want := fmt.Sprintf("%d generated ids (logprob_entry_ids), usage.completion_tokens is %d", len(ids), completion)
		if !hasFinding(row, code, want) {
			errf("%d generated ids, usage.completion_tokens %d: want finding %s %q, findings %s", len(ids), completion,
				code, want, mustJSON(row.Findings))
		}
	}

	// Prompt ids: the server's render of the client's request, as the gateway asked for it, or
	// the ids the client sent as its Completions prompt.
	wantSource := "server_render"
	want, err := renderedPrompt(t, run.renders, deref(rec.Dialect), rec.Request)
	if ids, ok := promptIDs(deref(rec.Dialect), rec.Request); ok {
		want, err, wantSource = ids, nil, "request_ids"
		for _, r := range run.renders { // a prompt of ids is not rendered
			if jsonEqual(jsonmemberValue(r.ReqBody, "content"), jsonmemberValue(rec.Request, "prompt")) {
				errf("a prompt of ids was sent to %s", r.Path)
			}
		}
	}
	if err != nil {
		errf("%v", err)
	}
	var tc tokenCaptureLine
	_ = json.Unmarshal(run.tokenCaptures[rec.ModelCallID], &tc)
	if tc.PromptTokenError != "" {
		errf("token_capture.prompt_token_error %q", tc.PromptTokenError)
	}
	if wantSource == "request_ids" && tc.PromptTokenIDs != nil {
		errf("token_capture.prompt_token_ids %v for a prompt of ids", tc.PromptTokenIDs)
	}
	if (wantSource == "server_render" && !slices.Equal(tc.PromptTokenIDs, want)) || !slices.Equal(row.PromptTokenIDs, want) {
		errf("prompt ids: token_capture %v, row %v; want %v (%s)", tc.PromptTokenIDs, row.PromptTokenIDs, want, wantSource)
	}
	if row.PromptTokenSource != wantSource {
		errf("prompt_token_source %q, want %s", row.PromptTokenSource, wantSource)
	}
	if len(want) != *obs.TokensIn {
		explained["prompt_count_mismatch"] = true
		w := fmt.Sprintf("%d prompt ids, usage.prompt_tokens is %d (%s)", len(want), *obs.TokensIn, wantSource)
		if !hasFinding(row, "prompt_count_mismatch", w) {
			errf("want finding prompt_count_mismatch %q, findings %s", w, mustJSON(row.Findings))
		}
	}
	var codes []string
	for _, f := range row.Findings {
		codes = append(codes, f.Code)
		if !explained[f.Code] {
			errf("finding %s (%s) that the wire does not explain", f.Code, f.Detail)
		}
	}
	if codes == nil {
		codes = []string{"none"}
	}
	not := ""
	if refused {
		not = " (streamed with tools: logprobs not asked, llama-server refuses them)"
	}
	how := "JSON"
	if streamed {
		how = "SSE"
	}
	return fmt.Sprintf("%s %s: prompt %d ids (%s, usage %d), generated %d ids and %d logprobs (usage %d)%s, findings %s",
		deref(rec.Dialect), how, len(row.PromptTokenIDs), row.PromptTokenSource, *obs.TokensIn, len(row.GenerationTokenIDs),
		len(row.GenerationLogProbs), completion, not, strings.Join(codes, ","))
}

// hasFinding reports whether row carries a call-level finding code whose detail is detail.
func hasFinding(row tokenexport.Row, code, detail string) bool {
	return slices.ContainsFunc(row.Findings, func(f tokenexport.Finding) bool {
		return f.Code == code && f.Detail == detail
	})
}

func eqInt64(a *int64, b *int) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == int64(*b))
}

// checkSamples runs `modelcalls export samples --format tokens` on the capture dir and checks
// each rollout's main chain against its calls' exported token rows: the rows glue the calls'
// prompt and generated ids in order, the loss mask is 1 exactly on each call's generated ids,
// the rollout logprobs there are the call's logprobs, and a row that starts anew names why (a
// token-prefix mismatch: the template re-rendered the history). It returns one summary line per
// rollout.
func checkSamples(t *testing.T, bin string, rig *upstreamRig, runs []*runResult, byID map[string]tokenexport.Row,
	inPath string) []string {
	t.Helper()
	out := filepath.Join(filepath.Dir(rig.captureDir), "samples-tokens.jsonl")
	cmd := exec.Command(bin, "export", "samples", "--capture-dir", rig.captureDir, "--in", inPath, "--format", "tokens",
		"--out", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if b, err := cmd.Output(); err != nil {
		t.Fatalf("modelcalls export samples --format tokens: %v\n%s%s", err, b, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	byRollout := map[string][]samples.TokenRow{}
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r samples.TokenRow
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("samples row %s: %v", line, err)
		}
		byRollout[r.RolloutID] = append(byRollout[r.RolloutID], r)
	}
	var notes []string
	for _, run := range runs {
		rows := byRollout[run.rolloutID]
		if len(rows) == 0 && slices.ContainsFunc(run.records, func(r record) bool { return refusesLogprobs(rig.tokens, r) }) {
			notes = append(notes, "export samples tokens "+run.rolloutID+": no row (its calls have no generated ids)")
			continue
		}
		if len(rows) == 0 {
			t.Errorf("%s: export samples wrote no token row (stderr: %s)", run.rolloutID, stderr.String())
			continue
		}
		glued, splits := 0, []string{}
		for _, r := range rows {
			n := len(r.InputIDs)
			if len(r.LossMask) != n || len(r.RolloutLogprobs) != n || len(r.PromptStarts) != len(r.ModelCallIDs) ||
				len(r.GenerationStarts) != len(r.ModelCallIDs) || len(r.Ends) != len(r.ModelCallIDs) {
				t.Errorf("%s segment %d: list lengths disagree: %s", run.rolloutID, r.Segment, mustJSON(r))
				continue
			}
			if r.Segment > 0 {
				if !strings.HasPrefix(r.SplitReason, "token_prefix_mismatch at ") && r.SplitReason != "no_token_ids" {
					t.Errorf("%s segment %d starts anew with split_reason %q", run.rolloutID, r.Segment, r.SplitReason)
				}
				splits = append(splits, r.SplitReason)
			}
			wantMask := make([]int32, n)
			for k, id := range r.ModelCallIDs {
				glued++
				tr, ok := byID[id]
				ps, gs, end := int(r.PromptStarts[k]), int(r.GenerationStarts[k]), int(r.Ends[k])
				if !ok || ps > gs || gs > end || end > n {
					t.Errorf("%s segment %d call %s: spans %d/%d/%d of %d ids", run.rolloutID, r.Segment, id, ps, gs, end, n)
					continue
				}
				// The row up to the call's generation is its prompt; then its generated ids.
				if !slices.Equal(r.InputIDs[:gs], tr.PromptTokenIDs) {
					t.Errorf("%s call %s: the row's ids before its generation are not its prompt ids", run.rolloutID, id)
				}
				if !slices.Equal(r.InputIDs[gs:end], tr.GenerationTokenIDs) {
					t.Errorf("%s call %s: row ids %v, generated ids %v", run.rolloutID, id, r.InputIDs[gs:end], tr.GenerationTokenIDs)
				}
				if tr.GenerationLogProbs != nil && !slices.Equal(r.RolloutLogprobs[gs:end], tr.GenerationLogProbs) {
					t.Errorf("%s call %s: rollout logprobs %v, the call's %v", run.rolloutID, id, r.RolloutLogprobs[gs:end],
						tr.GenerationLogProbs)
				}
				for i := gs; i < end; i++ {
					wantMask[i] = 1
				}
			}
			if !slices.Equal(r.LossMask, wantMask) {
				t.Errorf("%s segment %d: loss mask %v, want 1 exactly on the generated ids: %v", run.rolloutID, r.Segment,
					r.LossMask, wantMask)
			}
		}
		audit := "token-prefix audit: no split"
		if len(splits) > 0 {
			audit = "split: " + strings.Join(splits, "; ")
		}
		notes = append(notes, fmt.Sprintf("export samples tokens %s: %d rows, %d calls glued, %s", run.rolloutID, len(rows),
			glued, audit))
	}
	return notes
}

// tokensProbe sends Chat calls without tools through `modelcalls proxy --tokens llama-server`
// (pi's calls all stream with tools, which llama-server refuses logprobs on): one JSON, one
// streamed, and a streamed second turn that carries the first answer, so the logprob path and
// the lineage's token-prefix audit meet the real server.
func tokensProbe(t *testing.T, rig *upstreamRig, logPath string) *runResult {
	first := `{"role":"user","content":"Say hello"}`
	return probeCalls(t, rig, logPath, "probe", "/v1/chat/completions", DialectChat, []string{
		`{"model":"e2e-model","messages":[` + first + `]}`,
		`{"model":"e2e-model","messages":[` + first + `],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"e2e-model","messages":[` + first + `,{"role":"assistant","content":"` + tinyAnswer +
			`"},{"role":"user","content":"Again"}],"stream":true,"stream_options":{"include_usage":true}}`,
	}, "tiny")
}

// completionsProbe sends Completions calls through `modelcalls proxy --tokens llama-server`, the
// token-in path of RL loops, with the server's own chat rendering of "Say hello" as the prompt
// (so the model answers as on Chat): as text, JSON and SSE (the gateway has llama-server's
// /tokenize render it), and as ids, JSON (its own prompt ids, not rendered). The test asks the
// server for the prompt and its ids before the probe's window on the Tap opens.
func completionsProbe(t *testing.T, rig *upstreamRig, logPath string) *runResult {
	status, b := capturetest.Post(t, rig.upstreamURL+"/apply-template", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"Say hello"}]}`))
	var tmpl struct{ Prompt string }
	if status != http.StatusOK || json.Unmarshal([]byte(b), &tmpl) != nil || tmpl.Prompt == "" {
		t.Fatalf("/apply-template: %d %.300s", status, b)
	}
	status, b = capturetest.Post(t, rig.upstreamURL+"/tokenize", "application/json",
		strings.NewReader(`{"content":`+mustJSON(tmpl.Prompt)+`,"add_special":true,"parse_special":true}`))
	var tok struct{ Tokens []int64 }
	if status != http.StatusOK || json.Unmarshal([]byte(b), &tok) != nil || len(tok.Tokens) == 0 {
		t.Fatalf("/tokenize: %d %.300s", status, b)
	}
	prompt := mustJSON(tmpl.Prompt)
	return probeCalls(t, rig, logPath, "probe-completions", "/v1/completions", DialectCompletions, []string{
		`{"model":"e2e-model","prompt":` + prompt + `,"max_tokens":32}`,
		`{"model":"e2e-model","prompt":` + prompt + `,"max_tokens":32,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"e2e-model","prompt":` + mustJSON(tok.Tokens) + `,"max_tokens":32}`,
	}, "tiny")
}

// probeCalls sends bodies, one call each, to path through `modelcalls proxy --tokens` under the
// rollout e2e-<rig>-<name>, and checks each capture line against what the upstream received:
// the token request fields and every record field. Each answer must be 200 and contain want.
func probeCalls(t *testing.T, rig *upstreamRig, logPath, name, path, dialect string, bodies []string, want string) *runResult {
	id := "e2e-" + rig.name + "-" + name
	p := startProxy(t, rig.bin, rig.upstreamURL, rig.captureDir, logPath, "--tokens", rig.tokens)
	rig.tap.Take()
	started := time.Now()
	for i, body := range bodies {
		status, b := capturetest.Post(t, p.base+"/ng-rollout/"+id+path, "application/json", strings.NewReader(body))
		if status != http.StatusOK || !strings.Contains(b, want) {
			t.Fatalf("%s call %d: status %d: %.300s", name, i, status, b)
		}
	}
	finished := time.Now()
	if err := p.stop(); err != nil {
		t.Errorf("proxy --tokens did not shut down cleanly: %v\n%s", err, p.logTail())
	}
	res := &runResult{run: name, dialect: dialect, rolloutID: id, wall: finished.Sub(started)}
	for _, e := range rig.tap.Take() {
		if e.Dialect() != "" {
			res.calls = append(res.calls, e)
		} else if isRender(rig.tokens, e) {
			res.renders = append(res.renders, e)
		} else {
			t.Errorf("%s: unexpected %s %s reached the upstream", name, e.Method, e.Path)
		}
	}
	res.records = readRecords(t, rig.bin, rig.captureDir, id)
	res.tokenCaptures = readTokenCaptures(t, rig.captureDir, id)
	if len(res.records) != len(bodies) || len(res.calls) != len(bodies) {
		t.Fatalf("%s: %d records, %d calls upstream, want %d", name, len(res.records), len(res.calls), len(bodies))
	}
	for i, e := range res.calls {
		r := res.records[i]
		what := fmt.Sprintf("%s call %d", name, i)
		e = checkTokenRequest(t, what, rig.tokens, r, res.tokenCaptures[r.ModelCallID], e)
		checkRecord(t, what, r, e, Observe(dialect, mustDecode(t, e)), nil, dialect, started, finished)
	}
	return res
}
