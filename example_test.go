package modelcalls_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/rollout"
)

// exampleStore returns a capture store in a fresh temp dir and a function that removes it.
func exampleStore() (*capture.Store, func()) {
	dir, err := os.MkdirTemp("", "modelcalls-example")
	if err != nil {
		log.Fatal(err)
	}
	store, err := capture.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	return store, func() { os.RemoveAll(dir) }
}

func ptr[T any](v T) *T { return &v }

// A Merger attaches ng_model_call_capture to each rollout record of a JSONL stream: the rollout id
// comes from the record's _ng_* fields ("3-0" here), the calls from that rollout's capture file.
// Every other byte of the record is kept.
func ExampleMerger() {
	store, cleanup := exampleStore()
	defer cleanup()
	// What the gateway writes for one Chat Completions call of rollout 3-0.
	err := store.AppendExchange("3-0", &capture.Exchange{
		ModelCallID:    "0123456789abcdef0123456789abcdef",
		Dialect:        "chat",
		ModelRef:       &rollout.ModelServerRef{Type: rollout.ModelServerRefType, Name: "policy_model"},
		StartedAt:      1795968571.5,
		CompletedAt:    1795968572,
		LatencyMS:      500.25,
		LatencyTTFTMS:  ptr(120.0),
		StatusCode:     ptr(200),
		Request:        json.RawMessage(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`),
		Response:       json.RawMessage(`{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":8}}}`),
		ResponseSource: ptr("upstream"),
	})
	if err != nil {
		log.Fatal(err)
	}

	m, err := modelcalls.NewMerger([]string{store.Dir()}, modelcalls.MergeOptions{})
	if err != nil {
		log.Fatal(err)
	}
	out, res, err := m.Merge(context.Background(), []byte(`{"_ng_task_index": 3, "_ng_rollout_index": 0, "reward": 1.0}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.RolloutID, res.Calls, res.Damaged, len(res.Gaps))
	var rec struct {
		Reward     json.RawMessage `json:"reward"`
		Attachment json.RawMessage `json:"ng_model_call_capture"`
	}
	if err := json.Unmarshal(out, &rec); err != nil {
		log.Fatal(err)
	}
	var pretty bytes.Buffer
	json.Indent(&pretty, rec.Attachment, "", "  ")
	fmt.Println(string(rec.Reward))
	fmt.Println(pretty.String())
	// Output:
	// 3-0 1 0 0
	// 1.0
	// {
	//   "rollout_id": "3-0",
	//   "metrics": {
	//     "tokens_in": 12,
	//     "tokens_out": 3,
	//     "tokens_reasoning": null,
	//     "tokens_total": 15,
	//     "cached_tokens": 8,
	//     "latency_total_ms": 500.25,
	//     "num_calls": 1
	//   },
	//   "calls": [
	//     {
	//       "model_call_id": "0123456789abcdef0123456789abcdef",
	//       "response_id": "chatcmpl-1",
	//       "call_index": 0,
	//       "model_ref": {
	//         "type": "responses_api_models",
	//         "name": "policy_model"
	//       },
	//       "model": "m",
	//       "dialect": "chat",
	//       "status_code": 200,
	//       "response_status": null,
	//       "finish_reason": "stop",
	//       "started_at": 1795968571.5,
	//       "completed_at": 1795968572.0,
	//       "tokens_in": 12,
	//       "tokens_out": 3,
	//       "tokens_reasoning": null,
	//       "tokens_total": 15,
	//       "tool_calls": [],
	//       "reasoning_content": null,
	//       "cache_hit": true,
	//       "cached_tokens": 8,
	//       "cache_creation_tokens": null,
	//       "error_category": null,
	//       "latency_total_ms": 500.25,
	//       "latency_ttft_ms": 120.0,
	//       "response_source": "upstream",
	//       "upstream_attempted": null,
	//       "upstream_status_code": null,
	//       "local_response_reason": null,
	//       "client_session_id": null,
	//       "client_assistant_message_id": null
	//     }
	//   ]
	// }
}

// ReadRecords builds one ModelCallRecord per capture line of a rollout, in append order. Here an
// Anthropic Messages call: its cache reads and writes are counted outside input_tokens, so they are
// folded into tokens_in (10 + 100 + 20).
func ExampleReadRecords() {
	store, cleanup := exampleStore()
	defer cleanup()
	err := store.Append("r1", []byte(`{"model_call_id":"aa","dialect":"messages","model_ref":null,"started_at":1.0,"completed_at":2.0,"latency_ms":1000.0,"latency_ttft_ms":null,"status_code":200,"error_category":null,"request":{"model":"claude"},"response":{"id":"msg_1","type":"message","model":"claude","stop_reason":"tool_use","content":[{"type":"thinking","thinking":"look it up"},{"type":"tool_use","id":"tu_1","name":"search","input":{"q":"go"}}],"usage":{"input_tokens":10,"cache_read_input_tokens":100,"cache_creation_input_tokens":20,"output_tokens":7}}}`))
	if err != nil {
		log.Fatal(err)
	}
	records, err := modelcalls.ReadRecords(store, "r1")
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range records {
		fmt.Println(*r.Dialect, *r.FinishReason, *r.TokensIn, *r.TokensOut, *r.TokensTotal, *r.CachedTokens, *r.CacheCreationTokens, *r.CacheHit)
		fmt.Println(*r.ReasoningContent)
		tc, _ := json.Marshal(r.ToolCalls)
		fmt.Println(string(tc))
		fmt.Println(r.TokensReasoning == nil, r.ModelRef == nil, r.LatencyTTFTMS == nil)
	}
	// Output:
	// messages tool_use 130 7 137 100 20 true
	// look it up
	// [{"call_id":"tu_1","name":"search","arguments":{"q":"go"}}]
	// true true true
}

// ReadAvailableRecords keeps going past damaged lines: they are counted, and keep their capture
// index, so call_index shows where they were. ReadRecords stops at the first one.
func ExampleReadAvailableRecords() {
	store, cleanup := exampleStore()
	defer cleanup()
	for _, line := range []string{
		`{"model_call_id":"a","dialect":"chat","status_code":200}`,
		`{"model_call_id":"b","dialect":"chat","status_code":"200"}`, // a string status: damaged
		`{"model_call_id":"c","dialect":"chat","status_code":429,"error_category":"rate_limit"}`,
	} {
		if err := store.Append("r2", []byte(line)); err != nil {
			log.Fatal(err)
		}
	}
	records, damaged, err := modelcalls.ReadAvailableRecords(store, "r2")
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range records {
		category := "null"
		if r.ErrorCategory != nil {
			category = *r.ErrorCategory
		}
		fmt.Println(r.CallIndex, *r.ModelCallID, *r.StatusCode, category)
	}
	fmt.Println("damaged:", damaged)

	_, err = modelcalls.ReadRecords(store, "r2")
	var le *capture.LineError
	fmt.Println(errors.As(err, &le), le.Line, errors.Is(err, modelcalls.ErrInvalidExchange))
	// Output:
	// 0 a 200 null
	// 2 c 429 rate_limit
	// damaged: 1
	// true 2 true
}
