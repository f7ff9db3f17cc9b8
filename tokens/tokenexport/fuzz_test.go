package tokenexport

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// FuzzFromLine feeds arbitrary capture lines: FromLine fails only with an error (never a panic),
// gives a row only for a JSON object (a member of the wrong type is a finding, not a failure),
// and a row it returns encodes as JSON and turns into a Gym record or says why not.
func FuzzFromLine(f *testing.F) {
	f.Add([]byte(`{"model_call_id":"m","dialect":"chat","response":{"choices":[{"index":0,"token_ids":[1],"message":{"role":"assistant","content":"x"},"logprobs":{"content":[{"logprob":-1}]}}]},"token_capture":{"prompt_token_ids":[1,2]}}`))
	f.Add([]byte(`{"dialect":"chat","response_raw":"data: {\"prompt_token_ids\":[1]}\n\ndata: {\"choices\":[{\"index\":0,\"token_ids\":[-1]}]}\n\n","status_code":200}`))
	f.Add([]byte(`{"dialect":"responses","response":{"output":[{"type":"message","generation_token_ids":[1],"generation_log_probs":[-0.5],"prompt_token_ids":[3]}]}}`))
	f.Add([]byte(`{"status_code":"200","completed_at":"x"}`))
	f.Add([]byte(`{"model_call_id":1,"dialect":{"d":"chat"},"status_code":"200","response":{"choices":[{"index":0,"token_ids":[1],"logprobs":{"content":[{"logprob":-1}]}}]},"token_capture":{"prompt_token_ids":[1]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := FromLine("r", 0, b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "decode capture line") {
				t.Fatalf("error %v", err)
			}
			return
		}
		if !json.Valid(b) || !jsonscan.IsObject(jsonscan.TrimWS(b)) {
			t.Fatalf("a line that is not a JSON object gave a row")
		}
		for _, f := range r.Findings {
			if f.Code == FindingMalformedCaptureField && f.Choice != -1 {
				t.Fatalf("capture field finding about choice %d", f.Choice)
			}
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
