//go:build unix

// These tests write capture dirs, which the store does on Linux and macOS only.

package capture_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/rollout"
)

// An exchange is encoded as one compact line in NeMo Gym's key order: floats always carry a
// fraction, null stands for unknown, and request_raw / response_raw appear only when set. The
// provenance keys come after Gym's, each only when known.
func ExampleEncodeExchange() {
	ttft := 12.5
	status := 200
	source := "upstream"
	line, err := capture.EncodeExchange(&capture.Exchange{
		ModelCallID:    "0123456789abcdef0123456789abcdef",
		Dialect:        "chat",
		ModelRef:       &rollout.ModelServerRef{Type: rollout.ModelServerRefType, Name: "policy_model"},
		StartedAt:      1795968571,
		CompletedAt:    1795968571.25,
		LatencyMS:      capture.RoundMS(250.004),
		LatencyTTFTMS:  &ttft,
		StatusCode:     &status,
		Request:        json.RawMessage(`{"model": "m", "messages": []}`),
		Response:       json.RawMessage(`{"id":"c1","choices":[]}`),
		ResponseSource: &source,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(line))
	// Output:
	// {"model_call_id":"0123456789abcdef0123456789abcdef","dialect":"chat","model_ref":{"type":"responses_api_models","name":"policy_model"},"started_at":1795968571.0,"completed_at":1795968571.25,"latency_ms":250.0,"latency_ttft_ms":12.5,"status_code":200,"error_category":null,"request":{"model":"m","messages":[]},"response":{"id":"c1","choices":[]},"response_source":"upstream"}
}

// The tolerant read returns every readable line with its capture index and reports the others as
// damage; a damaged line keeps its index, a blank line takes none.
func ExampleStore_ReadAvailable() {
	dir, err := os.MkdirTemp("", "capture-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := capture.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range []string{
		`{"model_call_id":"a","dialect":"chat"}`,
		`{"model_call_id":"b", NaN}`, // not JSON: damage
		` `,                          // blank: skipped, no index
		`{"model_call_id":"c","dialect":"messages"}`,
	} {
		if err := store.Append("task-1", []byte(line)); err != nil {
			log.Fatal(err)
		}
	}
	entries, damaged, err := store.ReadAvailable("task-1")
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Printf("index %d, line %d: %s\n", e.Index, e.Line, e.Data)
	}
	for _, d := range damaged {
		fmt.Printf("damaged: index %d, line %d\n", d.Index, d.Line)
	}
	// The strict read stops at the damaged line instead.
	_, err = store.Read("task-1")
	var le *capture.LineError
	if errors.As(err, &le) {
		fmt.Println("strict read stops at line", le.Line)
	}
	// Output:
	// index 0, line 1: {"model_call_id":"a","dialect":"chat"}
	// index 2, line 4: {"model_call_id":"c","dialect":"messages"}
	// damaged: index 1, line 2
	// strict read stops at line 2
}
