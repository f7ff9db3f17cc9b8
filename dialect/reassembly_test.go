package dialect

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// body frames payloads as SSE events: a payload starting with "event:" or ":" is written as
// given (plus the blank line), anything else as one data line.
func body(payloads ...string) []byte {
	var b strings.Builder
	for _, p := range payloads {
		if strings.HasPrefix(p, "event:") || strings.HasPrefix(p, ":") {
			b.WriteString(p)
		} else {
			b.WriteString("data: " + p)
		}
		b.WriteString("\n\n")
	}
	return []byte(b.String())
}

type reassemblyCase struct {
	name string
	d    Dialect
	in   []byte
	want string // compact JSON, "" for nil
	term Terminal
}

func runReassemblyCases(t *testing.T, tests []reassemblyCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []int{0, 1, 5} {
				r := runStream(tt.d, tt.in, n)
				if string(r.response) != tt.want {
					t.Fatalf("chunks of %d:\n got %s\nwant %s", n, r.response, tt.want)
				}
				if r.terminal != tt.term {
					t.Fatalf("chunks of %d: terminal %v, want %v", n, r.terminal, tt.term)
				}
			}
			if tt.want != "" && !json.Valid([]byte(tt.want)) {
				t.Fatalf("test expectation is not JSON: %s", tt.want)
			}
		})
	}
}

// TestChatReassembly covers NeMo Gym's chat reconstruction and our differences (per-choice n>1,
// tool-call id rules), CRLF streams with the reasoning alias, split tool arguments and a
// usage-only final chunk, and streams with nothing to rebuild.
func TestChatReassembly(t *testing.T) {
	runReassemblyCases(t, []reassemblyCase{
		{"CRLF stream, reasoning alias, split arguments, usage-only last chunk (item 32)", Chat,
			[]byte("data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning\":\"think\"}}]}\r\n\r\n" +
				"data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"ing\",\"reasoning\":\"ignored\",\"content\":\"Hi\"}}]}\r\n\r\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\r\n\r\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\r\n\r\n" +
				"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":10.0,\"total_tokens\":2e1}}\r\n\r\n" +
				"data: [DONE]\r\n\r\n"),
			`{"object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","reasoning_content":"thinking","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}],"id":"c1","usage":{"prompt_tokens":10,"completion_tokens":10.0,"total_tokens":2e1}}`,
			TerminalComplete},
		{"a tool call whose arguments were never sent gets \"{}\", as the non-streaming API answers", Chat,
			body(`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"now"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","function":{"name":"later","arguments":""}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"x\":1}"}}]},"finish_reason":"tool_calls"}]}`,
				`[DONE]`),
			`{"object":"chat.completion","model":null,"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"now","arguments":"{}"}},{"id":"call_b","type":"function","function":{"name":"later","arguments":"{\"x\":1}"}}]},"finish_reason":"tool_calls"}]}`,
			TerminalComplete},
		{"n>1: one choice per index, each with its own finish_reason", Chat,
			body(`{"choices":[{"index":1,"delta":{"role":"assistant","content":"B"}},{"index":0,"delta":{"role":"assistant","content":"A"}}]}`,
				`{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}`,
				`{"choices":[{"index":1,"delta":{"content":"b"},"finish_reason":"length"}]}`, `[DONE]`),
			`{"object":"chat.completion","model":null,"choices":[{"index":0,"message":{"role":"assistant","content":"Aa"},"finish_reason":"stop"},{"index":1,"message":{"role":"assistant","content":"Bb"},"finish_reason":"length"}]}`,
			TerminalComplete},
		{"parallel calls sent whole with index 0 are separate calls", Chat,
			body(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"g","arguments":"{\"x\":"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"2}"}}]}}]}`),
			`{"object":"chat.completion","model":null,"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"g","arguments":"{\"x\":2}"}}]},"finish_reason":null}]}`,
			TerminalNone},
		{"delta without index continues the last call; a new id without index starts one", Chat,
			body(`{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"p\""}}]}}]}`,
				`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]}`,
				`{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g"}}]}}]}`,
				`{"choices":[{"delta":{"tool_calls":[{"index":null,"function":{"arguments":"[]"}}]}}]}`),
			`{"object":"chat.completion","model":null,"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"p\":1}"}},{"id":"b","type":"function","function":{"name":"g","arguments":"[]"}}]},"finish_reason":null}]}`,
			TerminalNone},
		{"empty and repeated ids continue; a later first id is adopted", Chat,
			body(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"name":"late","arguments":"x"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"L","function":{"arguments":"y"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"","function":{"arguments":"z"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"L","function":{"arguments":"w"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"E","function":{"name":"early","arguments":""}}]}}]}`),
			`{"object":"chat.completion","model":null,"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"E","type":"function","function":{"name":"early","arguments":"{}"}},{"id":"L","type":"function","function":{"name":"late","arguments":"xyzw"}}]},"finish_reason":null}]}`,
			TerminalNone},
		{"truthy name replaces, empty fields change nothing", Chat,
			body(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"first","arguments":"1"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"second","arguments":""}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"","arguments":"2"}}]}}]}`),
			`{"object":"chat.completion","model":null,"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"second","arguments":"12"}}]},"finish_reason":null}]}`,
			TerminalNone},
		{"model and usage only when truthy; id whenever a string", Chat,
			body(`{"id":"x","model":"m1","usage":{"total_tokens":3},"choices":[{"index":0,"delta":{"content":"a"}}]}`,
				`{"id":"","model":"","usage":null,"choices":[]}`,
				`{"id":5,"model":null,"usage":{}}`),
			`{"object":"chat.completion","model":"m1","choices":[{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":null}],"id":"","usage":{"total_tokens":3}}`,
			TerminalNone},
		{"usage-only stream reconstructs to nothing (item 34)", Chat,
			body(`{"choices":[],"usage":{"prompt_tokens":1}}`, `[DONE]`), "", TerminalComplete},
		{"empty body", Chat, nil, "", TerminalNone},
		{"unparseable and non-object payloads", Chat, body(`{not json`, `[1,2]`, `"s"`, `{"choices":[{"delta":{"content":NaN}}]}`), "", TerminalNone},
		{"escapes decoded and re-encoded like orjson", Chat,
			body(`{"choices":[{"delta":{"content":"\u003cb\u003e \u00e9 \"q\" \\ \n\t\u0001 \u2028"}}]}`),
			"{\"object\":\"chat.completion\",\"model\":null,\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"<b> é \\\"q\\\" \\\\ \\n\\t\\u0001 \u2028\"},\"finish_reason\":null}]}",
			TerminalNone},
		{"duplicate keys: last value wins", Chat,
			body(`{"model":"a","model":"b","choices":[{"index":0,"delta":{"content":"x","content":"y"}}]}`),
			`{"object":"chat.completion","model":"b","choices":[{"index":0,"message":{"role":"assistant","content":"y"},"finish_reason":null}]}`,
			TerminalNone},
		{"events after the terminal still fold in, terminal unchanged", Chat,
			body(`{"error":{"message":"boom"},"choices":[{"index":0,"delta":{"content":"a"}}]}`,
				`{"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}]}`, `[DONE]`),
			`{"object":"chat.completion","model":null,"choices":[{"index":0,"message":{"role":"assistant","content":"ab"},"finish_reason":"stop"}]}`,
			TerminalError},
	})
}

// TestChatMalformedShapes: malformed parts of a chunk are skipped; the rest still counts.
func TestChatMalformedShapes(t *testing.T) {
	good := `{"choices":[{"index":0,"delta":{"content":"ok"}}]}`
	want := `{"object":"chat.completion","model":null,"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":null}]}`
	for name, bad := range map[string]string{
		"choices a number":          `{"choices":5}`,
		"choices an object":         `{"choices":{"index":0,"delta":{"content":"x"}}}`,
		"choice a string":           `{"choices":["x",7,null]}`,
		"choice index a string":     `{"choices":[{"index":"1","delta":{"content":"x"}}]}`,
		"choice index a float":      `{"choices":[{"index":1.5,"delta":{"content":"x"}}]}`,
		"delta a string":            `{"choices":[{"index":0,"delta":"x"}]}`,
		"content a number":          `{"choices":[{"index":0,"delta":{"content":5}}]}`,
		"content a list":            `{"choices":[{"index":0,"delta":{"content":[{"text":"x"}]}}]}`,
		"tool_calls an object":      `{"choices":[{"index":0,"delta":{"tool_calls":{"index":0}}}]}`,
		"tool call a string":        `{"choices":[{"index":0,"delta":{"tool_calls":["x"]}}]}`,
		"tool call index a string":  `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":"0","id":"a"}]}}]}`,
		"tool call function a list": `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":[1]}]}}]}`,
		"empty tool_calls":          `{"choices":[{"index":0,"delta":{"tool_calls":[]}}]}`,
		"reasoning a number":        `{"choices":[{"index":0,"delta":{"reasoning_content":7}}]}`,
		"deeply nested junk":        `{"choices":[{"index":0,"delta":{"x":[[[[{}]]]]}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			// The bad chunk's well-formed parts count, its malformed parts are skipped.
			if got := string(runStream(Chat, body(bad, good), 0).response); got != want {
				t.Fatalf("\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestMessagesReassembly covers NeMo Gym's Anthropic reconstruction with our usage rule
// (message_delta replaces field by field, never with null, never sums): thinking, text, tool_use
// JSON, cache fields, and streams with nothing to rebuild.
func TestMessagesReassembly(t *testing.T) {
	start := `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":null,"usage":{"input_tokens":10,"cache_read_input_tokens":2,"cache_creation_input_tokens":5,"output_tokens":1}}}`
	runReassemblyCases(t, []reassemblyCase{
		{"thinking, text, tool_use JSON, usage and stop reason from message_delta (item 31)", Messages,
			body("event: message_start\ndata: "+start,
				"event: content_block_start\ndata: "+`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}`,
				`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hel"}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"lo"}}`,
				`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"tu_1","name":"get","input":{}}}`,
				`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}`,
				`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"q\": "}}`,
				`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"1.50}"}}`,
				`{"type":"ping"}`,
				`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}`,
				"event: message_stop\ndata: "+`{"type":"message_stop"}`),
			`{"id":"msg_1","type":"message","role":"assistant","model":"claude","stop_reason":"tool_use","content":[{"type":"thinking","thinking":"hm","signature":"sig"},{"type":"text","text":"Hello"},{"type":"tool_use","id":"tu_1","name":"get","input":{"q":1.50}}],"usage":{"input_tokens":10,"cache_read_input_tokens":2,"cache_creation_input_tokens":5,"output_tokens":42}}`,
			TerminalComplete},
		{"message_delta usage: non-null values replace, nulls and absences keep, never sums", Messages,
			body(start,
				`{"type":"message_delta","delta":{},"usage":{"input_tokens":null,"cache_read_input_tokens":7,"output_tokens":3,"server_tool_use":null,"new_field":0}}`,
				`{"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":4}}`,
				`{"type":"message_stop"}`),
			`{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"usage":{"input_tokens":10,"cache_read_input_tokens":7,"cache_creation_input_tokens":5,"output_tokens":4,"new_field":0}}`,
			TerminalComplete},
		{"message_start usage nulls are kept as given", Messages,
			body(`{"type":"message_start","message":{"id":"m","usage":{"input_tokens":null,"output_tokens":1}}}`),
			`{"id":"m","type":"message","content":[],"usage":{"input_tokens":null,"output_tokens":1}}`,
			TerminalNone},
		{"blocks ordered by index; missing index appends; delta without block creates one", Messages,
			body(`{"type":"content_block_start","index":3,"content_block":{"type":"text","text":"c"}}`,
				`{"type":"content_block_start","content_block":{"type":"text","text":"b"}}`,
				`{"type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}`),
			`{"type":"message","content":[{"type":"text","text":"a"},{"type":"text","text":"b"},{"type":"text","text":"c"}]}`,
			TerminalNone},
		{"tool_use input: truthy input kept, bad JSON kept raw, empty JSON is {}", Messages,
			body(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"a","input":{"k":1}}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"x\":2}"}}`,
				`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"b","input":{}}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"x\":NaN}"}}`,
				`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"c"}}`,
				`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}`,
				`{"type":"content_block_start","index":3,"content_block":{"type":"server_tool_use","id":"d","input":{}}}`,
				`{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"y\":1}"}}`),
			`{"type":"message","content":[{"type":"tool_use","id":"a","input":{"k":1}},{"type":"tool_use","id":"b","input":{"_raw":"{\"x\":NaN}"}},{"type":"tool_use","id":"c","input":{}},{"type":"server_tool_use","id":"d","input":{"y":1}}]}`,
			TerminalNone},
		{"server and MCP tool blocks get their streamed input, as the non-streaming API answers", Messages,
			body(`{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\": \"go "}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"1.24\"}"}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"content_block_start","index":1,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}}`,
				`{"type":"content_block_start","index":2,"content_block":{"type":"mcp_tool_use","id":"mcptoolu_1","name":"echo","server_name":"s","input":{}}}`,
				`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"text\":[1,2]}"}}`),
			`{"type":"message","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"go 1.24"}},{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},{"type":"mcp_tool_use","id":"mcptoolu_1","name":"echo","server_name":"s","input":{"text":[1,2]}}]}`,
			TerminalNone},
		{"thinking keeps its signature_delta; redacted_thinking keeps its data", Messages,
			body(`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"a"}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"+/=="}}`,
				`{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgB"}}`,
				`{"type":"content_block_stop","index":1}`,
				`{"type":"content_block_delta","index":2,"delta":{"type":"signature_delta","signature":"s"}}`,
				`{"type":"content_block_delta","index":3,"delta":{"type":"signature_delta","signature":7}}`),
			`{"type":"message","content":[{"type":"thinking","thinking":"a","signature":"EqQB+/=="},{"type":"redacted_thinking","data":"EmwKAhgB"},{"type":"thinking","signature":"s"},{"type":"thinking"}]}`,
			TerminalNone},
		{"second message_start replaces the message, usage keeps merging", Messages,
			body(`{"type":"message_start","message":{"id":"one","model":"a","usage":{"input_tokens":1}}}`,
				`{"type":"message_start","message":{"id":"two","usage":{"output_tokens":2}}}`),
			`{"id":"two","type":"message","content":[],"usage":{"input_tokens":1,"output_tokens":2}}`,
			TerminalNone},
		{"unterminated final event is parsed", Messages,
			[]byte("data: " + start + "\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}"),
			`{"id":"msg_1","type":"message","role":"assistant","model":"claude","stop_reason":"end_turn","content":[],"usage":{"input_tokens":10,"cache_read_input_tokens":2,"cache_creation_input_tokens":5,"output_tokens":9}}`,
			TerminalComplete},
		{"error only stream reconstructs to nothing", Messages,
			body("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}"), "", TerminalError},
		{"ping only (item 34)", Messages, body(`{"type":"ping"}`), "", TerminalNone},
		{"malformed shapes skipped", Messages,
			body(`{"type":"message_start","message":"x"}`,
				`{"type":"content_block_start","index":"a","content_block":{"type":"text"}}`,
				`{"type":"content_block_start","index":0,"content_block":"text"}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":5}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lost"}}`,
				`{"type":"content_block_delta","index":1,"delta":"x"}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":7}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"kept"}}`,
				`{"type":"message_delta","usage":[1],"delta":5}`),
			`{"type":"message","content":[{"type":"text","text":5},{"type":"text","text":"kept"}]}`,
			TerminalNone},
	})
}

// TestResponsesReassembly covers NeMo Gym's Responses reconstruction (the terminal envelope,
// else an interim response object) and our rebuild of an empty output from the streamed items.
func TestResponsesReassembly(t *testing.T) {
	created := `{"type":"response.created","response":{"id":"r1","status":"in_progress","output":[],"usage":null}}`
	streamed := []string{
		created,
		`{"type":"response.output_item.added","output_index":1,"item":{"id":"msg_1","type":"message","role":"assistant","content":[]}}`,
		`{"type":"response.output_item.added","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`,
		`{"type":"response.reasoning_summary_part.added","item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}`,
		`{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":"Think"}`,
		`{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","summary_index":0,"delta":"ing"}`,
		`{"type":"response.content_part.added","item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`,
		`{"type":"response.output_text.delta","item_id":"msg_1","output_index":1,"content_index":0,"delta":"Hel"}`,
		`{"type":"response.output_text.delta","item_id":"msg_1","content_index":0,"delta":"lo"}`,
		`{"type":"response.output_item.added","output_index":2,"item":{"id":"fc_1","type":"function_call","call_id":"call_1","name":"f","arguments":""}}`,
		`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":2,"delta":"{\"a\":"}`,
		`{"type":"response.function_call_arguments.delta","output_index":2,"delta":"1}"}`,
	}
	rebuilt := `[{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Thinking"}]},{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello","annotations":[]}]},{"id":"fc_1","type":"function_call","call_id":"call_1","name":"f","arguments":"{\"a\":1}"}]`
	with := func(extra ...string) []byte { return body(append(append([]string(nil), streamed...), extra...)...) }
	runReassemblyCases(t, []reassemblyCase{
		{"completed with empty output: output rebuilt from streamed items", Responses,
			with(`{"type":"response.completed","response":{"id":"r1","status":"completed","output":[],"usage":{"input_tokens":3,"output_tokens":4}}}`),
			`{"id":"r1","status":"completed","output":` + rebuilt + `,"usage":{"input_tokens":3,"output_tokens":4}}`,
			TerminalComplete},
		{"completed without output: output appended", Responses,
			with(`{"type":"response.completed","response":{"id":"r1","status":"completed"}}`),
			`{"id":"r1","status":"completed","output":` + rebuilt + `}`,
			TerminalComplete},
		{"completed with output: envelope kept as sent", Responses,
			with(`{"type":"response.completed","response":{"id":"r1","output":[{"type":"message","id":"x"}]}}`),
			`{"id":"r1","output":[{"type":"message","id":"x"}]}`,
			TerminalComplete},
		{"incomplete envelope rebuilt too", Responses,
			with(`{"type":"response.incomplete","response":{"id":"r1","status":"incomplete","output":null,"incomplete_details":{"reason":"max_output_tokens"}}}`),
			`{"id":"r1","status":"incomplete","output":` + rebuilt + `,"incomplete_details":{"reason":"max_output_tokens"}}`,
			TerminalIncomplete},
		{"truncated stream: interim envelope with rebuilt output", Responses,
			with(), `{"id":"r1","status":"in_progress","output":` + rebuilt + `,"usage":null}`, TerminalNone},
		{"data-only terminal (no event lines)", Responses,
			with(`{"type":"response.completed","response":{"id":"r1","output":[]}}`),
			`{"id":"r1","output":` + rebuilt + `}`, TerminalComplete},
		{"output_item.done and .done text events replace what deltas built", Responses,
			body(`{"type":"response.output_item.added","output_index":0,"item":{"id":"fc","type":"function_call","arguments":""}}`,
				`{"type":"response.function_call_arguments.delta","item_id":"fc","delta":"{\"partial"}`,
				`{"type":"response.function_call_arguments.done","item_id":"fc","arguments":"{}"}`,
				`{"type":"response.output_item.added","output_index":1,"item":{"id":"m","type":"message","content":[]}}`,
				`{"type":"response.output_text.delta","item_id":"m","content_index":0,"delta":"draft"}`,
				`{"type":"response.output_item.done","output_index":1,"item":{"id":"m","type":"message","content":[{"type":"output_text","text":"final"}]}}`,
				`{"type":"response.completed","response":{"id":"r","output":[]}}`),
			`{"id":"r","output":[{"id":"fc","type":"function_call","arguments":"{}"},{"id":"m","type":"message","content":[{"type":"output_text","text":"final"}]}]}`,
			TerminalComplete},
		{"deltas for items never announced create them", Responses,
			body(`{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":1,"delta":"x"}`,
				`{"type":"response.function_call_arguments.delta","item_id":"f","delta":"{}"}`,
				`{"type":"response.refusal.delta","output_index":0,"content_index":0,"delta":"no"}`,
				`{"type":"response.failed","response":{"id":"r","status":"failed"}}`),
			`{"id":"r","status":"failed","output":[{"id":"m","type":"message","content":[{"type":"output_text","refusal":"no"},{"type":"output_text","text":"x"}]},{"id":"f","type":"function_call","arguments":"{}"}]}`,
			TerminalError},
		{"terminal envelope preferred over a later interim one (item 33)", Responses,
			body(`{"type":"response.completed","response":{"id":"final","output":[1]}}`,
				`{"type":"response.in_progress","response":{"id":"later","output":[2]}}`),
			`{"id":"final","output":[1]}`, TerminalComplete},
		{"last terminal envelope wins", Responses,
			body(`{"type":"response.failed","response":{"id":"a","output":[1]}}`,
				`{"type":"response.completed","response":{"id":"b","output":[2]}}`),
			`{"id":"b","output":[2]}`, TerminalError},
		{"no response object anywhere (item 34)", Responses,
			body(`{"type":"response.output_text.delta","delta":"x"}`, `{"type":"error","message":"m"}`), "", TerminalError},
		{"numbers keep their literal form", Responses,
			body(`{"type":"response.completed","response":{"usage":{"input_tokens":10,"output_tokens":10.0,"total_tokens":1E1,"x":-0}}}`),
			`{"usage":{"input_tokens":10,"output_tokens":10.0,"total_tokens":1E1,"x":-0}}`, TerminalComplete},
		{"white space inside values compacted, escapes kept", Responses,
			body(`{ "type" : "response.completed" , "response" : { "a" : [ 1 , { "b" : "x \u00e9 y" } ] } }   `),
			`{"a":[1,{"b":"x \u00e9 y"}]}`, TerminalComplete},
		{"malformed item events skipped", Responses,
			body(`{"type":"response.output_item.added","output_index":0,"item":"x"}`,
				`{"type":"response.output_item.added","output_index":"0","item":{"id":"a"}}`,
				`{"type":"response.output_text.delta","output_index":0,"content_index":-1,"delta":"x"}`,
				`{"type":"response.output_text.delta","output_index":0,"delta":5}`,
				`{"type":"response.output_item.added","output_index":0,"item":{"id":"a","content":"str"}}`,
				`{"type":"response.output_text.delta","item_id":"a","delta":"x"}`,
				`{"type":"response.function_call_arguments.delta","output_index":0.5,"delta":"x"}`,
				`{"type":"response.completed","response":{"output":[]}}`),
			`{"output":[{"id":"a","content":"str"}]}`, TerminalComplete},
	})
}

// TestEmptyAndJunkBodies: nothing to reconstruct (empty, unparseable, non-object streams, as in
// NeMo Gym's reconstruction) gives nil for every dialect, and odd bytes never panic.
func TestEmptyAndJunkBodies(t *testing.T) {
	for _, d := range []Dialect{Responses, Chat, Messages, Gemini, Dialect("other")} {
		for name, in := range map[string]string{
			"empty":          "",
			"comments":       ": a\n\n: b\n\n",
			"not JSON":       "data: hello\n\n",
			"array":          "data: [1]\n\n",
			"number":         "data: 1\n\n",
			"string":         "data: \"x\"\n\n",
			"NaN":            "data: {\"type\":\"message_start\",\"message\":{\"id\":NaN}}\n\n",
			"Infinity":       "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"u\":Infinity}\n\n",
			"no data":        "event: content_block_delta\n\n",
			"binary":         "\x00\xff\xfe\r\r\n\n\x01",
			"huge nesting":   "data: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n\n",
			"truncated json": "data: {\"choices\":[{\"delta\":{\"content\":\"x\"",
		} {
			t.Run(string(d)+"/"+name, func(t *testing.T) {
				if r := runStream(d, []byte(in), 3); r.response != nil {
					t.Fatalf("response %s, want nil", r.response)
				}
			})
		}
	}
}

// TestInvalidUTF8Replaced: a payload with invalid UTF-8 is decoded with replacement, as NeMo
// Gym decodes the body, so the reconstruction is valid UTF-8 JSON.
func TestInvalidUTF8Replaced(t *testing.T) {
	in := []byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\xffb\xe2\x82\"}}]}\n\n")
	r := runStream(Chat, in, 1)
	if !utf8.Valid(r.response) || !json.Valid(r.response) {
		t.Fatalf("not valid UTF-8 JSON: %q", r.response)
	}
	if !bytes.Contains(r.response, []byte(`"content":"a`+"\uFFFD"+`b`)) {
		t.Fatalf("replacement missing: %s", r.response)
	}
}

// TestResponseDoesNotChangeState: Response may be called mid-stream, repeatedly, and later calls
// see later events.
func TestResponseDoesNotChangeState(t *testing.T) {
	for _, d := range []Dialect{Responses, Chat, Messages, Gemini} {
		t.Run(string(d), func(t *testing.T) {
			files := streamFixtures(t)
			for _, file := range files {
				if fixtureDialect(t, file) != d {
					continue
				}
				b := readFile(t, file)
				s := NewStream(d)
				half := len(b) / 2
				s.Write(b[:half])
				first := append([]byte(nil), s.Response()...)
				if again := s.Response(); !bytes.Equal(first, again) {
					t.Fatalf("%s: second Response differs:\n%s\n%s", file, first, again)
				}
				s.Write(b[half:])
				s.End()
				whole := runStream(d, b, 0)
				if !bytes.Equal(s.Response(), whole.response) {
					t.Fatalf("%s: calling Response mid-stream changed the result", file)
				}
			}
		})
	}
}

// TestStreamEvents counts decoded events; comments are not events.
func TestStreamEvents(t *testing.T) {
	s := NewStream(Chat)
	s.Write([]byte(": keep-alive\n\ndata: {}\n\nevent: x\n\n"))
	s.End()
	if s.Events() != 2 || s.Dialect() != Chat {
		t.Fatalf("Events() = %d, Dialect() = %q", s.Events(), s.Dialect())
	}
}
