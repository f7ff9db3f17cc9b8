package tokens

import (
	"strings"
	"testing"
)

// TestReadHostile: token fields of types, values and arrangements no engine sends are named
// (malformed_token_field, or the check they break), never read as ids.
func TestReadHostile(t *testing.T) {
	for _, tc := range []struct {
		name     string
		call     Call
		gen      int    // the first choice's generated ids
		prompt   int    // the prompt ids
		findings string // the finding codes, comma-separated
	}{
		{"id beyond int64", Call{Response: []byte(`{"choices":[{"index":0,"token_ids":[1,99999999999999999999],"logprobs":{"content":[{"logprob":-1},{"logprob":-1}]}}]}`)},
			0, 0, "malformed_token_field,logprobs_without_ids"},
		{"id beyond int32 is an id", Call{Response: []byte(`{"choices":[{"index":0,"token_ids":[4294967296],"logprobs":{"content":[{"logprob":-1}]}}]}`)},
			1, 0, ""},
		{"negative id", Call{Response: []byte(`{"prompt_token_ids":[1,-2],"choices":[{"index":0,"token_ids":[-1],"logprobs":{"content":[{"logprob":-1}]}}]}`)},
			0, 0, "malformed_token_field,malformed_token_field,logprobs_without_ids"},
		{"negative logprob entry id", Call{Response: []byte(`{"choices":[{"index":0,"logprobs":{"content":[{"id":-5,"token":"a","logprob":-1}]}}]}`)},
			0, 0, "malformed_token_field,logprobs_without_ids"},
		{"fractional id", Call{Response: []byte(`{"choices":[{"index":0,"token_ids":[1.0]}]}`)},
			0, 0, "malformed_token_field"},
		{"id as a string", Call{Response: []byte(`{"choices":[{"index":0,"token_ids":["7"]}]}`)},
			0, 0, "malformed_token_field"},
		{"nested lists", Call{Response: []byte(`{"prompt_token_ids":[[1],[2]],"choices":[{"index":0,"token_ids":[[1]]}]}`)},
			0, 0, "malformed_token_field,malformed_token_field"},
		{"logprob as a NaN string", Call{Response: []byte(`{"choices":[{"index":0,"token_ids":[1,2],"logprobs":{"content":[{"logprob":"NaN"},{"logprob":-1}]}}]}`)},
			2, 0, "malformed_token_field,null_logprob"},
		{"logprob as an object", Call{Response: []byte(`{"choices":[{"index":0,"token_ids":[1],"logprobs":{"content":[{"logprob":{"v":1}}]}}]}`)},
			1, 0, "malformed_token_field,null_logprob"},
		{"logprobs a number", Call{Response: []byte(`{"choices":[{"index":0,"token_ids":[1],"logprobs":3}]}`)},
			1, 0, "malformed_token_field,no_logprobs"},
		{"duplicate keys: the last counts", Call{Response: []byte(`{"choices":[{"index":0,"token_ids":"x","token_ids":[1],"logprobs":{"content":[{"logprob":-1}]}}]}`)},
			1, 0, ""},
		{"choices at odd indexes", Call{Response: []byte(`{"choices":[{"index":9,"token_ids":[1],"logprobs":{"content":[{"logprob":-1}]}},{"index":-3,"token_ids":[2,3],"logprobs":{"content":[{"logprob":-1},{"logprob":-1}]}}],"usage":{"completion_tokens":3}}`)},
			2, 0, ""},
		{"same index twice", Call{Response: []byte(`{"choices":[{"index":0,"token_ids":[1],"logprobs":{"content":[{"logprob":-1}]}},{"index":0,"token_ids":[2],"logprobs":{"content":[{"logprob":-1}]}}],"usage":{"completion_tokens":2}}`)},
			1, 0, "malformed_token_field,completion_count_mismatch"},
		{"truncated body", Call{Response: []byte(`{"choices":[{"index":0,"token_ids":[1,2`)},
			0, 0, "unreadable_response"},
		{"truncated stream", Call{ResponseRaw: []byte("data: {\"prompt_token_ids\":[1],\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"token_ids\":[5],\"logprobs\":{\"content\":[{\"logprob\":-1}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"tok")},
			1, 1, ""},
		{"usage counts of wrong type", Call{Response: []byte(`{"choices":[{"index":0,"token_ids":[1],"logprobs":{"content":[{"logprob":-1}]}}],"usage":{"completion_tokens":"1","prompt_tokens":-4}}`)},
			1, 0, ""},
		{"sglext output_ids ragged", Call{Response: []byte(`{"sglext":{"output_ids":[[1,2],7]}}`)},
			2, 0, "malformed_token_field,no_logprobs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Read(tc.call)
			var codes []string
			for _, f := range got.Findings {
				codes = append(codes, f.Code)
			}
			if len(got.GenerationTokenIDs()) != tc.gen || len(got.PromptTokenIDs) != tc.prompt || strings.Join(codes, ",") != tc.findings {
				t.Errorf("got %d generated, %d prompt ids, findings %+v; want %d, %d, %s", len(got.GenerationTokenIDs()), len(got.PromptTokenIDs), got.Findings, tc.gen, tc.prompt, tc.findings)
			}
		})
	}
}
