package tokenexport

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzFromLine feeds arbitrary capture lines: FromLine fails only with an error (never a panic),
// and a row it returns encodes as JSON and turns into a Gym record or says why not.
func FuzzFromLine(f *testing.F) {
	f.Add([]byte(`{"model_call_id":"m","dialect":"chat","response":{"choices":[{"index":0,"token_ids":[1],"message":{"role":"assistant","content":"x"},"logprobs":{"content":[{"logprob":-1}]}}]},"token_capture":{"prompt_token_ids":[1,2]}}`))
	f.Add([]byte(`{"dialect":"chat","response_raw":"data: {\"prompt_token_ids\":[1]}\n\ndata: {\"choices\":[{\"index\":0,\"token_ids\":[-1]}]}\n\n","status_code":200}`))
	f.Add([]byte(`{"dialect":"responses","response":{"output":[{"type":"message","generation_token_ids":[1],"generation_log_probs":[-0.5],"prompt_token_ids":[3]}]}}`))
	f.Add([]byte(`{"status_code":"200","completed_at":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := FromLine("r", 0, b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "decode capture line") {
				t.Fatalf("error %v", err)
			}
			return
		}
		if _, err := json.Marshal(&r); err != nil {
			t.Fatalf("row does not encode: %v", err)
		}
		if g, ok := r.Gym(); ok {
			if _, err := json.Marshal(g); err != nil {
				t.Fatalf("gym record does not encode: %v", err)
			}
		}
	})
}
