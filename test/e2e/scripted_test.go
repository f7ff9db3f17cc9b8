package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// harnessRequest is one model call a real harness made (shared fixtures, clients/*.json), as
// copied into testdata/harness-requests.jsonl: prefix stripped from the path.
type harnessRequest struct {
	Harness  string          `json:"harness"`
	Exchange int             `json:"exchange"`
	Path     string          `json:"path"`
	Body     json.RawMessage `json:"body"`
}

func loadHarnessRequests(t *testing.T) map[string]harnessRequest {
	t.Helper()
	f, err := os.Open("testdata/harness-requests.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]harnessRequest{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var r harnessRequest
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("testdata/harness-requests.jsonl: %v", err)
		}
		out[r.Harness+"#"+string(rune('0'+r.Exchange))] = r
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestScriptedDecisions feeds the scripted upstream the requests real harnesses made and checks
// the turn it plays: which tool it calls with which parameter on a first turn, and that a
// second turn is recognised by its tool result.
func TestScriptedDecisions(t *testing.T) {
	reqs := loadHarnessRequests(t)
	const file = "/work/project/hello.txt"
	tests := []struct {
		key       string // harness#exchange
		wantTool  string // "" for a text answer
		wantParam string
		wantValue string
		wantText  string // for a text answer
	}{
		{key: "claude-code#1", wantTool: "Read", wantParam: "file_path", wantValue: file},
		{key: "claude-code#2", wantText: MissingNonceReply},
		{key: "codex#0", wantTool: "exec_command", wantParam: "cmd", wantValue: "cat " + file},
		{key: "codex#1", wantText: MissingNonceReply},
		{key: "opencode#0", wantText: PlainAnswer}, // title generation: no tools offered
		{key: "opencode#1", wantTool: "read", wantParam: "filePath", wantValue: file},
		{key: "opencode#2", wantText: MissingNonceReply},
		{key: "pi#0", wantTool: "read", wantParam: "path", wantValue: file},
		{key: "pi#1", wantText: MissingNonceReply},
		{key: "pi#2", wantTool: "read", wantParam: "path", wantValue: file},
		{key: "pi#3", wantText: MissingNonceReply},
		{key: "pi#4", wantTool: "read", wantParam: "path", wantValue: file},
		{key: "pi#5", wantText: MissingNonceReply},
		{key: "qwen-code#0", wantTool: "read_file", wantParam: "file_path", wantValue: file},
		{key: "qwen-code#1", wantText: MissingNonceReply},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			r, ok := reqs[tc.key]
			if !ok {
				t.Fatalf("no request %s in testdata", tc.key)
			}
			d := DialectOfPath(r.Path)
			if d == "" {
				t.Fatalf("path %q is not a model-call path", r.Path)
			}
			var req map[string]json.RawMessage
			if err := json.Unmarshal(r.Body, &req); err != nil {
				t.Fatal(err)
			}
			s := &Scripted{FilePath: file}
			sv := s.decide(d, req, len(r.Body))
			if tc.wantTool == "" {
				if sv.ToolCall != nil || sv.Text != tc.wantText {
					t.Fatalf("got tool call %+v, text %q; want text %q", sv.ToolCall, sv.Text, tc.wantText)
				}
				if sv.ToolResult == "" && tc.wantText == MissingNonceReply {
					t.Fatalf("tool result not found in a second-turn request")
				}
				return
			}
			if sv.ToolCall == nil {
				t.Fatalf("got text %q, want a call of %s", sv.Text, tc.wantTool)
			}
			got := sv.ToolCall
			if got.Name != tc.wantTool || len(got.Arguments) != 1 || got.Arguments[tc.wantParam] != tc.wantValue {
				t.Fatalf("got %s(%v), want %s(%s=%q)", got.Name, got.Arguments, tc.wantTool, tc.wantParam, tc.wantValue)
			}
		})
	}
}

// TestScriptedFindsNonce checks the second turn answers with the nonce the tool result carries,
// for each dialect's tool-result shape as the harnesses send it.
func TestScriptedFindsNonce(t *testing.T) {
	reqs := loadHarnessRequests(t)
	const nonce = "e2e-nonce-00112233445566ff"
	for _, key := range []string{"claude-code#2", "codex#1", "opencode#2", "pi#1", "pi#3", "pi#5", "qwen-code#1"} {
		t.Run(key, func(t *testing.T) {
			r := reqs[key]
			body := bytes.ReplaceAll(r.Body, []byte("hello world 42"), []byte(nonce))
			if bytes.Equal(body, r.Body) {
				t.Fatalf("fixture request has no tool output to replace")
			}
			var req map[string]json.RawMessage
			if err := json.Unmarshal(body, &req); err != nil {
				t.Fatal(err)
			}
			sv := (&Scripted{FilePath: "/x"}).decide(DialectOfPath(r.Path), req, len(body))
			if want := AnswerForNonce(nonce); sv.Text != want {
				t.Fatalf("text %q, want %q (tool result %q)", sv.Text, want, sv.ToolResult)
			}
		})
	}
}

// sdkCase is one request sent through an official SDK to the scripted upstream behind a Tap.
type sdkCase struct {
	name    string
	dialect string
	stream  bool
	second  bool // carry a tool result: expect the text answer
}

func sdkCases() []sdkCase {
	var out []sdkCase
	for _, d := range []string{DialectChat, DialectResponses, DialectMessages} {
		for _, stream := range []bool{false, true} {
			for _, second := range []bool{false, true} {
				name := d
				if stream {
					name += "/sse"
				} else {
					name += "/json"
				}
				if second {
					name += "/turn2"
				} else {
					name += "/turn1"
				}
				out = append(out, sdkCase{name: name, dialect: d, stream: stream, second: second})
			}
		}
	}
	return out
}

const sdkNonce = "e2e-nonce-0123456789abcdef"

// sdkBody is a minimal request offering the "read" tool; on the second turn it carries the
// tool's result with the nonce.
func sdkBody(c sdkCase) []byte {
	schema := map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}},
		"required": []string{"path"}}
	var body map[string]any
	switch c.dialect {
	case DialectChat:
		msgs := []any{map[string]any{"role": "user", "content": "Read hello.txt"}}
		if c.second {
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_1",
					"type": "function", "function": map[string]any{"name": "read", "arguments": `{"path":"/p/hello.txt"}`}}}},
				map[string]any{"role": "tool", "tool_call_id": "call_1", "content": sdkNonce + "\n"})
		}
		body = map[string]any{"model": "m", "messages": msgs, "tools": []any{map[string]any{"type": "function",
			"function": map[string]any{"name": "read", "parameters": schema}}}}
		if c.stream {
			body["stream_options"] = map[string]any{"include_usage": true}
		}
	case DialectResponses:
		input := []any{map[string]any{"role": "user", "content": "Read hello.txt"}}
		if c.second {
			input = append(input,
				map[string]any{"type": "function_call", "call_id": "call_1", "name": "read", "arguments": `{"path":"/p/hello.txt"}`},
				map[string]any{"type": "function_call_output", "call_id": "call_1", "output": sdkNonce + "\n"})
		}
		body = map[string]any{"model": "m", "input": input, "tools": []any{map[string]any{"type": "function",
			"name": "read", "parameters": schema}}}
	case DialectMessages:
		msgs := []any{map[string]any{"role": "user", "content": "Read hello.txt"}}
		if c.second {
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_1",
					"name": "read", "input": map[string]any{"path": "/p/hello.txt"}}}},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result",
					"tool_use_id": "toolu_1", "content": []any{map[string]any{"type": "text", "text": sdkNonce}}}}})
		}
		body = map[string]any{"model": "m", "max_tokens": 100, "messages": msgs,
			"tools": []any{map[string]any{"name": "read", "input_schema": schema}}}
	}
	body["stream"] = c.stream
	b, _ := json.Marshal(body)
	return b
}

// sdkResult is what an SDK made of the answer.
type sdkResult struct {
	toolName, toolArgs, text, reasoning, id string
	in, out                                 int64
}

// TestScriptedThroughSDKs sends each dialect × JSON/SSE × turn through the official Go SDK of
// that API (openai-go, anthropic-sdk-go) to the scripted upstream behind a Tap, plain and
// gzip-compressed, and checks the SDK's own parse (stream accumulation included) agrees with
// what the upstream says it served, and that Observe reads the same usage from the tapped bytes.
func TestScriptedThroughSDKs(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "gzip"}[gz], func(t *testing.T) { testScriptedThroughSDKs(t, gz) })
	}
}

func testScriptedThroughSDKs(t *testing.T, gz bool) {
	s := &Scripted{FilePath: "/p/hello.txt", Gzip: gz}
	up := capturetest.NewServer(t, s.ServeHTTP)
	tap, front := tapIn(t, up.URL)
	oc := openai.NewClient(ooption.WithBaseURL(front.URL+"/v1/"), ooption.WithAPIKey("sk-test"), ooption.WithMaxRetries(0))
	ac := anthropic.NewClient(aoption.WithBaseURL(front.URL+"/"), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0))
	ctx := context.Background()

	for _, c := range sdkCases() {
		t.Run(c.name, func(t *testing.T) {
			body := sdkBody(c)
			var got sdkResult
			switch c.dialect {
			case DialectChat:
				got = chatViaSDK(t, ctx, oc, c.stream, body)
			case DialectResponses:
				got = responsesViaSDK(t, ctx, oc, c.stream, body)
			case DialectMessages:
				got = messagesViaSDK(t, ctx, ac, c.stream, body)
			}
			served := s.Take()
			entries := tap.Take()
			if len(served) != 1 || len(entries) != 1 {
				t.Fatalf("served %d calls, tapped %d; want 1 each", len(served), len(entries))
			}
			sv, e := served[0], entries[0]
			if sv.Stream != c.stream || sv.Dialect != c.dialect {
				t.Fatalf("served %s stream=%v, want %s stream=%v", sv.Dialect, sv.Stream, c.dialect, c.stream)
			}
			if c.second {
				if want := AnswerForNonce(sdkNonce); got.text != want || sv.Text != want {
					t.Fatalf("SDK text %q, served %q; want %q", got.text, sv.Text, want)
				}
			} else {
				if sv.ToolCall == nil {
					t.Fatalf("served no tool call")
				}
				if got.toolName != "read" || got.toolArgs != `{"path":"/p/hello.txt"}` {
					t.Fatalf("SDK tool call %s(%s), want read({\"path\":\"/p/hello.txt\"})", got.toolName, got.toolArgs)
				}
				if got.reasoning != ScriptedReasoning {
					t.Fatalf("SDK reasoning %q, want %q", got.reasoning, ScriptedReasoning)
				}
			}
			if got.id != sv.ResponseID {
				t.Fatalf("SDK id %q, served %q", got.id, sv.ResponseID)
			}
			wantIn := int64(sv.TokensIn)
			if c.dialect == DialectMessages {
				wantIn -= int64(sv.CachedTokens) // Anthropic input_tokens excludes cache reads
			}
			if got.in != wantIn || got.out != int64(sv.TokensOut) {
				t.Fatalf("SDK usage in=%d out=%d, want %d %d", got.in, got.out, wantIn, sv.TokensOut)
			}
			if got := e.RespHeader.Get("Content-Encoding") == "gzip"; got != gz {
				t.Fatalf("answer gzip-compressed: %v, want %v", got, gz)
			}
			decoded, err := e.DecodedBody()
			if err != nil {
				t.Fatal(err)
			}
			obs := Observe(c.dialect, decoded)
			if obs.TokensIn == nil || *obs.TokensIn != sv.TokensIn || obs.TokensOut == nil || *obs.TokensOut != sv.TokensOut ||
				obs.Cached == nil || *obs.Cached != sv.CachedTokens || obs.ResponseID == nil || *obs.ResponseID != sv.ResponseID {
				t.Fatalf("Observe = %s, served %+v", describe(obs), sv)
			}
			if e.Status != http.StatusOK || e.Path != DialectPath(c.dialect) || !bytes.Equal(e.ReqBody, body) {
				t.Fatalf("tap entry status %d path %q; body recorded whole: %v", e.Status, e.Path, bytes.Equal(e.ReqBody, body))
			}
		})
	}
}

// DialectPath is the request path of a dialect, for tests.
func DialectPath(d string) string {
	switch d {
	case DialectChat:
		return "/v1/chat/completions"
	case DialectResponses:
		return "/v1/responses"
	}
	return "/v1/messages"
}

func describe(o Observed) string {
	b, _ := json.Marshal(o)
	return string(b)
}

// sdkStream is what the OpenAI and Anthropic SDKs' streams have in common.
type sdkStream[T any] interface {
	Next() bool
	Current() T
	Err() error
}

// drainStream hands every event of st to each and fails the test on a stream error.
func drainStream[T any](t *testing.T, what string, st sdkStream[T], each func(T)) {
	t.Helper()
	for st.Next() {
		each(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatalf("%s stream: %v", what, err)
	}
}

// sdkCall makes one call through an SDK and returns its answer: streamed (open starts the stream),
// every event folded into it by fold; else the whole response call returns. An error of the call,
// of the stream or of fold fails the test, named by what.
func sdkCall[R, E any](t *testing.T, what string, stream bool, fold func(*R, E) error, open func() sdkStream[E], call func() (*R, error)) R {
	t.Helper()
	var r R
	if stream {
		drainStream(t, what, open(), func(ev E) {
			if err := fold(&r, ev); err != nil {
				t.Fatalf("%s: accumulate: %v", what, err)
			}
		})
		return r
	}
	res, err := call()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return *res
}

func chatViaSDK(t *testing.T, ctx context.Context, c openai.Client, stream bool, body []byte) sdkResult {
	t.Helper()
	opt := ooption.WithRequestBody("application/json", body)
	var cc openai.ChatCompletion
	if stream {
		st := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{}, opt)
		acc := openai.ChatCompletionAccumulator{}
		var reasoning strings.Builder
		drainStream(t, "chat", st, func(ch openai.ChatCompletionChunk) {
			acc.AddChunk(ch)
			for _, choice := range ch.Choices {
				var d struct {
					ReasoningContent string `json:"reasoning_content"`
				}
				_ = json.Unmarshal([]byte(choice.Delta.RawJSON()), &d)
				reasoning.WriteString(d.ReasoningContent)
			}
		})
		cc = acc.ChatCompletion
		r := chatResult(t, cc)
		r.reasoning = reasoning.String()
		return r
	}
	res, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{}, opt)
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	r := chatResult(t, *res)
	var m struct {
		ReasoningContent string `json:"reasoning_content"`
	}
	_ = json.Unmarshal([]byte(res.Choices[0].Message.RawJSON()), &m)
	r.reasoning = m.ReasoningContent
	return r
}

func chatResult(t *testing.T, cc openai.ChatCompletion) sdkResult {
	t.Helper()
	if len(cc.Choices) != 1 {
		t.Fatalf("chat: %d choices", len(cc.Choices))
	}
	msg := cc.Choices[0].Message
	r := sdkResult{text: msg.Content, id: cc.ID, in: cc.Usage.PromptTokens, out: cc.Usage.CompletionTokens}
	if len(msg.ToolCalls) == 1 {
		r.toolName, r.toolArgs = msg.ToolCalls[0].Function.Name, msg.ToolCalls[0].Function.Arguments
	}
	return r
}

func responsesViaSDK(t *testing.T, ctx context.Context, c openai.Client, stream bool, body []byte) sdkResult {
	t.Helper()
	opt := ooption.WithRequestBody("application/json", body)
	resp := sdkCall(t, "responses", stream, completedResponse,
		func() sdkStream[responses.ResponseStreamEventUnion] {
			return c.Responses.NewStreaming(ctx, responses.ResponseNewParams{}, opt)
		},
		func() (*responses.Response, error) { return c.Responses.New(ctx, responses.ResponseNewParams{}, opt) })
	r := sdkResult{text: resp.OutputText(), id: resp.ID, in: resp.Usage.InputTokens, out: resp.Usage.OutputTokens}
	for _, item := range resp.Output {
		switch item.Type {
		case "function_call":
			r.toolName, r.toolArgs = item.Name, item.Arguments.OfString
		case "reasoning":
			for _, s := range item.Summary {
				r.reasoning += s.Text
			}
		}
	}
	return r
}

// completedResponse keeps the response of a Responses stream's response.completed event.
func completedResponse(resp *responses.Response, ev responses.ResponseStreamEventUnion) error {
	if ev.Type == "response.completed" {
		*resp = ev.Response
	}
	return nil
}

func messagesViaSDK(t *testing.T, ctx context.Context, c anthropic.Client, stream bool, body []byte) sdkResult {
	t.Helper()
	opt := aoption.WithRequestBody("application/json", body)
	msg := sdkCall(t, "messages", stream, (*anthropic.Message).Accumulate,
		func() sdkStream[anthropic.MessageStreamEventUnion] {
			return c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{}, opt)
		},
		func() (*anthropic.Message, error) { return c.Messages.New(ctx, anthropic.MessageNewParams{}, opt) })
	r := sdkResult{id: msg.ID, in: msg.Usage.InputTokens, out: msg.Usage.OutputTokens}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			r.text += b.Text
		case "thinking":
			r.reasoning += b.Thinking
		case "tool_use":
			r.toolName, r.toolArgs = b.Name, string(b.Input)
		}
	}
	return r
}

// TestScriptedCompaction feeds the scripted upstream the calls of real compacted runs
// (lineage/testdata): Claude Code (a prompt, /compact, the prompt again) and Codex (a prompt
// compacted after its turn, then the prompt again). The summary request is answered with
// SummaryAnswer of the nonce its tool result carries, the calls around it as before, the call
// after the compaction (the summary pasted in) with the tool call.
func TestScriptedCompaction(t *testing.T) {
	for _, tc := range []struct{ rollout, dialect string }{
		{"e2e-scripted-claude-code-compact", DialectMessages},
		{"e2e-scripted-codex-compact", DialectResponses},
	} {
		t.Run(tc.rollout, func(t *testing.T) {
			b, err := os.ReadFile("../../lineage/testdata/captures/" + tc.rollout + ".capture.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			nonce := NoncePattern.FindString(string(b))
			lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
			want := []string{"tool", AnswerForNonce(nonce), SummaryAnswer(nonce), "tool", AnswerForNonce(nonce)}
			if len(lines) != len(want) || nonce == "" {
				t.Fatalf("%d calls, nonce %q", len(lines), nonce)
			}
			for i, line := range lines {
				var l struct {
					Request map[string]json.RawMessage `json:"request"`
				}
				if err := json.Unmarshal(line, &l); err != nil {
					t.Fatal(err)
				}
				sv := (&Scripted{FilePath: "/p/hello.txt"}).decide(tc.dialect, l.Request, len(line))
				got := sv.Text
				if sv.ToolCall != nil {
					got = "tool"
				}
				if got != want[i] {
					t.Errorf("call %d: answered %q, want %q", i, got, want[i])
				}
			}
		})
	}
	// A Chat conversation asking the same is answered the same; a user turn that only mentions
	// summaries, or a summary request followed by the model's turn, is not a compaction request.
	chat := func(msgs ...any) map[string]json.RawMessage {
		m, _ := json.Marshal(msgs)
		return map[string]json.RawMessage{"messages": m}
	}
	ask := map[string]any{"role": "user", "content": "Before compaction, summarize the conversation inside <summary></summary> tags."}
	for _, tc := range []struct {
		name string
		req  map[string]json.RawMessage
		want string
	}{
		{"chat summary request", chat(map[string]any{"role": "user", "content": "hi"}, ask), SummaryAnswer("")},
		{"mentions summaries", chat(map[string]any{"role": "user", "content": "write a summary of hello.txt"}), PlainAnswer},
		{"a pasted summary", chat(map[string]any{"role": "user", "content": "An earlier model wrote this summary: " + SummaryAnswer("")}), PlainAnswer},
		{"answered already", chat(ask, map[string]any{"role": "assistant", "content": "ok"}), PlainAnswer},
	} {
		if sv := (&Scripted{FilePath: "/p/hello.txt"}).decide(DialectChat, tc.req, 100); sv.Text != tc.want {
			t.Errorf("%s: answered %q, want %q", tc.name, sv.Text, tc.want)
		}
	}
}
