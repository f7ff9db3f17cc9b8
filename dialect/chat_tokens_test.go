package dialect

import "testing"

// TestChatReassemblyKeepsTokenIDs: a Chat stream's reconstruction carries the token ids and
// logprobs the non-streaming answer would: vLLM's prompt_token_ids (first chunk) and per-choice
// token_ids (return_token_ids), each choice's logprobs.content, concatenated across chunks;
// SGLang's per-choice prompt_token_ids and its one sglext, in a last chunk without choices.
func TestChatReassemblyKeepsTokenIDs(t *testing.T) {
	runReassemblyCases(t, []reassemblyCase{
		{"vLLM return_token_ids and logprobs", Chat,
			body(`{"id":"c1","model":"m","prompt_token_ids":[1, 2, 3],"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"token_ids":[]}]}`,
				`{"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.1,"bytes":[72,105],"top_logprobs":[]}]},"finish_reason":null,"token_ids":[9707]}]}`,
				`{"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":" there"},"logprobs":{"content":[{"token":" there","logprob":-0.5,"bytes":[32],"top_logprobs":[]}]},"finish_reason":"stop","token_ids":[1052, 151645]}]}`,
				`{"id":"c1","model":"m","prompt_token_ids":[7],"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`,
				`[DONE]`),
			`{"object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi there"},"logprobs":{"content":[{"token":"Hi","logprob":-0.1,"bytes":[72,105],"top_logprobs":[]},{"token":" there","logprob":-0.5,"bytes":[32],"top_logprobs":[]}]},"finish_reason":"stop","token_ids":[9707,1052,151645]}],"id":"c1","usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6},"prompt_token_ids":[1,2,3]}`,
			TerminalComplete},
		{"SGLang sglext in a last chunk, n=2 choices", Chat,
			body(`{"id":"s1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"a"},"logprobs":{"content":[{"token":"a","logprob":0.0}]}},{"index":1,"delta":{"role":"assistant","content":"b"},"logprobs":{"content":[{"token":"b","logprob":-1.0}]}}]}`,
				`{"id":"s1","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop","prompt_token_ids":[5,6]},{"index":1,"delta":{},"finish_reason":"length"}]}`,
				`{"id":"s1","model":"m","choices":[],"sglext":{"input_ids":[5,6],"output_ids":[[64],[65]]}}`,
				`[DONE]`),
			`{"object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a"},"logprobs":{"content":[{"token":"a","logprob":0.0}]},"finish_reason":"stop","prompt_token_ids":[5,6]},{"index":1,"message":{"role":"assistant","content":"b"},"logprobs":{"content":[{"token":"b","logprob":-1.0}]},"finish_reason":"length"}],"id":"s1","sglext":{"input_ids":[5,6],"output_ids":[[64],[65]]}}`,
			TerminalComplete},
		{"members of the wrong type add nothing", Chat,
			body(`{"prompt_token_ids":"x","choices":[{"index":0,"delta":{"content":"a"},"token_ids":5,"logprobs":{"content":null}}]}`,
				`{"choices":[{"index":0,"delta":{},"logprobs":[1],"finish_reason":"stop"}]}`,
				`[DONE]`),
			`{"object":"chat.completion","model":null,"choices":[{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"stop"}]}`,
			TerminalComplete},
	})
}
