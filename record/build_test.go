package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// keyValues are the values SOURCES.md lists for a fixture ("key values"). Token and cache fields
// are all checked (nil = must be null); the string fields only when set.
type keyValues struct {
	in, out, total, reasoning, cached, creation *int64
	hit                                         *bool
	model, responseID, status, finish           *string
	reasoningText                               *string // exact reasoning_content; "" = any non-empty
	noReasoning                                 bool
	toolCalls                                   []ToolCall
}

// fixtureCases are the JSON response fixtures of testdata/fixtures with the key values SOURCES.md
// gives (by hand, checked with a script, independent of this package).
var fixtureCases = []struct {
	file    string
	dialect string
	status  int
	want    keyValues
}{
	{"openai_responses/json_reasoning_text_function_call_cached.json", "responses", 200, keyValues{
		in: ptr[int64](366), out: ptr[int64](63), total: ptr[int64](429), reasoning: ptr[int64](18),
		cached: ptr[int64](256), hit: ptr(true), model: ptr("deepseek-v4-flash"), status: ptr("completed"),
		noReasoning: true, // reasoning text sits in content[].reasoning_text, summary is empty
		toolCalls: []ToolCall{{CallID: ptr("call_00_iD0U8IMtyIljI0ET7GLz1318"), Name: ptr("get_temperature"),
			Arguments: json.RawMessage(`{"city": "Tokyo"}`)}},
	}},
	{"openai_responses/json_reasoning_summary_message.json", "responses", 200, keyValues{
		in: ptr[int64](865), out: ptr[int64](163), total: ptr[int64](1028), reasoning: ptr[int64](128),
		cached: ptr[int64](0), hit: ptr(false), model: ptr("gpt-5-mini-2025-08-07"), status: ptr("completed"),
		responseID:    ptr("resp_0f35ed53160b395301693cc957829881909359e7f80cdd20b5"),
		reasoningText: ptr(""), toolCalls: []ToolCall{},
	}},
	{"openai_responses/error_429_insufficient_quota.json", "responses", 429, keyValues{toolCalls: []ToolCall{}, noReasoning: true}},
	{"openai_responses/error_400_invalid_parameter.json", "responses", 400, keyValues{toolCalls: []ToolCall{}, noReasoning: true}},

	{"openai_chat/json_text_usage_details.json", "chat", 200, keyValues{
		in: ptr[int64](16), out: ptr[int64](363), total: ptr[int64](379), reasoning: ptr[int64](0),
		cached: ptr[int64](0), hit: ptr(false), model: ptr("gpt-4.1-nano-2025-04-14"), finish: ptr("stop"),
		noReasoning: true, toolCalls: []ToolCall{},
	}},
	{"openai_chat/compat_deepseek_json_reasoning_content_tool_call.json", "chat", 200, keyValues{
		in: ptr[int64](339), out: ptr[int64](92), total: ptr[int64](431), reasoning: ptr[int64](48),
		cached: ptr[int64](320), hit: ptr(true), model: ptr("deepseek-reasoner"), finish: ptr("tool_calls"),
		reasoningText: ptr(""),
		toolCalls: []ToolCall{{CallID: ptr("call_00_9V0vrf86Pc9aelHCJMZqnJBo"), Name: ptr("weather"),
			Arguments: json.RawMessage(`{"location": "San Francisco"}`)}},
	}},
	{"openai_chat/compat_groq_json_reasoning_field.json", "chat", 200, keyValues{
		in: ptr[int64](84), out: ptr[int64](105), total: ptr[int64](189), reasoning: ptr[int64](95),
		model: ptr("openai/gpt-oss-120b"), finish: ptr("stop"), reasoningText: ptr(""), toolCalls: []ToolCall{},
	}},
	{"openai_chat/compat_vllm_error_400_context_length.json", "chat", 400, keyValues{toolCalls: []ToolCall{}, noReasoning: true}},
	{"openai_chat/error_400_unsupported_parameter.json", "chat", 400, keyValues{toolCalls: []ToolCall{}, noReasoning: true}},
	{"openai_chat/error_429_upstream_rate_limited.json", "chat", 429, keyValues{toolCalls: []ToolCall{}, noReasoning: true}},

	{"anthropic_messages/json_text.json", "messages", 200, keyValues{
		in: ptr[int64](12), out: ptr[int64](29), total: ptr[int64](41), cached: ptr[int64](0), creation: ptr[int64](0),
		hit: ptr(false), model: ptr("claude-sonnet-4-5-20250929"), finish: ptr("end_turn"),
		responseID: ptr("msg_01VdEjxAP5ahtHKrrRdNBteQ"), noReasoning: true, toolCalls: []ToolCall{},
	}},
	{"anthropic_messages/json_thinking_text.json", "messages", 200, keyValues{
		in: ptr[int64](69), out: ptr[int64](33), total: ptr[int64](102), finish: ptr("end_turn"),
		cached: ptr[int64](0), creation: ptr[int64](0), hit: ptr(false), // cache fields present and 0
		reasoningText: ptr("925 divided by 5 = 185"), toolCalls: []ToolCall{},
	}},
	{"anthropic_messages/json_tool_use.json", "messages", 200, keyValues{
		in: ptr[int64](1151), out: ptr[int64](87), total: ptr[int64](1238), finish: ptr("tool_use"),
		cached: ptr[int64](0), creation: ptr[int64](0), hit: ptr(false),
		model: ptr("claude-haiku-4-5-20251001"), noReasoning: true,
		toolCalls: []ToolCall{{CallID: ptr("toolu_01Q9ExVZnzZj7E2QQYHYtNUa"), Name: ptr("json"),
			Arguments: json.RawMessage(`{"elements":[{"location":"San Francisco","temperature":-5,"condition":"snowy"},{"location":"London","temperature":0,"condition":"snowy"},{"location":"Paris","temperature":23,"condition":"cloudy"},{"location":"Berlin","temperature":-9,"condition":"snowy"}]}`)}},
	}},
	{"anthropic_messages/json_cache_read_and_creation.json", "messages", 200, keyValues{
		in: ptr[int64](1532), out: ptr[int64](33), total: ptr[int64](1565), cached: ptr[int64](1111),
		creation: ptr[int64](418), hit: ptr(true), noReasoning: true, toolCalls: []ToolCall{},
	}},
	{"anthropic_messages/error_400_invalid_request.json", "messages", 400, keyValues{toolCalls: []ToolCall{}, noReasoning: true}},
	{"anthropic_messages/error_429_rate_limit.json", "messages", 429, keyValues{toolCalls: []ToolCall{}, noReasoning: true}},
	{"anthropic_messages/error_529_overloaded.json", "messages", 529, keyValues{toolCalls: []ToolCall{}, noReasoning: true}},

	// Gemini: modelVersion is the response's model, tokens_out counts the thoughts beside the
	// candidates (15 + 893), a functionCall without id is a call without call id.
	{"google_gemini/json_function_call_thought_signature.json", "gemini", 200, keyValues{
		in: ptr[int64](29), out: ptr[int64](908), total: ptr[int64](937), reasoning: ptr[int64](893),
		model: ptr("gemini-3-pro-preview"), finish: ptr("STOP"), responseID: ptr("m36LaZGyCLz1xs0PtNSB-QU"),
		noReasoning: true,
		toolCalls:   []ToolCall{{Name: ptr("weather"), Arguments: json.RawMessage(`{"location":"San Francisco"}`)}},
	}},
	{"google_gemini/error_429_resource_exhausted.json", "gemini", 429, keyValues{toolCalls: []ToolCall{}, noReasoning: true}},
}

// TestFixturesCovered fails when a JSON response fixture is added without a key-value case.
func TestFixturesCovered(t *testing.T) {
	files, err := filepath.Glob("../testdata/fixtures/*/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	have := map[string]bool{}
	for _, c := range fixtureCases {
		have[c.file] = true
	}
	for _, f := range files {
		rel := strings.TrimPrefix(filepath.ToSlash(f), "../testdata/fixtures/")
		if !have[rel] {
			t.Errorf("fixture %s has no case in fixtureCases", rel)
		}
	}
}

func TestBuildRecordFixtures(t *testing.T) {
	for _, c := range fixtureCases {
		t.Run(c.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("../testdata/fixtures", c.file))
			if err != nil {
				t.Fatal(err)
			}
			response := compactJSON(t, body)
			line := exchangeLine(t, capture.Exchange{
				Dialect: c.dialect, StatusCode: ptr(c.status),
				Request:  json.RawMessage(`{"model":"request-model","stream":false}`),
				Response: response,
			})
			rec, err := BuildRecord(line, 3)
			if err != nil {
				t.Fatalf("BuildRecord: %v", err)
			}
			checkKeyValues(t, rec, c.want)
			if rec.CallIndex != 3 || *rec.Dialect != c.dialect || *rec.StatusCode != c.status {
				t.Errorf("envelope: call_index %d dialect %s status %s", rec.CallIndex, strOrNil(rec.Dialect), intOrNil(rec.StatusCode))
			}
			if !bytes.Equal(rec.Response, response) {
				t.Errorf("response bytes changed")
			}
			// A response without a model falls back to the request's.
			if c.want.model == nil && rec.Model != nil && *rec.Model != "request-model" {
				if m := jsonscan.Lookup(response, "model"); m == nil {
					t.Errorf("model = %s, want the request's", strOrNil(rec.Model))
				}
			}
		})
	}
}

func checkKeyValues(t *testing.T, rec *ModelCallRecord, want keyValues) {
	t.Helper()
	ints := []struct {
		name      string
		got, want *int64
	}{
		{"tokens_in", rec.TokensIn, want.in}, {"tokens_out", rec.TokensOut, want.out},
		{"tokens_total", rec.TokensTotal, want.total}, {"tokens_reasoning", rec.TokensReasoning, want.reasoning},
		{"cached_tokens", rec.CachedTokens, want.cached}, {"cache_creation_tokens", rec.CacheCreationTokens, want.creation},
	}
	for _, f := range ints {
		if intOrNil(f.got) != intOrNil(f.want) {
			t.Errorf("%s = %s, want %s", f.name, intOrNil(f.got), intOrNil(f.want))
		}
	}
	if (rec.CacheHit == nil) != (want.hit == nil) || (rec.CacheHit != nil && *rec.CacheHit != *want.hit) {
		t.Errorf("cache_hit = %v, want %v", jsonOf(rec.CacheHit), jsonOf(want.hit))
	}
	for _, f := range []struct {
		name      string
		got, want *string
	}{{"model", rec.Model, want.model}, {"response_id", rec.ResponseID, want.responseID},
		{"response_status", rec.ResponseStatus, want.status}, {"finish_reason", rec.FinishReason, want.finish}} {
		if f.want != nil && strOrNil(f.got) != strOrNil(f.want) {
			t.Errorf("%s = %s, want %s", f.name, strOrNil(f.got), strOrNil(f.want))
		}
	}
	switch {
	case want.noReasoning && rec.ReasoningContent != nil:
		t.Errorf("reasoning_content = %q, want null", *rec.ReasoningContent)
	case want.reasoningText != nil && rec.ReasoningContent == nil:
		t.Errorf("reasoning_content is null, want text")
	case want.reasoningText != nil && *want.reasoningText != "" && *rec.ReasoningContent != *want.reasoningText:
		t.Errorf("reasoning_content = %q, want %q", *rec.ReasoningContent, *want.reasoningText)
	}
	if want.toolCalls != nil {
		if len(rec.ToolCalls) != len(want.toolCalls) {
			t.Fatalf("tool_calls = %s, want %s", toolCallsString(rec.ToolCalls), toolCallsString(want.toolCalls))
		}
		for i, tc := range want.toolCalls {
			got := rec.ToolCalls[i]
			if strOrNil(got.CallID) != strOrNil(tc.CallID) || strOrNil(got.Name) != strOrNil(tc.Name) ||
				!jsonEqual(got.Arguments, tc.Arguments) {
				t.Errorf("tool_calls[%d] = %s, want %s", i, toolCallsString([]ToolCall{got}), toolCallsString([]ToolCall{tc}))
			}
		}
	}
}

// jsonEqual compares two JSON texts by value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return jsonOf(x) == jsonOf(y)
}

// TestBuildRecordDamaged lists every way an exchange line is damaged (see BuildRecord): not a JSON object,
// not strict JSON, or an envelope field of the wrong type.
func TestBuildRecordDamaged(t *testing.T) {
	cases := []struct{ name, line string }{
		{"empty", ``},
		{"blank", "  \t"},
		{"not json", `{not json`},
		{"torn line", `{"model_call_id": "torn-by-a-crash", "dialect": "ch`},
		{"array", `[1,2]`},
		{"string", `"x"`},
		{"null", `null`},
		{"NaN", `{"model_call_id":"a","latency_ms":NaN}`},
		{"Infinity", `{"model_call_id":"a","latency_ms":Infinity}`},
		{"trailing data", `{"model_call_id":"a"} {}`},
		{"invalid UTF-8", "{\"model_call_id\":\"a\xff\"}"},
		{"control char in string", "{\"model_call_id\":\"a\x01\"}"},
		{"model_call_id number", `{"model_call_id":123}`},
		{"dialect bool", `{"dialect":true}`},
		{"error_category number", `{"error_category":5}`},
		{"model_ref string", `{"model_ref":"policy_model"}`},
		{"model_ref wrong type", `{"model_ref":{"type":"agents","name":"x"}}`},
		{"model_ref missing name", `{"model_ref":{"type":"responses_api_models"}}`},
		{"model_ref name number", `{"model_ref":{"type":"responses_api_models","name":7}}`},
		{"status_code string", `{"status_code":"200"}`},
		{"status_code float", `{"status_code":200.0}`},
		{"status_code exponent", `{"status_code":2e2}`},
		{"status_code bool", `{"status_code":true}`},
		{"started_at string", `{"started_at":"1.5"}`},
		{"completed_at bool", `{"completed_at":false}`},
		{"latency_ms object", `{"latency_ms":{}}`},
		{"latency_ttft_ms overflow", `{"latency_ttft_ms":1e400}`},
		{"last duplicate wins (bad)", `{"model_call_id":"a","model_call_id":1}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, err := BuildRecord([]byte(c.line), 0)
			if err == nil {
				t.Fatalf("BuildRecord(%q) = %s, want a damaged-line error", c.line, rec.AppendJSON(nil, true))
			}
			if !errors.Is(err, ErrInvalidExchange) {
				t.Errorf("error %v does not wrap ErrInvalidExchange", err)
			}
		})
	}
}

// TestBuildRecordLenient lists what is not damage: payload shapes and provenance/client-id fields of
// the wrong type become null or are skipped, where NeMo Gym would drop the record as damaged.
func TestBuildRecordLenient(t *testing.T) {
	cases := []struct {
		name  string
		line  string
		check func(t *testing.T, r *ModelCallRecord)
	}{
		{"all null", `{"model_call_id":null,"dialect":null,"model_ref":null,"status_code":null,"started_at":null}`,
			func(t *testing.T, r *ModelCallRecord) {
				if r.ModelCallID != nil || r.Dialect != nil || r.ModelRef != nil || r.StatusCode != nil || r.StartedAt != nil {
					t.Errorf("nulls not kept: %s", r.AppendJSON(nil, true))
				}
			}},
		{"empty object", `{}`, func(t *testing.T, r *ModelCallRecord) {
			if r.ToolCalls != nil || r.Request != nil || r.Response != nil {
				t.Errorf("got %s", r.AppendJSON(nil, true))
			}
		}},
		{"last duplicate wins (good)", `{"model_call_id":1,"model_call_id":"b"}`, func(t *testing.T, r *ModelCallRecord) {
			if strOrNil(r.ModelCallID) != `"b"` {
				t.Errorf("model_call_id = %s", strOrNil(r.ModelCallID))
			}
		}},
		{"model_ref extra keys dropped", `{"model_ref":{"name":"m","type":"responses_api_models","x":1}}`,
			func(t *testing.T, r *ModelCallRecord) {
				if r.ModelRef == nil || r.ModelRef.Name != "m" {
					t.Errorf("model_ref = %v", r.ModelRef)
				}
			}},
		{"integer floats", `{"started_at":1795968571,"latency_ms":10,"latency_ttft_ms":-0.0}`, func(t *testing.T, r *ModelCallRecord) {
			if *r.StartedAt != 1795968571 || *r.LatencyTotalMS != 10 || *r.LatencyTTFTMS != 0 {
				t.Errorf("floats: %s", r.AppendJSON(nil, false))
			}
			if !bytes.Contains(r.AppendJSON(nil, false), []byte(`"latency_total_ms":10.0`)) {
				t.Errorf("float field not written as a float: %s", r.AppendJSON(nil, false))
			}
		}},
		{"payloads not objects", `{"request":[1],"response":"text","request_raw":5,"response_raw":{"a":1}}`,
			func(t *testing.T, r *ModelCallRecord) {
				if r.Request != nil || r.Response != nil || r.RequestRaw != nil || r.ResponseRaw != nil {
					t.Errorf("got %s", r.AppendJSON(nil, true))
				}
			}},
		{"empty payload objects kept", `{"request":{},"response":{ }}`, func(t *testing.T, r *ModelCallRecord) {
			if string(r.Request) != `{}` || string(r.Response) != `{ }` {
				t.Errorf("request %s response %s", r.Request, r.Response)
			}
		}},
		{"provenance wrong types", `{"response_source":"elsewhere","upstream_attempted":"yes","upstream_status_code":"502","local_response_reason":1,"client_session_id":["s"],"client_assistant_message_id":{}}`,
			func(t *testing.T, r *ModelCallRecord) {
				if r.ResponseSource != nil || r.UpstreamAttempted != nil || r.UpstreamStatusCode != nil ||
					r.LocalResponseReason != nil || r.ClientSessionID != nil || r.ClientAssistantMessageID != nil {
					t.Errorf("got %s", r.AppendJSON(nil, false))
				}
			}},
		{"provenance", `{"response_source":"local","upstream_attempted":false,"upstream_status_code":504,"local_response_reason":"upstream_timeout","client_session_id":"s-1","client_assistant_message_id":"m-1"}`,
			func(t *testing.T, r *ModelCallRecord) {
				want := `"response_source":"local","upstream_attempted":false,"upstream_status_code":504,"local_response_reason":"upstream_timeout","client_session_id":"s-1","client_assistant_message_id":"m-1"}`
				if got := r.AppendJSON(nil, false); !bytes.HasSuffix(got, []byte(want)) {
					t.Errorf("got %s", got)
				}
			}},
		{"usage not an object", `{"response":{"usage":"lots"}}`, func(t *testing.T, r *ModelCallRecord) {
			if r.TokensIn != nil || r.CacheHit != nil {
				t.Errorf("got %s", r.AppendJSON(nil, false))
			}
		}},
		{"malformed nested shapes", `{"response":{"usage":{"input_tokens":5,"prompt_tokens_details":7,"output_tokens_details":[1]},"choices":5,"incomplete_details":"x"}}`,
			func(t *testing.T, r *ModelCallRecord) {
				if intOrNil(r.TokensIn) != "5" || r.TokensTotal != nil || r.TokensReasoning != nil || len(r.ToolCalls) != 0 || r.FinishReason != nil {
					t.Errorf("got %s", r.AppendJSON(nil, false))
				}
			}},
		// The reference drops these records (a non-iterable summary / tool_calls raises); we keep them.
		{"summary is a number", `{"response":{"output":[{"type":"reasoning","summary":5},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}}`,
			func(t *testing.T, r *ModelCallRecord) {
				if len(r.ToolCalls) != 1 || r.ReasoningContent != nil {
					t.Errorf("got %s", r.AppendJSON(nil, false))
				}
			}},
		{"tool_calls is a number", `{"response":{"choices":[{"message":{"tool_calls":5,"reasoning_content":"r"}},"junk",{"message":"m"}]}}`,
			func(t *testing.T, r *ModelCallRecord) {
				if len(r.ToolCalls) != 0 || strOrNil(r.ReasoningContent) != `"r"` {
					t.Errorf("got %s", r.AppendJSON(nil, false))
				}
			}},
		{"escaped keys decode", `{"model\u005fcall_id":"x","dialect\\":"no","\"dialect\"":"no","response":{"us\u0061ge":{"input\u005ftokens":1,"output_tokens\\":2}}}`,
			func(t *testing.T, r *ModelCallRecord) {
				if strOrNil(r.ModelCallID) != `"x"` || intOrNil(r.TokensIn) != "1" || r.Dialect != nil || r.TokensOut != nil {
					t.Errorf("got %s", r.AppendJSON(nil, false))
				}
			}},
		{"surrounding whitespace", " \t{\"model_call_id\":\"a\"}\r\n", func(t *testing.T, r *ModelCallRecord) {
			if strOrNil(r.ModelCallID) != `"a"` {
				t.Errorf("got %s", r.AppendJSON(nil, false))
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, err := BuildRecord([]byte(c.line), 0)
			if err != nil {
				t.Fatalf("BuildRecord(%s): %v", c.line, err)
			}
			c.check(t, rec)
		})
	}
}

func TestModelFallback(t *testing.T) {
	const pathModel = `,"path_model":"gemini-2.5-flash"`
	cases := []struct {
		name, request, response string
		line                    string // more members of the line
		want                    *string
	}{
		{"response model", `{"model":"req"}`, `{"model":"resp"}`, "", ptr("resp")},
		{"empty response model falls back", `{"model":"req"}`, `{"model":""}`, "", ptr("req")},
		{"null response model falls back", `{"model":"req"}`, `{"model":null}`, "", ptr("req")},
		{"no response", `{"model":"req"}`, `null`, "", ptr("req")},
		{"truthy non-string response model: null, no fallback", `{"model":"req"}`, `{"model":5}`, "", nil},
		{"falsy non-string response model falls back", `{"model":"req"}`, `{"model":0}`, "", ptr("req")},
		{"request model not a string", `{"model":["x"]}`, `{}`, "", nil},
		{"empty request model kept", `{"model":""}`, `{"model":""}`, "", ptr("")},
		{"neither", `{}`, `{}`, "", nil},
		{"request not an object", `"x"`, `{}`, "", nil},
		{"path model when nothing else names one", `{"contents":[]}`, `{"error":{"code":429}}`, pathModel, ptr("gemini-2.5-flash")},
		{"path model, request not an object", `"x"`, `null`, pathModel, ptr("gemini-2.5-flash")},
		{"response model version before the path model", `{}`, `{"modelVersion":"gemini-2.5-flash-001"}`, pathModel, ptr("gemini-2.5-flash-001")},
		{"request model before the path model", `{"model":"req"}`, `{}`, pathModel, ptr("req")},
		{"empty request model before the path model", `{"model":""}`, `{}`, pathModel, ptr("")},
		{"path model not a string", `{}`, `{}`, `,"path_model":5`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			line := `{"request":` + c.request + `,"response":` + c.response + c.line + `}`
			rec, err := BuildRecord([]byte(line), 0)
			if err != nil {
				t.Fatal(err)
			}
			if strOrNil(rec.Model) != strOrNil(c.want) {
				t.Errorf("model = %s, want %s", strOrNil(rec.Model), strOrNil(c.want))
			}
		})
	}
}

func TestFinishReason(t *testing.T) {
	cases := []struct {
		name, response string
		want           *string
	}{
		{"anthropic stop_reason", `{"stop_reason":"end_turn","choices":[{"finish_reason":"stop"}]}`, ptr("end_turn")},
		{"stop_reason not a string", `{"stop_reason":1,"choices":[{"finish_reason":"stop"}]}`, ptr("stop")},
		{"chat first choice", `{"choices":[{"finish_reason":"length"},{"finish_reason":"stop"}]}`, ptr("length")},
		{"first choice not an object", `{"choices":["x",{"finish_reason":"stop"}],"incomplete_details":{"reason":"max_output_tokens"}}`, ptr("max_output_tokens")},
		{"empty choices", `{"choices":[],"incomplete_details":{"reason":"content_filter"}}`, ptr("content_filter")},
		{"null finish falls through", `{"choices":[{"finish_reason":null}],"incomplete_details":{"reason":"r"}}`, ptr("r")},
		{"incomplete_details not an object", `{"incomplete_details":"max_output_tokens"}`, nil},
		{"nothing", `{"status":"completed"}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := finishReasonJSON(json.RawMessage(c.response)); strOrNil(got) != strOrNil(c.want) {
				t.Errorf("FinishReason = %s, want %s", strOrNil(got), strOrNil(c.want))
			}
			rec, err := BuildRecord([]byte(`{"response":`+c.response+`}`), 0)
			if err != nil || strOrNil(rec.FinishReason) != strOrNil(c.want) {
				t.Errorf("record finish_reason = %v (%v), want %s", rec, err, strOrNil(c.want))
			}
		})
	}
	if finishReasonJSON(json.RawMessage(`{"stop_reason":"x"`)) != nil {
		t.Error("invalid JSON gives a finish reason")
	}
}

// TestRecordJSON checks the output shape: all 33 keys (29 without payloads), tool_calls [] when
// empty, payload bytes exactly as captured.
func TestRecordJSON(t *testing.T) {
	request := `{"model":"m",  "messages":[{"role":"user","content":"h\u00e9 \"q\" \\ 😀 <b>&"}]}`
	rec, err := BuildRecord([]byte(`{"model_call_id":"id1","request":`+request+`,"response":null}`), 7)
	if err != nil {
		t.Fatal(err)
	}
	full := rec.AppendJSON(nil, true)
	if !json.Valid(full) {
		t.Fatalf("invalid JSON: %s", full)
	}
	if !bytes.Contains(full, []byte(`"request":`+request+`,`)) {
		t.Errorf("request bytes were re-encoded: %s", full)
	}
	m := decodeObject(t, full)
	if len(m) != 33 {
		t.Errorf("%d keys with payloads, want 33", len(m))
	}
	if string(jsonOf(m["tool_calls"])) != "[]" {
		t.Errorf("tool_calls = %v, want []", m["tool_calls"])
	}
	lean := decodeObject(t, rec.AppendJSON(nil, false))
	if len(lean) != 29 {
		t.Errorf("%d keys without payloads, want 29", len(lean))
	}
	for _, k := range payloadKeys() {
		if _, ok := lean[k]; ok {
			t.Errorf("payload field %s present without payloads", k)
		}
		if _, ok := m[k]; !ok {
			t.Errorf("payload field %s missing with payloads", k)
		}
	}
	for k, v := range m {
		if v == nil {
			continue
		}
		switch k {
		case "model_call_id", "call_index", "model", "request", "tool_calls":
		default:
			t.Errorf("%s = %v, want null", k, v)
		}
	}
	if mj, _ := rec.MarshalJSON(); !bytes.Equal(mj, full) {
		t.Error("MarshalJSON differs from AppendJSON(nil, true)")
	}
}

func TestToolCallArgumentsOnMultipleLinesStayOneLine(t *testing.T) {
	args, _ := json.Marshal("{\n  \"a\": [1,\n 2]\n}")
	rec, err := BuildRecord([]byte(`{"response":{"output":[{"type":"function_call","call_id":"c","name":"f","arguments":`+string(args)+`}]}}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	out := rec.AppendJSON(nil, false)
	if bytes.ContainsAny(out, "\r\n") || !bytes.Contains(out, []byte(`"arguments":{"a":[1,2]}`)) {
		t.Errorf("arguments not one line: %s", out)
	}
}

// TestMarshalJSONValueAndPointer: json.Marshal of a record value and of a pointer to it give the
// same bytes, and so do records inside a slice, a struct field and a map; without encoding/json's
// HTML escaping (an Encoder with SetEscapeHTML(false)) they are AppendJSON(nil, true)'s bytes,
// compacted as encoding/json compacts every MarshalJSON result (a decoded tool-call arguments
// string may hold spaces).
func TestMarshalJSONValueAndPointer(t *testing.T) {
	encode := func(v any) string {
		var b bytes.Buffer
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		if err := e.Encode(v); err != nil {
			t.Fatalf("encode %T: %v", v, err)
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	for _, l := range gymLines(t) {
		rec, err := BuildRecord(l, 3)
		if err != nil {
			continue
		}
		byValue, err1 := json.Marshal(*rec)
		byPointer, err2 := json.Marshal(rec)
		if err1 != nil || err2 != nil || !bytes.Equal(byValue, byPointer) {
			t.Fatalf("json.Marshal of a value gave\n%s (%v)\nof a pointer\n%s (%v)", byValue, err1, byPointer, err2)
		}
		want := string(compactJSON(t, rec.AppendJSON(nil, true)))
		for _, c := range []struct {
			v    any
			want string
		}{
			{*rec, want},
			{rec, want},
			{[]ModelCallRecord{*rec}, "[" + want + "]"},
			{struct{ R ModelCallRecord }{*rec}, `{"R":` + want + "}"},
			{map[string]ModelCallRecord{"r": *rec}, `{"r":` + want + "}"},
		} {
			if got := encode(c.v); got != c.want {
				t.Fatalf("%T encoded as\n%s\nwant\n%s", c.v, got, c.want)
			}
		}
	}
}

// TestBuildRecordGeminiShape: a Gemini response gives its thought parts as reasoning, its function
// calls as tool calls, modelVersion as the model and responseId as the response id, on a gemini
// line and, the extraction reading shapes rather than dialect names, on a chat line too.
func TestBuildRecordGeminiShape(t *testing.T) {
	resp := json.RawMessage(`{"candidates":[{"content":{"parts":[{"text":"Plan: read it.","thought":true},{"text":"Reading."},{"functionCall":{"id":"c1","name":"read_file","args":{"path":"a.txt"}}},{"functionCall":{"name":"ls","args":null}}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"thoughtsTokenCount":7,"cachedContentTokenCount":4,"totalTokenCount":22},"modelVersion":"gemini-2.5-pro","responseId":"resp-1"}`)
	for _, d := range []string{"gemini", "chat"} {
		t.Run(d, func(t *testing.T) {
			line := exchangeLine(t, capture.Exchange{Dialect: d, StatusCode: ptr(200),
				Request: json.RawMessage(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`), Response: resp})
			rec, err := BuildRecord(line, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprintf("model=%s id=%s finish=%s in=%d out=%d reasoning=%d total=%d cached=%d hit=%v reasoning_content=%q",
				*rec.Model, *rec.ResponseID, *rec.FinishReason, *rec.TokensIn, *rec.TokensOut, *rec.TokensReasoning,
				*rec.TokensTotal, *rec.CachedTokens, *rec.CacheHit, *rec.ReasoningContent)
			want := `model=gemini-2.5-pro id=resp-1 finish=STOP in=10 out=12 reasoning=7 total=22 cached=4 hit=true reasoning_content="Plan: read it."`
			if got != want {
				t.Fatalf("\n got %s\nwant %s", got, want)
			}
			calls, _ := json.Marshal(rec.ToolCalls)
			if want := `[{"call_id":"c1","name":"read_file","arguments":{"path":"a.txt"}},{"call_id":null,"name":"ls","arguments":{}}]`; string(calls) != want {
				t.Fatalf("tool calls %s, want %s", calls, want)
			}
		})
	}
}
