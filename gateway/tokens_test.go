package gateway_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/tokens"
)

// engine answers like a model server: /v1/chat/completions (and every other path) with answer,
// /apply-template and /tokenize as llama-server does.
func engine(answer, contentType string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/apply-template":
			io.WriteString(w, `{"prompt":"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"}`)
		case "/tokenize":
			io.WriteString(w, `{"tokens":[151644,872,198,6023,151645,198,151644,77091,198]}`)
		default:
			w.Header().Set("Content-Type", contentType)
			io.WriteString(w, answer)
		}
	}
}

// sent returns the bodies the upstream got on path, and the Authorization header of the last.
func (e *env) sent(path string) (bodies []string, auth string) {
	for _, r := range e.up.Requests() {
		if r.Path == path {
			bodies = append(bodies, string(r.Body))
			auth = r.Header.Get("Authorization")
		}
	}
	return bodies, auth
}

const llamaAnswer = `{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"Hi there"},"logprobs":{"content":[{"id":13048,"token":"Hi","bytes":[72,105],"logprob":-0.0123,"top_logprobs":[{"id":13048,"token":"Hi","bytes":[72,105],"logprob":-0.0123}]},{"id":1052,"token":" there","bytes":[32,116,104,101,114,101],"logprob":-0.5,"top_logprobs":[{"id":1052,"token":" there","bytes":[32,116,104,101,114,101],"logprob":-0.5}]}]}}],"created":1790000000,"model":"my-model","object":"chat.completion","usage":{"completion_tokens":2,"prompt_tokens":9,"total_tokens":11},"id":"chatcmpl-Xq"}`

const vllmStream = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"prompt_token_ids\":[1,2,3],\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"token_ids\":[]}]}\n\n" +
	"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"logprobs\":{\"content\":[{\"token\":\"Hi\",\"logprob\":-0.1,\"top_logprobs\":[]}]},\"token_ids\":[7]}]}\n\n" +
	"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":{\"content\":[{\"token\":\"\",\"logprob\":-0.01,\"top_logprobs\":[]}]},\"finish_reason\":\"stop\",\"token_ids\":[2]}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n" +
	"data: [DONE]\n\n"

// TestTokensLlamaServer: with Tokens llama-server, the engine gets logprobs and top_logprobs on
// the call and the prompt is rendered by its /apply-template and /tokenize with the client's
// credentials; the line keeps the client's request and records what was added and the rendered
// prompt ids; the client gets the engine's answer unchanged.
func TestTokensLlamaServer(t *testing.T) {
	e := newEnv(t, engine(llamaAnswer, "application/json"), func(h *gateway.Handler) { h.Tokens = tokens.EngineLlamaServer })
	client := `{"model":"my-model","messages":[{"role":"user","content":"hi"}]}`
	resp, body := e.post("r1", "/v1/chat/completions", client, map[string]string{"Authorization": "Bearer k"})
	if resp.StatusCode != 200 || string(body) != llamaAnswer {
		t.Fatalf("client got %d %s", resp.StatusCode, body)
	}
	e.drain()
	if got, _ := e.sent("/v1/chat/completions"); len(got) != 1 || got[0] != `{"model":"my-model","messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":1}` {
		t.Errorf("engine got %q", got)
	}
	if got, _ := e.sent("/apply-template"); len(got) != 1 || got[0] != client {
		t.Errorf("/apply-template got %q", got)
	}
	if got, auth := e.sent("/tokenize"); len(got) != 1 || !strings.Contains(got[0], `"add_special":true`) || auth != "Bearer k" {
		t.Errorf("/tokenize got %q with %q", got, auth)
	}
	l := e.one("r1")
	if string(l.Request) != client {
		t.Errorf("line request %s, want the client's", l.Request)
	}
	want := `{"engine":"llama-server","added":{"logprobs":true,"top_logprobs":1},"prompt_token_ids":[151644,872,198,6023,151645,198,151644,77091,198]}`
	if string(l.Keys["token_capture"]) != want {
		t.Errorf("token_capture %s\nwant %s", l.Keys["token_capture"], want)
	}
	got := tokens.Read(tokens.Call{Dialect: l.Dialect, Request: l.Request, Response: l.Response, TokenCapture: l.Keys["token_capture"]})
	if !got.Complete() || got.PromptSource != tokens.SourceServerRender || got.Source != tokens.SourceLogprobEntryIDs || len(got.Findings) != 0 {
		t.Errorf("read back: %+v", got)
	}
}

// TestTokensVLLMStream: with Tokens vllm, a streamed call asks for return_token_ids and logprobs,
// and the ids read back from the captured stream.
func TestTokensVLLMStream(t *testing.T) {
	e := newEnv(t, engine(vllmStream, "text/event-stream"), func(h *gateway.Handler) { h.Tokens = tokens.EngineVLLM })
	client := `{"model":"m","stream":true,"top_logprobs":0,"messages":[{"role":"user","content":"hi"}]}`
	resp, body := e.post("r1", "/v1/chat/completions", client, nil)
	if resp.StatusCode != 200 || string(body) != vllmStream {
		t.Fatalf("client got %d %s", resp.StatusCode, body)
	}
	e.drain()
	if got, _ := e.sent("/v1/chat/completions"); len(got) != 1 || !strings.HasSuffix(got[0], `}],"return_token_ids":true,"logprobs":true}`) {
		t.Errorf("engine got %q", got)
	}
	if got, _ := e.sent("/apply-template"); got != nil {
		t.Error("a vLLM call was rendered")
	}
	l := e.one("r1")
	if string(l.Keys["token_capture"]) != `{"engine":"vllm","added":{"return_token_ids":true,"logprobs":true}}` {
		t.Errorf("token_capture %s", l.Keys["token_capture"])
	}
	got := tokens.Read(tokens.Call{Request: l.Request, Response: l.Response, ResponseRaw: []byte(*l.ResponseRaw), TokenCapture: l.Keys["token_capture"]})
	if !got.Complete() || len(got.Findings) != 0 || len(got.GenerationTokenIDs()) != 2 {
		t.Errorf("read back: %+v", got)
	}
}

// TestTokensOff: without Tokens, and for dialects without token ids, the request goes upstream as
// sent and the line has no token_capture.
func TestTokensOff(t *testing.T) {
	for _, tc := range []struct {
		engine tokens.Engine
		path   string
	}{{"", "/v1/chat/completions"}, {tokens.EngineVLLM, "/v1/messages"}, {tokens.EngineSGLang, "/v1/responses"}} {
		e := newEnv(t, engine(`{"id":"x"}`, "application/json"), func(h *gateway.Handler) { h.Tokens = tc.engine })
		client := `{"model":"m","messages":[]}`
		e.post("r1", tc.path, client, nil)
		e.drain()
		if got, _ := e.sent(tc.path); len(got) != 1 || got[0] != client {
			t.Errorf("%s %s: engine got %q", tc.engine, tc.path, got)
		}
		if l := e.one("r1"); l.Has("token_capture") {
			t.Errorf("%s %s: line has token_capture", tc.engine, tc.path)
		}
	}
}

// TestTokensRenderFailure: a render the server refuses is named on the line, and the call goes on.
func TestTokensRenderFailure(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, llamaAnswer)
	}, func(h *gateway.Handler) { h.Tokens = tokens.EngineLlamaServer })
	resp, _ := e.post("r1", "/v1/chat/completions", `{"messages":[]}`, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	e.drain()
	var tc struct {
		PromptTokenError string `json:"prompt_token_error"`
	}
	l := e.one("r1")
	if json.Unmarshal(l.Keys["token_capture"], &tc) != nil || tc.PromptTokenError != "/apply-template: status 404" {
		t.Errorf("token_capture %s", l.Keys["token_capture"])
	}
	got := tokens.Read(tokens.Call{Response: l.Response, TokenCapture: l.Keys["token_capture"]})
	if !got.Has(tokens.FindingServerRenderFailed) {
		t.Errorf("findings %+v", got.Findings)
	}
}

// TestTokensAsk: what --tokens sends the engine, renders beside the call and records on the line,
// per engine and request shape. A streamed llama-server Chat call with tools is forwarded as sent
// (the server refuses logprobs there) and the line says why; Completions calls are asked in the
// legacy API's terms, and a llama-server text prompt is tokenized by the server.
func TestTokensAsk(t *testing.T) {
	const rendered = `"prompt_token_ids":[151644,872,198,6023,151645,198,151644,77091,198]`
	for _, tc := range []struct {
		name    string
		engine  tokens.Engine
		path    string
		client  string
		sent    string // "" means the client's request unchanged
		capture string // the line's token_capture
		render  []string
		finding string // a finding the call reads with, "" for none of the not_asked ones
	}{
		{"llama-server chat stream with tools", tokens.EngineLlamaServer, "/v1/chat/completions",
			`{"messages":[{"role":"user","content":"hi"}],"stream":true,"tools":[{"type":"function","function":{"name":"ls"}}]}`, "",
			`{"engine":"llama-server","added":{},"not_asked":"stream_with_tools",` + rendered + `}`,
			[]string{"/apply-template", "/tokenize"}, tokens.FindingNotAskedStreamWithTools},
		{"llama-server chat JSON with tools", tokens.EngineLlamaServer, "/v1/chat/completions",
			`{"messages":[],"tools":[{"type":"function","function":{"name":"ls"}}]}`,
			`{"messages":[],"tools":[{"type":"function","function":{"name":"ls"}}],"logprobs":true,"top_logprobs":1}`,
			`{"engine":"llama-server","added":{"logprobs":true,"top_logprobs":1},` + rendered + `}`,
			[]string{"/apply-template", "/tokenize"}, ""},
		{"llama-server chat stream without tools", tokens.EngineLlamaServer, "/v1/chat/completions",
			`{"messages":[],"stream":true}`, `{"messages":[],"stream":true,"logprobs":true,"top_logprobs":1}`,
			`{"engine":"llama-server","added":{"logprobs":true,"top_logprobs":1},` + rendered + `}`,
			[]string{"/apply-template", "/tokenize"}, ""},
		{"llama-server completions text", tokens.EngineLlamaServer, "/v1/completions",
			`{"prompt":"Say hi","stream":true}`, `{"prompt":"Say hi","stream":true,"logprobs":1}`,
			`{"engine":"llama-server","added":{"logprobs":1},` + rendered + `}`,
			[]string{"/tokenize"}, ""},
		{"llama-server completions ids", tokens.EngineLlamaServer, "/v1/completions",
			`{"prompt":[1,2,3]}`, `{"prompt":[1,2,3],"logprobs":1}`,
			`{"engine":"llama-server","added":{"logprobs":1}}`, nil, ""},
		{"llama-server completions batch", tokens.EngineLlamaServer, "/v1/completions",
			`{"prompt":["a","b"],"n_probs":2}`, "",
			`{"engine":"llama-server","added":{},"prompt_token_error":"the prompt is a batch of several prompts: not rendered"}`, nil,
			tokens.FindingServerRenderFailed},
		{"vllm completions", tokens.EngineVLLM, "/v1/completions",
			`{"prompt":"Say hi"}`, `{"prompt":"Say hi","return_token_ids":true,"logprobs":0}`,
			`{"engine":"vllm","added":{"return_token_ids":true,"logprobs":0}}`, nil, ""},
		{"sglang completions", tokens.EngineSGLang, "/v1/completions",
			`{"prompt":[5,6],"stream":true,"logprobs":2}`, `{"prompt":[5,6],"stream":true,"logprobs":2,"return_token_ids":true}`,
			`{"engine":"sglang","added":{"return_token_ids":true}}`, nil, ""},
		{"vllm chat stream with tools", tokens.EngineVLLM, "/v1/chat/completions",
			`{"messages":[],"stream":true,"tools":[{}]}`, `{"messages":[],"stream":true,"tools":[{}],"return_token_ids":true,"logprobs":true}`,
			`{"engine":"vllm","added":{"return_token_ids":true,"logprobs":true}}`, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, engine(`{"id":"x","choices":[]}`, "application/json"), func(h *gateway.Handler) { h.Tokens = tc.engine })
			resp, body := e.post("r1", tc.path, tc.client, nil)
			if resp.StatusCode != 200 || string(body) != `{"id":"x","choices":[]}` {
				t.Fatalf("client got %d %s", resp.StatusCode, body)
			}
			e.drain()
			want := tc.sent
			if want == "" {
				want = tc.client
			}
			if got, _ := e.sent(tc.path); len(got) != 1 || got[0] != want {
				t.Errorf("engine got %q, want %s", got, want)
			}
			var render []string
			for _, r := range e.up.Requests() {
				if r.Path != tc.path {
					render = append(render, r.Path)
				}
			}
			if strings.Join(render, ",") != strings.Join(tc.render, ",") {
				t.Errorf("render calls %v, want %v", render, tc.render)
			}
			if tc.path == "/v1/completions" && len(tc.render) > 0 {
				if got, _ := e.sent("/tokenize"); len(got) != 1 || got[0] != `{"content":"Say hi","add_special":true,"parse_special":true}` {
					t.Errorf("/tokenize got %q", got)
				}
			}
			l := e.one("r1")
			if string(l.Request) != tc.client {
				t.Errorf("line request %s, want the client's", l.Request)
			}
			if string(l.Keys["token_capture"]) != tc.capture {
				t.Errorf("token_capture %s\nwant %s", l.Keys["token_capture"], tc.capture)
			}
			got := tokens.Read(tokens.Call{Dialect: l.Dialect, Request: l.Request, Response: l.Response, TokenCapture: l.Keys["token_capture"]})
			for _, code := range []string{tokens.FindingNotAskedStreamWithTools, tokens.FindingServerRenderFailed} {
				if got.Has(code) != (code == tc.finding) {
					t.Errorf("finding %s: %v, findings %+v", code, got.Has(code), got.Findings)
				}
			}
		})
	}
}

// TestTokensRenderHostile: a llama-server whose /apply-template or /tokenize hangs, answers
// garbage, an empty list or far more bytes than the prompt can tokenize to: the client gets the
// engine's answer unchanged and no later than the render grace after it, and the line names what
// failed (server_render_failed with the reason).
func TestTokensRenderHostile(t *testing.T) {
	huge := `{"tokens":[` + strings.Repeat("1,", 4<<20) + `1]}`
	for _, tc := range []struct {
		name     string
		path     string // the render call that misbehaves
		answer   func(w http.ResponseWriter, r *http.Request)
		errorHas string
	}{
		{"tokenize hangs", "/tokenize", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, "did not finish"},
		{"apply-template hangs", "/apply-template", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, "did not finish"},
		{"tokenize garbage", "/tokenize", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"tokens":"1,2,3"}`) }, "/tokenize: answer is not the expected JSON"},
		{"tokenize not JSON", "/tokenize", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `<html>`) }, "/tokenize: answer is not the expected JSON"},
		{"tokenize empty list", "/tokenize", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"tokens":[]}`) }, "/tokenize: answer has no tokens"},
		{"tokenize fractional id", "/tokenize", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"tokens":[1.5]}`) }, "/tokenize: answer is not the expected JSON"},
		{"tokenize huge", "/tokenize", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, huge) }, "/tokenize: answer is longer than"},
		{"apply-template no prompt", "/apply-template", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"prompt":null}`) }, "/apply-template: answer has no prompt"},
		{"tokenize 500", "/tokenize", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500); io.WriteString(w, huge) }, "/tokenize: status 500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := engine(llamaAnswer, "application/json")
			e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == tc.path {
					tc.answer(w, r)
					return
				}
				base(w, r)
			}, func(h *gateway.Handler) { h.Tokens = tokens.EngineLlamaServer })
			start := time.Now()
			resp, body := e.post("r1", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, nil)
			took := time.Since(start)
			if resp.StatusCode != 200 || string(body) != llamaAnswer {
				t.Fatalf("client got %d %s", resp.StatusCode, body)
			}
			// The render grace, with room for a loaded machine; the render timeout is 10 s.
			if took > 3*time.Second {
				t.Errorf("the client waited %v for its answer", took)
			}
			e.drain()
			var capt struct {
				PromptTokenIDs   []int64 `json:"prompt_token_ids"`
				PromptTokenError string  `json:"prompt_token_error"`
			}
			l := e.one("r1")
			if err := json.Unmarshal(l.Keys["token_capture"], &capt); err != nil || capt.PromptTokenIDs != nil || !strings.Contains(capt.PromptTokenError, tc.errorHas) {
				t.Errorf("token_capture %.300s, want an error with %q", l.Keys["token_capture"], tc.errorHas)
			}
			got := tokens.Read(tokens.Call{Dialect: l.Dialect, Request: l.Request, Response: l.Response, TokenCapture: l.Keys["token_capture"]})
			if !got.Has(tokens.FindingServerRenderFailed) || got.PromptSource != tokens.SourceAbsent {
				t.Errorf("read back: prompt source %s, findings %+v", got.PromptSource, got.Findings)
			}
		})
	}
}

// TestTokensRenderHangTiming: against the same streaming upstream, whose /tokenize never answers,
// the client's first byte and terminal event come as soon with --tokens llama-server as without,
// give or take the render grace (100 ms) on the terminal event; the numbers are logged.
func TestTokensRenderHangTiming(t *testing.T) {
	const chunks = 5
	chunk := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n"
	up := func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/apply-template":
			io.WriteString(w, `{"prompt":"hi"}`)
		case "/tokenize":
			<-r.Context().Done()
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; i < chunks; i++ {
				io.WriteString(w, chunk)
				w.(http.Flusher).Flush()
				time.Sleep(20 * time.Millisecond) // the engine's pace, not synchronization
			}
			io.WriteString(w, "data: [DONE]\n\n")
		}
	}
	measure := func(engine tokens.Engine) (ttft, end time.Duration) {
		e := newEnv(t, up, func(h *gateway.Handler) { h.Tokens = engine })
		req, _ := http.NewRequest(http.MethodPost, e.url("r1", "/v1/chat/completions"), strings.NewReader(`{"stream":true,"messages":[]}`))
		start := time.Now()
		resp, err := rawClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		buf := make([]byte, 1)
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			t.Fatal(err)
		}
		ttft = time.Since(start)
		rest, err := io.ReadAll(resp.Body)
		end = time.Since(start)
		if err != nil || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
			t.Fatalf("client got %q, %v", rest, err)
		}
		return ttft, end
	}
	ttft0, end0 := measure("")
	ttft1, end1 := measure(tokens.EngineLlamaServer)
	t.Logf("without --tokens: TTFT %v, terminal event %v; with llama-server and a hanging /tokenize: TTFT %v, terminal event %v", ttft0, end0, ttft1, end1)
	// Loose bounds for a loaded machine: the render timeout (10 s) would break them.
	if ttft1 > ttft0+time.Second || end1 > end0+2*time.Second {
		t.Errorf("the client waited longer with --tokens")
	}
}

// TestTokensCompressedRequest: a compressed Chat request is forwarded as sent, and its line says
// the engine was not asked and why, so its missing ids read as a decision.
func TestTokensCompressedRequest(t *testing.T) {
	e := newEnv(t, engine(llamaAnswer, "application/json"), func(h *gateway.Handler) { h.Tokens = tokens.EngineLlamaServer })
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"messages":[{"role":"user","content":"hi"}]}`))
	zw.Close()
	resp, body := e.post("r1", "/v1/chat/completions", gz.String(), map[string]string{"Content-Encoding": "gzip"})
	if resp.StatusCode != 200 || string(body) != llamaAnswer {
		t.Fatalf("client got %d %s", resp.StatusCode, body)
	}
	e.drain()
	if got, _ := e.sent("/v1/chat/completions"); len(got) != 1 || got[0] != gz.String() {
		t.Errorf("engine got another body")
	}
	if got, _ := e.sent("/apply-template"); got != nil {
		t.Errorf("a compressed request was rendered")
	}
	l := e.one("r1")
	if string(l.Keys["token_capture"]) != `{"engine":"llama-server","added":{},"not_asked":"request_encoded"}` {
		t.Errorf("token_capture %s", l.Keys["token_capture"])
	}
	got := tokens.Read(tokens.Call{Dialect: l.Dialect, Request: l.Request, Response: l.Response, TokenCapture: l.Keys["token_capture"]})
	if !got.Has(tokens.FindingNotAsked) {
		t.Errorf("findings %+v", got.Findings)
	}
}
