package dialect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// gymCapture is one exchange NeMo Gym's own capture middleware wrote for a fixture stream
// (testdata/gym, extracted from the repository's testdata/gym-capture, see testdata/README.md).
type gymCapture struct {
	RolloutID     string          `json:"rollout_id"`
	Fixture       string          `json:"fixture"`
	Dialect       string          `json:"dialect"`
	StatusCode    int             `json:"status_code"`
	ErrorCategory *string         `json:"error_category"`
	Response      json.RawMessage `json:"response"`
}

// gymDifferences are the fixtures where we expect to disagree with NeMo Gym, and why.
// The reconstructed response agrees everywhere; only the error category differs.
var gymDifferences = map[string]string{
	// The recording ends without the blank line after message_stop. Gym never dispatches that
	// event for terminal detection (stream_truncated); we parse an unterminated last event at end
	// of stream, so the stream completed.
	"anthropic_messages/stream_tool_use_input_json_delta.sse":       "stream_truncated -> null",
	"anthropic_messages/stream_truncated_tool_input_max_tokens.sse": "stream_truncated -> null",
}

// gymResponseDifferences are the places where our reconstruction intentionally differs from
// NeMo Gym's: we rebuild a Messages stream as the non-streaming API would answer it, Gym drops
// signature_delta and streams input only into tool_use blocks. Each entry maps a dotted path of
// the response to the value we write there (compact JSON); with those values put into Gym's
// reconstruction, the two must agree everywhere.
var gymResponseDifferences = map[string]map[string]string{
	"anthropic_messages/stream_thinking_signature.sse": {
		"content.0.signature": `"EvMCCkYICxgCKkCHP2cSuEdcJK/0rFwqES/ecn+VurRpNTwI4XNyM0vnNfGsc9OmE8YYHauwBZ/uaRpmlEn2I4/kszHlcpptO82JEgyRMSbPkJYaegxYF3AaDHZbSm9EzZ6CM+YtliIw3iNVP/ilYrfoneo8S2+ad/5xSC62nKbk6joLtKmqXgXwYFJRpjIUjM2V7EGReOPRKtoBKfNHVmdNf7SeMhHalX/ObSeJ1G/NjDyGQAsDjyHGd7uY1r5gAIn3Cpdv5r+gHYJmWT+w2uiKZsBDRoSf4O3Km0l752EhPD4InEhqpCKyqhbUZ3dt5+JVKQHk2iyTBhQMB/XBYgZTstIpRqQRXU5ypcrydgnqj3mD1G9C7YC0ZTCNvFluAx0OL8q+cQwufgfqKquLEf2+XMYzhx9jYkVFEpnf/s1nx6gNBATKfF3Dmrs2r4tWu2QJB+FjlRuDp/8dxUxgJbmyhGxb7XsYeb1vgb7wwzDvP/UhjfQYAQ=="`,
	},
	"anthropic_messages/stream_message_delta_cumulative_cache.sse": {
		"content.0.input": `{"command":"for n in $(seq 1 12); do echo \"$n: $((n*n))\"; done"}`,
		"content.2.input": `{"command":"sum=0; for n in $(seq 1 12); do sum=$((sum + n*n)); done; echo \"Sum: $sum\""}`,
	},
}

// withValues returns doc with the raw value at each dotted path replaced by the given one.
func withValues(t *testing.T, doc []byte, values map[string]string) []byte {
	t.Helper()
	for path, v := range values {
		old := at(t, doc, path) // a subslice of doc
		off := cap(doc) - cap(old)
		doc = append(append(append([]byte(nil), doc[:off]...), v...), doc[off+len(old):]...)
	}
	return doc
}

// categoryOf is the error category the gateway derives from a 200 stream's terminal
// (after the status: an error event gives upstream_error, response.incomplete gives incomplete,
// a stream without a terminal event gives stream_truncated, as NeMo Gym's middleware decides).
func categoryOf(t Terminal) string {
	switch t {
	case TerminalError:
		return "upstream_error"
	case TerminalIncomplete:
		return "incomplete"
	case TerminalNone:
		return "stream_truncated"
	}
	return "null"
}

// TestStreamMatchesGym compares our reassembly of every fixture stream with the reconstruction
// NeMo Gym itself stored for it: same members in the same order, same strings, numbers equal in
// value and in kind (integer literal or not). The error category implied by our terminal must
// match Gym's except where gymDifferences says why not.
func TestStreamMatchesGym(t *testing.T) {
	files, err := filepath.Glob("testdata/gym/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Gym captures: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var g gymCapture
			if err := json.Unmarshal(b, &g); err != nil {
				t.Fatal(err)
			}
			stream := filepath.Join(fixturesDir, filepath.FromSlash(g.Fixture))
			body, err := os.ReadFile(stream)
			if err != nil {
				t.Fatal(err)
			}
			d := Dialect(g.Dialect)
			r := runStream(d, body, 97) // Gym was fed 97-byte chunks too
			got := r.response
			if got == nil {
				got = []byte("null")
			}
			gym := g.Response
			if diff, ok := gymResponseDifferences[g.Fixture]; ok {
				for path, v := range diff {
					if string(at(t, got, path)) != v {
						t.Fatalf("%s = %s, want %s", path, at(t, got, path), v)
					}
				}
				gym = withValues(t, gym, diff)
			}
			if err := sameJSON(got, gym); err != nil {
				t.Fatalf("rollout %s: reconstruction differs from Gym's: %v\n ours %s\n gym  %s", g.RolloutID, err, got, g.Response)
			}
			gymCat := "null"
			if g.ErrorCategory != nil {
				gymCat = *g.ErrorCategory
			}
			ours := categoryOf(r.terminal)
			if diff, ok := gymDifferences[g.Fixture]; ok {
				if want := gymCat + " -> " + ours; want != diff {
					t.Fatalf("expected difference %q, got %q", diff, want)
				}
				return
			}
			if ours != gymCat {
				t.Fatalf("error category %s, Gym says %s", ours, gymCat)
			}
		})
	}
}

// sameJSON compares two JSON texts token by token: objects must have the same members in the
// same order, strings the same decoded text, numbers the same value and the same kind (Python
// writes ints without a '.', floats with one or an exponent).
func sameJSON(a, b []byte) error {
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	for i := 0; ; i++ {
		ta, ea := da.Token()
		tb, eb := db.Token()
		if errors.Is(ea, io.EOF) && errors.Is(eb, io.EOF) {
			return nil
		}
		if ea != nil || eb != nil {
			return fmt.Errorf("token %d: %v / %v", i, ea, eb)
		}
		na, aNum := ta.(json.Number)
		nb, bNum := tb.(json.Number)
		if aNum && bNum {
			fa, _ := strconv.ParseFloat(string(na), 64)
			fb, _ := strconv.ParseFloat(string(nb), 64)
			if fa != fb || isIntLiteral(string(na)) != isIntLiteral(string(nb)) {
				return fmt.Errorf("token %d: number %s vs %s", i, na, nb)
			}
			continue
		}
		if ta != tb {
			return fmt.Errorf("token %d: %#v vs %#v", i, ta, tb)
		}
	}
}

func isIntLiteral(s string) bool { return !strings.ContainsAny(s, ".eE") }

// TestFixtureKeyValues checks the reassembled fixtures against the key values
// their recordings hold (tokens, tool call ids and arguments, finish reasons; see
// ../testdata/fixtures/README.md), read from the response by path. Numbers are compared as literals, so a count must
// stay an integer literal.
func TestFixtureKeyValues(t *testing.T) {
	tests := []struct {
		fixture string
		want    map[string]string // path -> compact JSON value
	}{
		{"openai_responses/stream_reasoning_function_call.sse", map[string]string{
			"status": `"completed"`, "usage.input_tokens": "53", "usage.output_tokens": "469",
			"usage.total_tokens": "522", "usage.output_tokens_details.reasoning_tokens": "448",
			"output.1.type": `"function_call"`, "output.1.call_id": `"call_CWXgs68YprAjp6t0371hiPOI"`,
			"output.1.name": `"final_result"`, "output.1.arguments": `"{\"result\":6666}"`,
			"temperature": "1.0",
		}},
		{"openai_responses/stream_reasoning_summary_function_call.sse", map[string]string{
			"usage.input_tokens": "134", "usage.output_tokens": "28", "usage.total_tokens": "162",
			"usage.output_tokens_details.reasoning_tokens": "0",
			"output.0.summary.0.type":                      `"summary_text"`,
			"output.1.call_id":                             `"call_AB6AaRZ1FYZB2RwS6A5vbdqn"`, "output.1.name": `"calculator"`,
			"output.1.arguments": `"{\"a\":12,\"b\":7,\"op\":\"add\"}"`,
		}},
		{"openai_responses/stream_error_event_then_failed.sse", map[string]string{
			"status": `"failed"`, "usage": "null", "error.code": `"insufficient_quota"`, "output": "[]",
		}},
		{"openai_chat/stream_tool_call_usage_only_chunk.sse", map[string]string{
			"choices.0.finish_reason": `"tool_calls"`, "choices.0.message.tool_calls.0.id": `"call_c91SqDXlYFuETYv8mUHzz6pp"`,
			"choices.0.message.tool_calls.0.function.arguments": `"{\"city\":\"Edinburgh\",\"country\":\"UK\",\"units\":\"c\"}"`,
			"usage.prompt_tokens":                               "76", "usage.completion_tokens": "24", "usage.total_tokens": "100",
		}},
		{"openai_chat/stream_parallel_tool_calls_usage_only_chunk.sse", map[string]string{
			"choices.0.message.tool_calls.0.id":            `"call_JMW1whyEaYG438VE1OIflxA2"`,
			"choices.0.message.tool_calls.1.id":            `"call_DNYTawLBoN8fj3KN6qU9N1Ou"`,
			"choices.0.message.tool_calls.1.function.name": `"get_stock_price"`,
			"usage.prompt_tokens":                          "149", "usage.completion_tokens": "60", "usage.total_tokens": "209",
		}},
		{"openai_chat/stream_azure_filter_chunk_reasoning_tokens.sse", map[string]string{
			"model": `"gpt-5-nano-2025-08-07"`, "id": `"chatcmpl-CYPS1lijGoK8gd9lYzY3r9Sx50nbt"`,
			"choices.0.message.content": `"Capital of Denmark."`, "choices.0.finish_reason": `"stop"`,
			"usage.prompt_tokens": "15", "usage.completion_tokens": "78", "usage.total_tokens": "93",
			"usage.completion_tokens_details.reasoning_tokens": "64",
		}},
		{"openai_chat/stream_tool_call_empty_id_continuations.sse", map[string]string{
			"choices.0.message.tool_calls.0.id":                 `"call_eee11723464a4b9eb8cee71d"`,
			"choices.0.message.tool_calls.0.function.arguments": `"{\"location\": \"San Francisco\"}"`,
			"usage.prompt_tokens":                               "295", "usage.completion_tokens": "22", "usage.total_tokens": "317",
			"usage.prompt_tokens_details.cached_tokens": "0",
		}},
		{"openai_chat/stream_usage_on_finish_chunk.sse", map[string]string{
			"choices.0.message.tool_calls.0.id": `"tk85n1k4m"`, "choices.0.message.tool_calls.0.function.arguments": `"{}"`,
			"usage.prompt_tokens": "210", "usage.completion_tokens": "15", "usage.total_tokens": "225",
			"usage.queue_time": "0.041520249",
		}},
		{"openai_chat/stream_keepalive_comments_reasoning_midstream_error.sse", map[string]string{
			"choices.0.finish_reason": `"length"`, "choices.0.message.content": "null",
			"choices.0.message.reasoning_content": `"We need to respond to a greeting. The user"`,
			"usage.prompt_tokens":                 "43", "usage.completion_tokens": "10", "usage.total_tokens": "53",
			"usage.completion_tokens_details.reasoning_tokens": "11",
		}},
		{"openai_chat/compat_deepseek_stream_reasoning_content_tool_call.sse", map[string]string{
			"usage.prompt_tokens": "339", "usage.completion_tokens": "83", "usage.total_tokens": "422",
			"usage.completion_tokens_details.reasoning_tokens": "39", "usage.prompt_tokens_details.cached_tokens": "320",
			"choices.0.message.tool_calls.0.function.arguments": `"{\"location\": \"San Francisco\"}"`,
		}},
		{"anthropic_messages/stream_tool_use_input_json_delta.sse", map[string]string{
			"stop_reason": `"tool_use"`, "usage.input_tokens": "377", "usage.output_tokens": "65",
			"content.1.id": `"toolu_01NRLabsLyVHZPKxbKvkfSMn"`, "content.1.input": `{"location":"Paris"}`,
		}},
		{"anthropic_messages/stream_thinking_signature.sse", map[string]string{
			"usage.input_tokens": "43", "usage.output_tokens": "282", "content.0.type": `"thinking"`,
			"content.1.type": `"text"`,
		}},
		{"anthropic_messages/stream_redacted_thinking.sse", map[string]string{
			"usage.input_tokens": "92", "usage.output_tokens": "189", "content.0.type": `"redacted_thinking"`,
			"content.1.type": `"redacted_thinking"`, "content.2.type": `"text"`,
		}},
		{"anthropic_messages/stream_message_delta_cumulative_cache.sse", map[string]string{
			"usage.input_tokens": "6", "usage.cache_creation_input_tokens": "3337",
			"usage.cache_read_input_tokens": "6289", "usage.output_tokens": "198",
			"usage.output_tokens_details.thinking_tokens": "0", "content.0.type": `"server_tool_use"`,
		}},
		{"anthropic_messages/stream_message_delta_input_tokens_differs.sse", map[string]string{
			"usage": `{"input_tokens":61,"output_tokens":2}`, "stop_reason": `"end_turn"`,
		}},
		{"anthropic_messages/stream_truncated_tool_input_max_tokens.sse", map[string]string{
			"stop_reason": `"max_tokens"`, "usage.input_tokens": "450", "usage.output_tokens": "124",
			"content.1.type": `"tool_use"`, "content.1.id": `"toolu_01EKqbqmZrGRXy18eN7m9kvY"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			file := filepath.Join(fixturesDir, filepath.FromSlash(tt.fixture))
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			resp := runStream(fixtureDialect(t, file), body, 7).response
			for path, want := range tt.want {
				if got := string(at(t, resp, path)); got != want {
					t.Errorf("%s = %s, want %s", path, got, want)
				}
			}
		})
	}
}

// at returns the raw value at a dotted path (object keys and array indices) of a JSON document.
func at(t *testing.T, doc []byte, path string) []byte {
	t.Helper()
	cur := doc
	for _, seg := range strings.Split(path, ".") {
		var next []byte
		if i, err := strconv.Atoi(seg); err == nil && jsonscan.IsArray(cur) {
			k := 0
			jsonscan.EachElement(cur, func(v []byte) bool {
				if k == i {
					next = v
				}
				k++
				return true
			})
		} else {
			next = jsonscan.Lookup(cur, seg)
		}
		if next == nil {
			t.Fatalf("path %s: no %q in %.200s", path, seg, cur)
		}
		cur = next
	}
	return cur
}
