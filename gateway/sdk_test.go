package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// sdkCase drives one official SDK call through the gateway against an upstream replaying a fixture.
type sdkCase struct {
	name        string
	path        string // observed path the SDK posts to
	fixture     string
	contentType string
	// call makes the SDK call against base (the prefixed base URL in the SDK's convention) and
	// returns the raw JSON objects the SDK decoded (the response, or every stream event).
	call func(t *testing.T, base string) []string

	// Key values of the fixture (testdata/README.md points at SOURCES.md).
	tokensIn, tokensOut, tokensTotal int64
	reasoning                        *int64
	finish                           string
	toolName, toolCallID, toolArgs   string
}

func i64(n int64) *int64 { return &n }

func openaiClient(base string) openai.Client {
	return openai.NewClient(ooption.WithBaseURL(base+"/v1/"), ooption.WithAPIKey("sk-test-secret"), ooption.WithMaxRetries(0))
}

func anthropicClient(base string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(base+"/"), aoption.WithAPIKey("sk-ant-test-secret"), aoption.WithMaxRetries(0))
}

var sdkCases = []sdkCase{
	{
		name: "openai responses json", path: "/v1/responses", contentType: "application/json",
		fixture: "openai_responses/json_reasoning_text_function_call_cached.json",
		call: func(t *testing.T, base string) []string {
			c := openaiClient(base)
			r, err := c.Responses.New(context.Background(), responses.ResponseNewParams{
				Model: "deepseek-v4-flash", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("weather in Tokyo?")},
			})
			if err != nil {
				t.Fatal(err)
			}
			if r.Usage.InputTokens != 366 {
				t.Errorf("SDK saw input_tokens %d", r.Usage.InputTokens)
			}
			return []string{r.RawJSON()}
		},
		tokensIn: 366, tokensOut: 63, tokensTotal: 429, reasoning: i64(18),
		toolName: "get_temperature", toolCallID: "call_00_iD0U8IMtyIljI0ET7GLz1318", toolArgs: `{"city":"Tokyo"}`,
	},
	{
		name: "openai responses stream", path: "/v1/responses", contentType: "text/event-stream",
		fixture: "openai_responses/stream_reasoning_function_call.sse",
		call: func(t *testing.T, base string) []string {
			c := openaiClient(base)
			s := c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
				Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("compute")},
			})
			var raws []string
			completed := false
			for s.Next() {
				ev := s.Current()
				raws = append(raws, ev.RawJSON())
				if ev.Type == "response.completed" {
					completed = ev.Response.Usage.TotalTokens == 522
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if !completed {
				t.Error("SDK did not see response.completed with total_tokens 522")
			}
			return raws
		},
		tokensIn: 53, tokensOut: 469, tokensTotal: 522, reasoning: i64(448),
		toolName: "final_result", toolCallID: "call_CWXgs68YprAjp6t0371hiPOI", toolArgs: `{"result":6666}`,
	},
	{
		name: "openai chat json", path: "/v1/chat/completions", contentType: "application/json",
		fixture: "openai_chat/json_text_usage_details.json",
		call: func(t *testing.T, base string) []string {
			c := openaiClient(base)
			r, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			if err != nil {
				t.Fatal(err)
			}
			if r.Choices[0].FinishReason != "stop" {
				t.Errorf("SDK saw finish_reason %q", r.Choices[0].FinishReason)
			}
			return []string{r.RawJSON()}
		},
		tokensIn: 16, tokensOut: 363, tokensTotal: 379, reasoning: i64(0), finish: "stop",
	},
	{
		name: "openai chat stream", path: "/v1/chat/completions", contentType: "text/event-stream",
		fixture: "openai_chat/stream_tool_call_usage_only_chunk.sse",
		call: func(t *testing.T, base string) []string {
			c := openaiClient(base)
			s := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
				Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather")},
			})
			var acc openai.ChatCompletionAccumulator
			var raws []string
			for s.Next() {
				ch := s.Current()
				acc.AddChunk(ch)
				raws = append(raws, ch.RawJSON())
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if tc := acc.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Arguments != `{"city":"Edinburgh","country":"UK","units":"c"}` {
				t.Errorf("SDK accumulated tool calls %+v", tc)
			}
			return raws
		},
		tokensIn: 76, tokensOut: 24, tokensTotal: 100, reasoning: i64(0), finish: "tool_calls",
		toolName: "GetWeatherArgs", toolCallID: "call_c91SqDXlYFuETYv8mUHzz6pp", toolArgs: `{"city":"Edinburgh","country":"UK","units":"c"}`,
	},
	{
		name: "anthropic messages json", path: "/v1/messages", contentType: "application/json",
		fixture: "anthropic_messages/json_tool_use.json",
		call: func(t *testing.T, base string) []string {
			c := anthropicClient(base)
			m, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
				Model: "claude-sonnet-4", MaxTokens: 256,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("json please"))},
			})
			if err != nil {
				t.Fatal(err)
			}
			if m.StopReason != "tool_use" {
				t.Errorf("SDK saw stop_reason %q", m.StopReason)
			}
			return []string{m.RawJSON()}
		},
		tokensIn: 1151, tokensOut: 87, tokensTotal: 1238, finish: "tool_use",
		toolName: "json", toolCallID: "toolu_01Q9ExVZnzZj7E2QQYHYtNUa",
	},
	{
		name: "anthropic messages stream", path: "/v1/messages", contentType: "text/event-stream",
		fixture: "anthropic_messages/stream_tool_use_input_json_delta.sse",
		call: func(t *testing.T, base string) []string {
			c := anthropicClient(base)
			s := c.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
				Model: "claude-sonnet-4", MaxTokens: 256,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in SF"))},
			})
			var m anthropic.Message
			var raws []string
			for s.Next() {
				ev := s.Current()
				raws = append(raws, ev.RawJSON())
				if err := m.Accumulate(ev); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if m.Usage.OutputTokens != 65 || m.StopReason != "tool_use" {
				t.Errorf("SDK accumulated output_tokens %d stop %q", m.Usage.OutputTokens, m.StopReason)
			}
			return raws
		},
		tokensIn: 377, tokensOut: 65, tokensTotal: 442, finish: "tool_use",
		toolName: "get_weather", toolCallID: "toolu_01NRLabsLyVHZPKxbKvkfSMn", toolArgs: `{"location":"Paris"}`,
	},
}

// TestSDKsThroughGateway drives the official Go SDKs through the gateway: each gets exactly what it
// gets from the upstream directly, and each call lands as one capture line whose content matches
// the fixture's key values.
func TestSDKsThroughGateway(t *testing.T) {
	for _, tc := range sdkCases {
		t.Run(tc.name, func(t *testing.T) {
			body := fixture(t, tc.fixture)
			e := newEnv(t, capturetest.Replay(http.StatusOK, tc.contentType, body))

			viaGateway := tc.call(t, e.gw.URL+"/ng-rollout/sdk-1")
			direct := tc.call(t, e.up.URL)
			if strings.Join(viaGateway, "\n") != strings.Join(direct, "\n") {
				t.Errorf("SDK decoded different objects through the gateway:\n%q\nvs direct\n%q", viaGateway, direct)
			}

			reqs := e.up.Requests()
			if len(reqs) != 2 || reqs[0].Path != tc.path || reqs[1].Path != tc.path {
				t.Fatalf("upstream saw %d requests (%v), want 2 on %s", len(reqs), reqs, tc.path)
			}
			for _, k := range []string{"Authorization", "X-Api-Key", "User-Agent", "Content-Type", "Accept-Encoding"} {
				if g, d := reqs[0].Header.Values(k), reqs[1].Header.Values(k); strings.Join(g, ",") != strings.Join(d, ",") {
					t.Errorf("header %s: upstream got %q via the gateway, %q directly", k, g, d)
				}
			}

			l := e.one("sdk-1")
			if l.Dialect == "" || *l.StatusCode != 200 || l.ErrorCategory != nil {
				t.Fatalf("line: dialect %q status %v category %s", l.Dialect, deref(l.StatusCode), l.Category())
			}
			var sent, captured bytes.Buffer
			json.Compact(&sent, reqs[0].Body)
			json.Compact(&captured, l.Request)
			if sent.String() != captured.String() {
				t.Errorf("captured request\n%s\nwant what the SDK sent\n%s", captured.String(), sent.String())
			}
			if l.ModelRef == nil || l.ModelRef.Name != "policy_model" || l.ModelRef.Type != "responses_api_models" {
				t.Errorf("model_ref %+v", l.ModelRef)
			}
			if tc.contentType == "text/event-stream" {
				if l.ResponseRaw == nil || *l.ResponseRaw != string(body) {
					t.Errorf("response_raw is not the streamed body")
				}
			} else if l.Has("response_raw") {
				t.Errorf("a parsed JSON body kept response_raw")
			}
			if l.Has("request_raw") {
				t.Errorf("a JSON request kept request_raw")
			}
			if deref(l.ResponseSource) != "upstream" || deref(l.UpstreamAttempted) != true || deref(l.UpstreamStatusCode) != 200 {
				t.Errorf("provenance: source %v attempted %v upstream status %v", deref(l.ResponseSource), deref(l.UpstreamAttempted), deref(l.UpstreamStatusCode))
			}

			raw, _ := os.ReadFile(mustPath(e.store.CapturePath("sdk-1")))
			for _, secret := range []string{"sk-test-secret", "sk-ant-test-secret"} {
				if strings.Contains(string(raw), secret) || strings.Contains(e.logs.String(), secret) {
					t.Errorf("API key %q persisted in the capture file or the log", secret)
				}
			}

			r := l.Record
			if deref(r.TokensIn) != tc.tokensIn || deref(r.TokensOut) != tc.tokensOut || deref(r.TokensTotal) != tc.tokensTotal {
				t.Errorf("tokens in/out/total = %v/%v/%v, want %d/%d/%d", deref(r.TokensIn), deref(r.TokensOut), deref(r.TokensTotal), tc.tokensIn, tc.tokensOut, tc.tokensTotal)
			}
			if tc.reasoning != nil && deref(r.TokensReasoning) != *tc.reasoning {
				t.Errorf("tokens_reasoning = %v, want %d", deref(r.TokensReasoning), *tc.reasoning)
			}
			if tc.finish != "" && deref(r.FinishReason) != tc.finish {
				t.Errorf("finish_reason = %v, want %s", deref(r.FinishReason), tc.finish)
			}
			if tc.toolName != "" {
				if len(r.ToolCalls) != 1 {
					t.Fatalf("tool_calls = %d, want 1", len(r.ToolCalls))
				}
				tcall := r.ToolCalls[0]
				if deref(tcall.Name) != tc.toolName || deref(tcall.CallID) != tc.toolCallID {
					t.Errorf("tool call %v %v, want %s %s", deref(tcall.Name), deref(tcall.CallID), tc.toolName, tc.toolCallID)
				}
				if tc.toolArgs != "" {
					var got, want bytes.Buffer
					json.Compact(&got, tcall.Arguments)
					json.Compact(&want, []byte(tc.toolArgs))
					if got.String() != want.String() {
						t.Errorf("tool arguments %s, want %s", got.String(), want.String())
					}
				}
			}
		})
	}
}

// TestRawBytesUnchanged compares, with a plain HTTP client that does no decoding, the status,
// headers and body bytes the gateway returns with what the upstream returns directly.
func TestRawBytesUnchanged(t *testing.T) {
	for _, tc := range sdkCases {
		t.Run(tc.name, func(t *testing.T) {
			body := fixture(t, tc.fixture)
			e := newEnv(t, capturetest.Replay(http.StatusOK, tc.contentType, body))
			get := func(url string) (*http.Response, []byte) {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"model":"m","stream":true}`))
				req.Header.Set("Accept-Encoding", "gzip, deflate, br, zstd")
				resp, err := rawClient().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				return resp, b
			}
			gResp, gBody := get(e.url("raw-1", tc.path))
			dResp, dBody := get(e.up.URL + tc.path)
			if !bytes.Equal(gBody, body) || !bytes.Equal(dBody, body) {
				t.Fatalf("body differs: gateway %d bytes, direct %d bytes, fixture %d bytes", len(gBody), len(dBody), len(body))
			}
			if gResp.StatusCode != dResp.StatusCode {
				t.Errorf("status %d, direct %d", gResp.StatusCode, dResp.StatusCode)
			}
			id := gResp.Header.Get(gateway.HeaderModelCallID)
			if l := e.one("raw-1"); id == "" || id != l.ModelCallID {
				t.Errorf("x-nemo-gym-model-call-id %q, capture line says %q", id, l.ModelCallID)
			}
			gResp.Header.Del(gateway.HeaderModelCallID)
			for _, h := range []http.Header{gResp.Header, dResp.Header} {
				h.Del("Date")
			}
			if g, d := headerString(gResp.Header), headerString(dResp.Header); g != d {
				t.Errorf("headers differ:\ngateway %s\ndirect  %s", g, d)
			}
		})
	}
}

func mustPath(p string, err error) string {
	if err != nil {
		panic(err)
	}
	return p
}

func headerString(h http.Header) string {
	var b strings.Builder
	h.Write(&b)
	return b.String()
}
