package dialect

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/sse"
)

func TestGeminiPaths(t *testing.T) {
	tests := []struct {
		path  string
		ok    bool
		model string
	}{
		{"/v1beta/models/gemini-2.5-flash:generateContent", true, "gemini-2.5-flash"},
		{"/v1beta/models/gemini-2.5-pro:streamGenerateContent", true, "gemini-2.5-pro"},
		{"/v1/models/gemini-2.0-flash-001:generateContent", true, "gemini-2.0-flash-001"},
		{"/v1alpha/models/gemini-3-pro-preview:streamGenerateContent", true, "gemini-3-pro-preview"},
		{"/v1beta/tunedModels/my-model-123:generateContent", true, "my-model-123"},
		{"/v1beta/models/gemini-2.5-flash:countTokens", false, ""},
		{"/v1beta/models/gemini-2.5-flash:embedContent", false, ""},
		{"/v1beta/models/gemini-2.5-flash", false, ""},
		{"/v1beta/models/:generateContent", false, ""},
		{"/v1beta/models/a/b:generateContent", false, ""},
		{"/v2/models/m:generateContent", false, ""},
		{"/v1beta/models/m:generateContent/", false, ""},
		{"v1beta/models/m:generateContent", false, ""},
		{"/ng-rollout/r/v1beta/models/m:generateContent", false, ""},
		{"/v1beta/models/m:generateContent?alt=sse", false, ""}, // the caller strips the query
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			d, ok := ForPath(tt.path)
			if ok != tt.ok || (ok && d != Gemini) {
				t.Fatalf("ForPath(%q) = %q, %v; want gemini: %v", tt.path, d, ok, tt.ok)
			}
			if got := ModelOfPath(tt.path); got != tt.model {
				t.Fatalf("ModelOfPath(%q) = %q, want %q", tt.path, got, tt.model)
			}
		})
	}
	for _, p := range []string{"/v1/responses", "/v1/chat/completions", "/v1/messages"} {
		if m := ModelOfPath(p); m != "" {
			t.Errorf("ModelOfPath(%q) = %q, want none", p, m)
		}
	}
}

func TestGeminiTerminal(t *testing.T) {
	tests := []struct {
		name string
		sse  string
		want Terminal
	}{
		{"text chunk", `data: {"candidates":[{"content":{"parts":[{"text":"a"}],"role":"model"},"index":0}]}` + "\r\n\r\n", TerminalNone},
		{"finish reason", `data: {"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"STOP","index":0}]}` + "\r\n\r\n", TerminalComplete},
		{"max tokens", `data: {"candidates":[{"finishReason":"MAX_TOKENS"}]}` + "\n\n", TerminalComplete},
		{"safety", `data: {"candidates":[{"finishReason":"SAFETY","safetyRatings":[]}]}` + "\n\n", TerminalComplete},
		{"empty finish reason", `data: {"candidates":[{"finishReason":""}]}` + "\n\n", TerminalNone},
		{"one of two candidates finished", `data: {"candidates":[{"index":0,"finishReason":"STOP"},{"index":1}]}` + "\n\n", TerminalNone},
		{"both candidates finished", `data: {"candidates":[{"index":0,"finishReason":"STOP"},{"index":1,"finishReason":"STOP"}]}` + "\n\n", TerminalComplete},
		{"blocked prompt", `data: {"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":3}}` + "\n\n", TerminalComplete},
		{"usage only", `data: {"usageMetadata":{"promptTokenCount":3}}` + "\n\n", TerminalNone},
		{"error object", `data: {"error":{"code":500,"message":"internal","status":"INTERNAL"}}` + "\n\n", TerminalError},
		{"error event", "event: error\ndata: {}\n\n", TerminalError},
		{"not json", "data: [DONE]\n\n", TerminalNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TerminalNone
			var dec sse.Decoder
			dec.Feed([]byte(tt.sse), func(ev sse.Event) {
				if k := Gemini.TerminalOf(ev); got == TerminalNone {
					got = k
				}
			})
			if got != tt.want {
				t.Fatalf("terminal %v, want %v", got, tt.want)
			}
			if s := runStream(Gemini, []byte(tt.sse), 3); s.terminal != tt.want {
				t.Fatalf("Stream: terminal %v, want %v", s.terminal, tt.want)
			}
		})
	}
}

// TestGeminiReassembly: thought and answer texts are joined separately, function calls stay
// whole, candidates come out by index, and the last top-level values win.
func TestGeminiReassembly(t *testing.T) {
	body := strings.Join([]string{
		`{"candidates":[{"content":{"parts":[{"text":"Let me ","thought":true}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":10},"modelVersion":"gemini-2.5-pro","responseId":"r1"}`,
		`{"candidates":[{"content":{"parts":[{"text":"think.","thought":true}],"role":"model"},"index":0},{"content":{"parts":[{"text":"Other"}],"role":"model"},"index":1}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"I will "},{"text":"call it."}],"role":"model"},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"id":"c1","name":"read_file","args":{"path":"a.txt"}},"thoughtSignature":"sig"}],"role":"model"},"finishReason":"STOP","index":0,"finishMessage":"done"},{"finishReason":"MAX_TOKENS","index":1}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":7,"thoughtsTokenCount":5,"totalTokenCount":22},"modelVersion":"gemini-2.5-pro","responseId":"r1"}`,
	}, "\r\n\r\ndata: ")
	body = "data: " + body + "\r\n\r\n"
	want := `{"candidates":[` +
		`{"content":{"parts":[{"text":"Let me think.","thought":true},{"text":"I will call it."},{"functionCall":{"id":"c1","name":"read_file","args":{"path":"a.txt"}},"thoughtSignature":"sig"}],"role":"model"},"finishReason":"STOP","index":0,"finishMessage":"done"},` +
		`{"content":{"parts":[{"text":"Other"}],"role":"model"},"finishReason":"MAX_TOKENS","index":1}],` +
		`"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":7,"thoughtsTokenCount":5,"totalTokenCount":22},"modelVersion":"gemini-2.5-pro","responseId":"r1"}`
	for _, n := range chunkSizes {
		r := runStream(Gemini, []byte(body), n)
		if string(r.response) != want {
			t.Fatalf("chunks of %d:\n got %s\nwant %s", n, r.response, want)
		}
		if r.terminal != TerminalComplete {
			t.Fatalf("terminal %v", r.terminal)
		}
	}
}

// TestGeminiCandidateBound: a stream naming more candidate indexes than the API ever returns keeps
// the first geminiMaxCandidates, so memory does not grow with the index count.
func TestGeminiCandidateBound(t *testing.T) {
	var b strings.Builder
	for i := range geminiMaxCandidates + 10 {
		fmt.Fprintf(&b, "data: {\"candidates\":[{\"index\":%d,\"content\":{\"parts\":[{\"text\":\"x\"}]}}]}\n\n", i*1000)
	}
	r := runStream(Gemini, []byte(b.String()), 0)
	var got struct {
		Candidates []json.RawMessage `json:"candidates"`
	}
	if err := json.Unmarshal(r.response, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Candidates) != geminiMaxCandidates {
		t.Fatalf("%d candidates kept, want %d", len(got.Candidates), geminiMaxCandidates)
	}
}

func TestGeminiErrorBody(t *testing.T) {
	tests := []struct {
		status int
		code   string
		want   string
	}{
		{400, "invalid_rollout_id", `{"error":{"code":400,"message":"m","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"invalid_rollout_id","domain":"modelcalls"}]}}`},
		{502, "", `{"error":{"code":502,"message":"m","status":"UNAVAILABLE"}}`},
		{504, "", `{"error":{"code":504,"message":"m","status":"DEADLINE_EXCEEDED"}}`},
		{408, "", `{"error":{"code":408,"message":"m","status":"DEADLINE_EXCEEDED"}}`},
		{413, "", `{"error":{"code":413,"message":"m","status":"FAILED_PRECONDITION"}}`},
		{429, "", `{"error":{"code":429,"message":"m","status":"RESOURCE_EXHAUSTED"}}`},
		{503, "", `{"error":{"code":503,"message":"m","status":"UNAVAILABLE"}}`},
		{500, "", `{"error":{"code":500,"message":"m","status":"INTERNAL"}}`},
	}
	for _, tt := range tests {
		got := string(ErrorBody(Gemini, tt.status, tt.code, "m"))
		if got != tt.want {
			t.Errorf("ErrorBody(gemini, %d, %q):\n got %s\nwant %s", tt.status, tt.code, got, tt.want)
		}
		if _, msg := ParseResponse([]byte(got)); msg != "m" {
			t.Errorf("ParseResponse of the error body: message %q", msg)
		}
	}
}

func TestGeminiConversation(t *testing.T) {
	req := `{"systemInstruction":{"parts":[{"text":"You are terse."}]},
	"contents":[
	 {"role":"user","parts":[{"text":"Read a.txt"}]},
	 {"role":"model","parts":[{"text":"plan","thought":true},{"functionCall":{"id":"c1","name":"read_file","args":{"path":"a.txt"}},"thoughtSignature":"s"}]},
	 {"role":"user","parts":[{"functionResponse":{"id":"c1","name":"read_file","response":{"output":"hello"}}}]},
	 {"role":"user","parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}],
	"tools":[{"functionDeclarations":[{"name":"read_file"},{"name":"write_file"}]},{"googleSearch":{}}],
	"generationConfig":{"thinkingConfig":{"includeThoughts":true}}}`
	msgs, tools := ParseRequest([]byte(req))
	want := []Message{
		{Role: "system", Parts: []Part{{Kind: "text", Text: "You are terse."}}},
		{Role: "user", Parts: []Part{{Kind: "text", Text: "Read a.txt"}}},
		{Role: "assistant", Parts: []Part{{Kind: "reasoning", Text: "plan"}, {Kind: "tool_call", CallID: "c1", Name: "read_file", Arguments: `{"path":"a.txt"}`}}},
		{Role: "tool", Parts: []Part{{Kind: "tool_result", CallID: "c1", Name: "read_file", Text: `{"output":"hello"}`}}},
		{Role: "user", Parts: []Part{{Kind: "image", Name: "inlineData"}}},
	}
	if !reflect.DeepEqual(msgs, want) {
		t.Fatalf("messages\n got %+v\nwant %+v", msgs, want)
	}
	if !reflect.DeepEqual(tools, []string{"read_file", "write_file", "googleSearch"}) {
		t.Fatalf("tools %q", tools)
	}
	out, errMsg := ParseResponse([]byte(`{"candidates":[{"content":{"parts":[{"text":"done"},{"functionCall":{"name":"f","args":{}}}],"role":"model"},"finishReason":"STOP"}]}`))
	wantOut := []Message{{Role: "assistant", Parts: []Part{{Kind: "text", Text: "done"}, {Kind: "tool_call", Name: "f", Arguments: "{}"}}}}
	if !reflect.DeepEqual(out, wantOut) || errMsg != "" {
		t.Fatalf("output %+v, error %q", out, errMsg)
	}
}

func TestClientEnv(t *testing.T) {
	got := ClientEnv("http://gw/ng-rollout/r")
	want := []EnvVar{
		{"OPENAI_BASE_URL", "http://gw/ng-rollout/r/v1"},
		{"OPENAI_API_BASE", "http://gw/ng-rollout/r/v1"},
		{"ANTHROPIC_BASE_URL", "http://gw/ng-rollout/r"},
		{"GOOGLE_GEMINI_BASE_URL", "http://gw/ng-rollout/r"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ClientEnv = %v, want %v", got, want)
	}
}

func TestProvider(t *testing.T) {
	for d, want := range map[Dialect]string{Responses: "openai", Chat: "openai", Messages: "anthropic", Gemini: "gcp.gemini", "other": ""} {
		if got := d.Provider(); got != want {
			t.Errorf("%q.Provider() = %q, want %q", d, got, want)
		}
	}
}

func TestStreamOnPath(t *testing.T) {
	tests := []struct {
		path, query   string
		stream, known bool
	}{
		{"/v1beta/models/m:streamGenerateContent", "alt=sse", true, true},
		{"/v1beta/models/m:streamGenerateContent", "key=k&alt=sse", true, true},
		{"/v1beta/models/m:streamGenerateContent", "", false, true},
		{"/v1beta/models/m:generateContent", "alt=sse", false, true},
		{"/v1/chat/completions", "", false, false},
		{"/v1/other", "", false, false},
	}
	for _, tt := range tests {
		if s, k := StreamOnPath(tt.path, tt.query); s != tt.stream || k != tt.known {
			t.Errorf("StreamOnPath(%q, %q) = %v, %v; want %v, %v", tt.path, tt.query, s, k, tt.stream, tt.known)
		}
	}
}
