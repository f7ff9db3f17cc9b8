package tokens

import (
	"strings"
	"testing"
)

// TestReadTokenCapture: what the gateway recorded on the line's token_capture reads as the prompt
// ids and as findings; a call the gateway deliberately did not ask says so by name.
func TestReadTokenCapture(t *testing.T) {
	// A streamed llama-server Chat answer with a tool call, not asked for logprobs: no ids.
	const toolStream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":9}}\n\n" +
		"data: [DONE]\n\n"
	for _, tc := range []struct {
		name         string
		call         Call
		findings     string // codes, comma-separated
		detail       string // a substring of the first finding's detail
		promptSource Source
		source       Source
	}{
		{"stream with tools not asked",
			Call{ResponseRaw: []byte(toolStream), TokenCapture: []byte(`{"engine":"llama-server","added":{},"not_asked":"stream_with_tools","prompt_token_ids":[1,2,3]}`)},
			FindingNotAskedStreamWithTools, "did not ask llama-server for logprobs: it refuses them on a streamed request with tools",
			SourceServerRender, SourceAbsent},
		{"not asked, render failed too",
			Call{ResponseRaw: []byte(toolStream), TokenCapture: []byte(`{"engine":"llama-server","added":{},"not_asked":"stream_with_tools","prompt_token_error":"/tokenize: status 500"}`)},
			FindingServerRenderFailed + "," + FindingNotAskedStreamWithTools, "/tokenize: status 500", SourceAbsent, SourceAbsent},
		{"a reason this reader does not know",
			Call{TokenCapture: []byte(`{"engine":"vllm","added":{},"not_asked":"batch"}`)},
			FindingNotAsked, `not_asked "batch"`, SourceAbsent, SourceAbsent},
		{"asked: no finding",
			Call{Response: []byte(`{"choices":[{"index":0,"logprobs":{"content":[{"id":7,"token":"a","logprob":-0.5}]}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`),
				TokenCapture: []byte(`{"engine":"llama-server","added":{"logprobs":true,"top_logprobs":1},"prompt_token_ids":[1,2,3]}`)},
			"", "", SourceServerRender, SourceLogprobEntryIDs},
		{"the client set every member: no finding",
			Call{TokenCapture: []byte(`{"engine":"vllm","added":{}}`)}, "", "", SourceAbsent, SourceAbsent},
		// llama-server's /v1/completions answer with logprobs: the Chat entry shape, with ids; a
		// text prompt rendered by /tokenize.
		{"llama-server completions",
			Call{Dialect: "completions", Request: []byte(`{"prompt":"Say hi","logprobs":1}`),
				Response:     []byte(`{"choices":[{"text":"hi","index":0,"logprobs":{"content":[{"id":9,"token":"hi","bytes":[104,105],"logprob":-0.1,"top_logprobs":[{"id":9,"token":"hi","bytes":[104,105],"logprob":-0.1}]},{"id":2,"token":"","bytes":[],"logprob":-0.01,"top_logprobs":[]}]},"finish_reason":"stop"}],"object":"text_completion","usage":{"prompt_tokens":4,"completion_tokens":2}}`),
				TokenCapture: []byte(`{"engine":"llama-server","added":{},"prompt_token_ids":[1,5,6,7]}`)},
			"", "", SourceServerRender, SourceLogprobEntryIDs},
		// A prompt of ids is its own source; the render, if any, is compared with it.
		{"completions prompt of ids",
			Call{Dialect: "completions", Request: []byte(`{"prompt":[1,5,6,7]}`),
				Response: []byte(`{"choices":[{"text":"hi","index":0,"logprobs":{"content":[{"id":9,"token":"hi","logprob":-0.1}]}}],"usage":{"prompt_tokens":4,"completion_tokens":1}}`)},
			"", "", SourceRequestIDs, SourceLogprobEntryIDs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Read(tc.call)
			var codes []string
			for _, f := range got.Findings {
				codes = append(codes, f.Code)
			}
			if strings.Join(codes, ",") != tc.findings {
				t.Errorf("findings %+v, want %s", got.Findings, tc.findings)
			}
			if tc.detail != "" && (len(got.Findings) == 0 || !strings.Contains(got.Findings[0].Detail, tc.detail)) {
				t.Errorf("findings %+v, want a detail with %q", got.Findings, tc.detail)
			}
			if got.PromptSource != tc.promptSource || got.Source != tc.source {
				t.Errorf("prompt source %s, source %s; want %s, %s", got.PromptSource, got.Source, tc.promptSource, tc.source)
			}
		})
	}
}
