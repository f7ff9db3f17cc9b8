package dialect

import (
	"reflect"
	"testing"
)

// TestCompletionsReassembly rebuilds legacy Completions streams in the documented shapes (OpenAI's
// text_completion chunks, vLLM's with token ids): text joined per choice index, the last
// finish_reason and usage, the legacy logprobs arrays and the ids concatenated.
func TestCompletionsReassembly(t *testing.T) {
	runReassemblyCases(t, []reassemblyCase{
		{"OpenAI shape, usage in a last chunk without choices", Completions,
			body(`{"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"m","choices":[{"index":0,"text":"Hello","logprobs":null,"finish_reason":null}]}`,
				`{"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"m","choices":[{"index":0,"text":" world","logprobs":null,"finish_reason":"length"}]}`,
				`{"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
				`[DONE]`),
			`{"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"m","choices":[{"index":0,"text":"Hello world","logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
			TerminalComplete},
		{"vLLM token-in: ids and legacy logprobs concatenated, n=2", Completions,
			body(`{"id":"cmpl-2","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"a","logprobs":{"text_offset":[0],"token_logprobs":[-0.1],"tokens":["a"],"top_logprobs":[{"a":-0.1}]},"finish_reason":null,"token_ids":[64],"prompt_token_ids":[1,2]},{"index":1,"text":"b","logprobs":{"text_offset":[0],"token_logprobs":[-2.0],"tokens":["b"],"top_logprobs":[{"b":-2.0}]},"finish_reason":null,"token_ids":[65]}]}`,
				`{"id":"cmpl-2","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"c","logprobs":{"text_offset":[1],"token_logprobs":[-0.3],"tokens":["c"],"top_logprobs":[{"c":-0.3}]},"finish_reason":"stop","token_ids":[66]}]}`,
				`{"id":"cmpl-2","object":"text_completion","created":1,"model":"m","choices":[{"index":1,"text":"","logprobs":null,"finish_reason":"length","token_ids":[]}]}`,
				`[DONE]`),
			`{"id":"cmpl-2","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"ac","logprobs":{"tokens":["a","c"],"token_logprobs":[-0.1,-0.3],"top_logprobs":[{"a":-0.1},{"c":-0.3}],"text_offset":[0,1]},"finish_reason":"stop","token_ids":[64,66],"prompt_token_ids":[1,2]},{"index":1,"text":"b","logprobs":{"tokens":["b"],"token_logprobs":[-2.0],"top_logprobs":[{"b":-2.0}],"text_offset":[0]},"finish_reason":"length","token_ids":[65]}]}`,
			TerminalComplete},
		{"llama-server: logprobs.content entries with ids concatenated, the final chunk's null ignored", Completions,
			body(`{"choices":[{"text":"Hi","index":0,"logprobs":{"content":[{"id":9,"token":"Hi","bytes":[72,105],"logprob":-0.5,"top_logprobs":[{"id":9,"token":"Hi","bytes":[72,105],"logprob":-0.5}]}]},"finish_reason":null}],"created":1,"model":"m","object":"text_completion","id":"cmpl-4"}`,
				`{"choices":[{"text":"","index":0,"logprobs":{"content":[{"id":4,"token":"","bytes":[],"logprob":0.0,"top_logprobs":[]}]},"finish_reason":null}],"created":1,"model":"m","object":"text_completion","id":"cmpl-4"}`,
				`{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"stop"}],"created":1,"model":"m","object":"text_completion","usage":{"completion_tokens":2,"prompt_tokens":7,"total_tokens":9},"id":"cmpl-4"}`,
				`[DONE]`),
			`{"id":"cmpl-4","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"Hi","logprobs":{"content":[{"id":9,"token":"Hi","bytes":[72,105],"logprob":-0.5,"top_logprobs":[{"id":9,"token":"Hi","bytes":[72,105],"logprob":-0.5}]},{"id":4,"token":"","bytes":[],"logprob":0.0,"top_logprobs":[]}]},"finish_reason":"stop"}],"usage":{"completion_tokens":2,"prompt_tokens":7,"total_tokens":9}}`,
			TerminalComplete},
		{"an error object ends the stream as an error", Completions,
			body(`{"id":"cmpl-3","object":"text_completion","model":"m","choices":[{"index":0,"text":"a"}]}`,
				`{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`),
			`{"id":"cmpl-3","object":"text_completion","model":"m","choices":[{"index":0,"text":"a","logprobs":null,"finish_reason":null}]}`,
			TerminalError},
	})
}

// TestCompletionsConversation reads a prompt as one user message (text, or ids shown as ids) and
// each choice's text as an assistant message.
func TestCompletionsConversation(t *testing.T) {
	for _, tc := range []struct {
		name, req string
		want      []Message
	}{
		{"text prompt", `{"model":"m","prompt":"Say hi"}`, []Message{{Role: "user", Parts: []Part{{Kind: "text", Text: "Say hi"}}}}},
		{"token ids", `{"model":"m","prompt":[1,2,3]}`, []Message{{Role: "user", Parts: []Part{{Kind: "other", Name: "token_ids", Text: "[1,2,3]"}}}}},
		{"a batch of prompts", `{"model":"m","prompt":["a",[4,5]]}`, []Message{{Role: "user", Parts: []Part{{Kind: "text", Text: "a"}, {Kind: "other", Name: "token_ids", Text: "[4,5]"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := ParseRequest([]byte(tc.req))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseRequest = %+v, want %+v", got, tc.want)
			}
		})
	}
	out, errMsg := ParseResponse([]byte(`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"Hi!","logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}}`))
	want := []Message{{Role: "assistant", Parts: []Part{{Kind: "text", Text: "Hi!"}}}}
	if errMsg != "" || !reflect.DeepEqual(out, want) {
		t.Errorf("ParseResponse = %+v, %q; want %+v", out, errMsg, want)
	}
}

// TestCompletionsPrompt: the one prompt of a Completions request and its kind, in each shape the
// API takes (text, ids, a list of one, llama-server's mix of ids and text, a batch).
func TestCompletionsPrompt(t *testing.T) {
	for _, tc := range []struct {
		body   string
		prompt string
		kind   PromptKind
	}{
		{`{"prompt":"Say hi"}`, `"Say hi"`, PromptText},
		{`{"prompt":""}`, `""`, PromptText},
		{`{"prompt":[1,2,3]}`, `[1,2,3]`, PromptIDs},
		{`{"prompt":[[1,2,3]]}`, `[1,2,3]`, PromptIDs},
		{`{"prompt":["Say hi"]}`, `"Say hi"`, PromptText},
		{`{"prompt":[1,"Say hi",2]}`, `[1,"Say hi",2]`, PromptText},
		{`{"prompt":[[1,"Say hi"]]}`, `[1,"Say hi"]`, PromptText},
		{`{"prompt":["a","b"]}`, ``, PromptBatch},
		{`{"prompt":[[1],[2]]}`, ``, PromptBatch},
		{`{"prompt":["a",[2]]}`, ``, PromptBatch},
		{`{"prompt":[]}`, ``, PromptNone},
		{`{"prompt":null}`, ``, PromptNone},
		{`{"prompt":{"prompt_string":"x"}}`, ``, PromptNone},
		{`{"prompt":[1.5]}`, ``, PromptNone},
		{`{"prompt":[[[1]]]}`, ``, PromptNone},
		{`{"prompt":[1,[2]]}`, ``, PromptNone},
		{`{"model":"m"}`, ``, PromptNone},
		{`{"prompt":"x"`, ``, PromptNone},
		{`["x"]`, ``, PromptNone},
	} {
		p, kind := CompletionsPrompt([]byte(tc.body))
		if string(p) != tc.prompt || kind != tc.kind {
			t.Errorf("%s: got %s kind %d, want %s kind %d", tc.body, p, kind, tc.prompt, tc.kind)
		}
	}
}
