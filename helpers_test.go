package modelcalls

import (
	"fmt"
)

// Test helpers shared by the package's tests.

// ptr returns a pointer to v (for expected values in tables).
func ptr[T any](v T) *T { return &v }

// Lines for hand-built capture files: okLine is a good exchange (ok fills its model_call_id and
// prompt tokens), badModelRef one whose record cannot be built.
const (
	okLine      = `{"model_call_id":"%s","dialect":"chat","model_ref":{"type":"responses_api_models","name":"p"},"started_at":1.0,"completed_at":2.0,"latency_ms":%s,"latency_ttft_ms":null,"status_code":200,"error_category":null,"request":{"model":"m"},"response":{"usage":{"prompt_tokens":%d,"completion_tokens":1}}}`
	badModelRef = `{"model_call_id":"bad-ref","dialect":"chat","model_ref":{"type":"agents","name":"p"},"status_code":200}`
)

func ok(id string, tokens int) string { return fmt.Sprintf(okLine, id, "1.5", tokens) }

// payloadFields are the JSON names of the four payload fields a merge writes only with payloads.
var payloadFields = [...]string{"request", "response", "request_raw", "response_raw"}
