package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/tokens/tokenexport"
)

// tokenLine builds a capture line from one of package tokens' golden cases.
func tokenLine(t *testing.T, name, id string) []byte {
	t.Helper()
	dir := filepath.Join("..", "..", "tokens", "testdata", name)
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil
		}
		return bytes.TrimSpace(b)
	}
	ex := &capture.Exchange{ModelCallID: id, Dialect: "chat", StartedAt: 1790000000, CompletedAt: 1790000001.5,
		Request: read("request.json"), Response: read("response.json")}
	if raw := read("response.sse"); raw != nil {
		s := string(raw)
		ex.ResponseRaw = &s
	}
	line, err := capture.EncodeExchange(ex)
	if err != nil {
		t.Fatal(err)
	}
	if tc := read("token_capture.json"); tc != nil {
		line = append(append(append(line[:len(line)-1], `,"token_capture":`...), tc...), '}')
	}
	return line
}

// tokenCaptureDir holds r1 (a vLLM call and a llama-server stream) and r2 (an Anthropic call).
func tokenCaptureDir(t *testing.T) string {
	dir := t.TempDir()
	st, err := capture.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, name, mcid string }{
		{"r1", "vllm_chat_json", "00000000000000000000000000000001"},
		{"r1", "llamacpp_chat_sse", "00000000000000000000000000000002"},
		{"r2", "messages_plain", "00000000000000000000000000000003"},
	} {
		if err := st.Append(c.id, tokenLine(t, c.name, c.mcid)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func readRows(t *testing.T, path string) []tokenexport.Row {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []tokenexport.Row
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r tokenexport.Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

func TestExportTokens(t *testing.T) {
	dir := tokenCaptureDir(t)
	out := t.TempDir()

	t.Run("jsonl, all rollouts: r2 has a call without ids", func(t *testing.T) {
		p := filepath.Join(out, "all.jsonl")
		stdout, errOut, code := runCLI(t, "", "export", "tokens", "--capture-dir", dir, "--out", p)
		if code != ExitFailure || !strings.Contains(stdout, "exported 3 calls of 2 rollouts (jsonl): 2 with prompt ids, generated ids and logprobs, 1 without token ids") ||
			!strings.Contains(stdout, "findings: stream_tokens_lost 1") {
			t.Errorf("exit %d, out %q, err %q", code, stdout, errOut)
		}
		rows := readRows(t, p)
		if len(rows) != 3 || rows[0].RolloutID != "r1" || rows[1].CallIndex != 1 || rows[1].TokenSource != "logprob_entry_ids" ||
			rows[1].PromptTokenSource != "server_render" || rows[2].TokenSource != "absent" || rows[2].GenerationTokenIDs != nil {
			t.Errorf("rows %+v", rows)
		}
	})
	t.Run("captured without --tokens: the summary names the fix", func(t *testing.T) {
		stdout, errOut, code := runCLI(t, `{"_ng_rollout_id":"e2e-scripted-codex"}`+"\n", "export", "tokens", "--capture-dir", lineageCaptures,
			"--in", "-", "--out", filepath.Join(out, "none.jsonl"))
		if code != ExitFailure || !strings.Contains(stdout, ": 0 with prompt ids, generated ids and logprobs,") ||
			!strings.Contains(stdout, "no call carries token ids: capture with modelcalls proxy (or run) --tokens vllm|sglang|llama-server") {
			t.Errorf("exit %d, out %q, err %q", code, stdout, errOut)
		}
	})
	t.Run("--in: only its rollouts, with their reward", func(t *testing.T) {
		p := filepath.Join(out, "r1.jsonl")
		stdout, errOut, code := runCLI(t, `{"_ng_rollout_id":"r1","reward":0.75}`+"\n", "export", "tokens", "--capture-dir", dir, "--in", "-", "--out", p)
		if code != ExitOK {
			t.Fatalf("exit %d, out %q, err %q", code, stdout, errOut)
		}
		rows := readRows(t, p)
		if len(rows) != 2 || rows[0].Reward == nil || *rows[0].Reward != 0.75 {
			t.Errorf("rows %+v", rows)
		}
	})
	t.Run("parquet reads back as the JSONL rows", func(t *testing.T) {
		pj, pq := filepath.Join(out, "b.jsonl"), filepath.Join(out, "b.parquet")
		runCLI(t, "", "export", "tokens", "--capture-dir", dir, "--out", pj)
		if _, errOut, code := runCLI(t, "", "export", "tokens", "--capture-dir", dir, "--out", pq); code != ExitFailure {
			t.Fatalf("exit %d, err %q", code, errOut)
		}
		b, err := os.ReadFile(pq)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tokenexport.ReadParquet(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		want := readRows(t, pj)
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if !bytes.Equal(gj, wj) {
			t.Errorf("parquet rows\n%s\njsonl rows\n%s", gj, wj)
		}
	})
	t.Run("gym: one file per rollout with token data", func(t *testing.T) {
		g := filepath.Join(out, "gym")
		stdout, errOut, code := runCLI(t, "", "export", "tokens", "--capture-dir", dir, "--format", "gym", "--out", g)
		if code != ExitFailure || !strings.Contains(stdout, "1 not written as Gym records") {
			t.Errorf("exit %d, out %q, err %q", code, stdout, errOut)
		}
		b, err := os.ReadFile(filepath.Join(g, "r1.tokens.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], `{"schema_version":1,"rollout_id":"r1","model_call_id":"00000000000000000000000000000001","model":"Qwen/Qwen3-0.6B","prompt_token_ids":[151644,`) {
			t.Errorf("r1.tokens.jsonl:\n%s", b)
		}
		if _, err := os.Stat(filepath.Join(g, "r2.tokens.jsonl")); !os.IsNotExist(err) {
			t.Errorf("r2 has no token data but got a file: %v", err)
		}
	})
	t.Run("a listed rollout without captures", func(t *testing.T) {
		p := filepath.Join(out, "missing.jsonl")
		stdout, errOut, code := runCLI(t, `{"_ng_rollout_id":"r1"}`+"\n"+`{"_ng_rollout_id":"r9"}`+"\n", "export", "tokens", "--capture-dir", dir, "--in", "-", "--out", p)
		if code != ExitFailure || !strings.Contains(errOut, "rollout r9 has no captured calls") || !strings.Contains(stdout, "; 1 rollouts without captures") {
			t.Errorf("exit %d, out %q, err %q", code, stdout, errOut)
		}
		if rows := readRows(t, p); len(rows) != 2 {
			t.Errorf("%d rows, want r1's 2", len(rows))
		}
	})
	t.Run("usage errors", func(t *testing.T) {
		for _, args := range [][]string{
			{"export", "tokens", "--out", "x.jsonl"},
			{"export", "tokens", "--capture-dir", dir},
			{"export", "tokens", "--capture-dir", dir, "--out", "x", "--format", "csv"},
			{"export", "tokens", "--capture-dir", dir, "--out", "-", "--format", "parquet"},
		} {
			if _, errOut, code := runCLI(t, "", args...); code != ExitUsage {
				t.Errorf("%v: exit %d, err %q", args, code, errOut)
			}
		}
	})
	t.Run("stdout: rows on stdout, summary on stderr", func(t *testing.T) {
		stdout, errOut, _ := runCLI(t, `{"_ng_rollout_id":"r1"}`+"\n", "export", "tokens", "--capture-dir", dir, "--in", "-", "--out", "-")
		if strings.Count(stdout, "\n") != 2 || !strings.Contains(errOut, "exported 2 calls") {
			t.Errorf("out %q, err %q", stdout, errOut)
		}
	})
}

func TestTokensFlagUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1", "--capture-dir", dir, "--tokens", "tgi"}, `--tokens: unknown engine "tgi" (known: vllm, sglang, llama-server)`},
		{[]string{"run", "--rollout", "r1", "--gateway", "http://127.0.0.1:1", "--tokens", "vllm", "--", "true"}, "--tokens"},
		{[]string{"run", "--rollout", "r1", "--upstream", "http://127.0.0.1:1", "--capture-dir", dir, "--tokens", "x", "--", "true"}, "--tokens: unknown engine"},
	} {
		_, errOut, code := runCLI(t, "", tc.args...)
		if code != ExitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, err %q", tc.args, code, errOut)
		}
	}
}

func TestShowTokens(t *testing.T) {
	dir := tokenCaptureDir(t)
	for _, tc := range []struct {
		id, call string
		want     []string
	}{
		{"r1", "0", []string{"── tokens", "generated  3 ids (engine_ids), 3 logprobs", "prompt     9 ids (engine_ids)", `lowest     #1 " there" -0.500, #0 "Hi" -0.012, #2 "" -0.000`}},
		{"r1", "1", []string{"generated  2 ids (logprob_entry_ids), 2 logprobs", "prompt     9 ids (server_render)", "finding    stream_tokens_lost: 2 generated ids (logprob_entry_ids), usage.completion_tokens is 3"}},
		{"r2", "0", []string{"── tokens", "none: the response carries no token ids or logprobs"}},
	} {
		out, errOut, code := runCLI(t, "", "show", "--capture-dir", dir, tc.id, tc.call)
		for _, w := range tc.want {
			if code != ExitOK || !strings.Contains(out, w) {
				t.Errorf("show %s %s: exit %d, lacks %q:\n%s%s", tc.id, tc.call, code, w, out, errOut)
			}
		}
	}
}

// TestRunTokensThenExport is the token path end to end on loopback: a child runs under
// `run --upstream FAKE --tokens llama-server`, the fake llama-server is asked for logprobs and
// renders the prompt, and `export tokens` gives the call's prompt ids (server_render), generated
// ids (logprob entry ids) and logprobs.
func TestRunTokensThenExport(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	upstream := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		asked = append(asked, r.URL.Path+" "+string(body))
		mu.Unlock()
		switch {
		case r.URL.Path == "/apply-template":
			io.WriteString(w, `{"prompt":"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"}`)
		case r.URL.Path == "/tokenize":
			io.WriteString(w, `{"tokens":[151644,872,198,6023,151645,198,151644,77091,198]}`)
		case bytes.Contains(body, []byte(`"stream":true`)):
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"he"},"logprobs":{"content":[{"id":383,"token":"he","bytes":[104,101],"logprob":-0.2,"top_logprobs":[]}]}}]}`+"\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop","logprobs":{"content":[{"id":14990,"token":"hello","bytes":[104,101,108,108,111],"logprob":-0.25,"top_logprobs":[{"id":14990,"token":"hello","bytes":[104,101,108,108,111],"logprob":-0.25}]}]}}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`)
		}
	})
	dir := t.TempDir()
	cmd := wrapper(append([]string{"run", "--rollout", "tok-1", "--upstream", upstream.URL, "--capture-dir", dir, "--tokens", "llama-server"}, child("calls")...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if got := exitCode(t, cmd.Run()); got != 7 {
		t.Fatalf("exit %d, want the child's 7; stdout %s stderr %s", got, out.String(), errOut.String())
	}
	mu.Lock()
	sawLogprobs := false
	for _, a := range asked {
		if strings.HasPrefix(a, "/v1/chat/completions ") && strings.HasSuffix(a, `,"logprobs":true,"top_logprobs":1}`) {
			sawLogprobs = true
		}
	}
	mu.Unlock()
	if !sawLogprobs {
		t.Errorf("the engine was not asked for logprobs: %q", asked)
	}
	p := filepath.Join(t.TempDir(), "tok.jsonl")
	stdout, stderr, code := runCLI(t, "", "export", "tokens", "--capture-dir", dir, "--out", p)
	if code != ExitOK {
		t.Fatalf("export tokens: exit %d, out %q, err %q", code, stdout, stderr)
	}
	rows := readRows(t, p)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	r := rows[0]
	if !r.Complete() || r.PromptTokenSource != "server_render" || r.TokenSource != "logprob_entry_ids" ||
		len(r.PromptTokenIDs) != 9 || r.GenerationTokenIDs[0] != 14990 || r.GenerationLogProbs[0] != -0.25 || len(r.Findings) != 0 {
		t.Errorf("finished call: %+v", r)
	}
	if rows[1].GenerationTokenIDs[0] != 383 || !rows[1].Streamed {
		t.Errorf("abandoned stream: %+v", rows[1])
	}
}
