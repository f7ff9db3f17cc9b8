package tokens_test

import (
	"fmt"

	"github.com/modelcalls/modelcalls/tokens"
)

// A vLLM Chat answer asked with return_token_ids and logprobs: the ids, their source, one logprob
// per generated id, and a finding because the usage counts one token more than the ids.
func ExampleRead() {
	t := tokens.Read(tokens.Call{
		Dialect: "chat",
		Response: []byte(`{"prompt_token_ids":[1,2,3],"choices":[{"index":0,"token_ids":[7,8],` +
			`"logprobs":{"content":[{"token":"a","logprob":-0.5},{"token":"b","logprob":-0.25}]}}],` +
			`"usage":{"prompt_tokens":3,"completion_tokens":3}}`),
	})
	fmt.Println(t.PromptTokenIDs, t.PromptSource)
	fmt.Println(t.GenerationTokenIDs(), t.Source, t.GenerationLogProbs())
	for _, f := range t.Findings {
		fmt.Println(f.Code+":", f.Detail)
	}
	// Output:
	// [1 2 3] engine_ids
	// [7 8] engine_ids [-0.5 -0.25]
	// completion_count_mismatch: 2 generated ids (engine_ids), usage.completion_tokens is 3
}

// What --tokens vllm appends to a Chat request, and what the capture line records as added.
func ExampleAddRequestFields() {
	out, added, _ := tokens.AddRequestFields(tokens.EngineVLLM, "chat", []byte(`{"model":"m","logprobs":false,"messages":[]}`))
	fmt.Println(string(out))
	fmt.Println(string(added))
	// Output:
	// {"model":"m","logprobs":false,"messages":[],"return_token_ids":true}
	// {"return_token_ids":true}
}
