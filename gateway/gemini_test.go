package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestGeminiCalls: Gemini's generateContent and streamGenerateContent?alt=sse calls are captured
// on their model paths (the colon verb and the query pass upstream unchanged), a stream is
// complete at its first event whose candidates all have a finishReason, and the record reads the
// model from modelVersion, the function call as a tool call and the usage with its thoughts.
func TestGeminiCalls(t *testing.T) {
	for _, tc := range []struct {
		name, fixture, path, query, ctype string
		finish, model                     string
		in, out                           int64
		tools                             int
	}{
		{"json", "google_gemini/json_function_call_thought_signature.json", "/v1beta/models/gemini-3-pro-preview:generateContent", "",
			"application/json", "STOP", "gemini-3-pro-preview", 29, 908, 1},
		{"sse function call", "google_gemini/stream_function_call_then_empty_text.sse", "/v1beta/models/gemini-3-pro-preview:streamGenerateContent", "alt=sse",
			"text/event-stream", "STOP", "gemini-3-pro-preview", 29, 60, 1},
		{"sse text", "google_gemini/stream_text_after_function_response.sse", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "alt=sse",
			"text/event-stream", "STOP", "gemini-2.5-flash", 138, 15, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := fixture(t, tc.fixture)
			e := newEnv(t, capturetest.Replay(http.StatusOK, tc.ctype, body))
			path := tc.path
			if tc.query != "" {
				path += "?" + tc.query
			}
			resp, got := e.post("g-1", path, `{"contents":[{"role":"user","parts":[{"text":"weather?"}]}]}`, map[string]string{"x-goog-api-key": "k"})
			if resp.StatusCode != 200 || string(got) != string(body) {
				t.Fatalf("client got %d and %d of %d bytes", resp.StatusCode, len(got), len(body))
			}
			if r := e.up.Requests()[0]; r.Path != tc.path || r.RawQuery != tc.query {
				t.Errorf("upstream saw %s?%s", r.Path, r.RawQuery)
			}
			l := e.one("g-1")
			rec := l.Record
			if l.Dialect != "gemini" || l.Category() != "<null>" {
				t.Fatalf("dialect %s category %s", l.Dialect, l.Category())
			}
			if deref(rec.FinishReason) != tc.finish || deref(rec.Model) != tc.model || *rec.TokensIn != tc.in || *rec.TokensOut != tc.out || len(rec.ToolCalls) != tc.tools {
				t.Errorf("record: finish %s model %s in %d out %d tools %d", deref(rec.FinishReason), deref(rec.Model), *rec.TokensIn, *rec.TokensOut, len(rec.ToolCalls))
			}
			if tc.ctype == "text/event-stream" && (l.ResponseRaw == nil || *l.ResponseRaw != string(body)) {
				t.Errorf("response_raw is not the whole stream")
			}
		})
	}
}

// TestGeminiStreamOutcomes: a stream cut before its finishReason is stream_truncated; an error
// object in the stream is upstream_error.
func TestGeminiStreamOutcomes(t *testing.T) {
	full := fixture(t, "google_gemini/stream_text_after_function_response.sse")
	events := capturetest.SSEEvents(full)
	for _, tc := range []struct {
		name, body, category string
	}{
		{"truncated", string(events[0]), "stream_truncated"},
		{"error object", string(events[0]) + "data: {\"error\":{\"code\":503,\"message\":\"The model is overloaded.\",\"status\":\"UNAVAILABLE\"}}\r\n\r\n", "upstream_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, capturetest.Replay(http.StatusOK, "text/event-stream", []byte(tc.body)))
			resp, got := e.post("g-2", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", `{"contents":[]}`, nil)
			if resp.StatusCode != 200 || string(got) != tc.body {
				t.Fatalf("client got %d, %q", resp.StatusCode, got)
			}
			if l := e.one("g-2"); l.Category() != tc.category {
				t.Errorf("category %s, want %s", l.Category(), tc.category)
			}
		})
	}
}

// TestGeminiLocalErrors: errors the gateway answers itself on a Gemini path have Google's error
// shape, so a Gemini client reads their message.
func TestGeminiLocalErrors(t *testing.T) {
	e := newEnv(t, capturetest.Replay(200, "application/json", []byte(`{}`)))
	resp, body := e.post("bad id!", "/v1beta/models/gemini-2.5-flash:generateContent", `{}`, nil)
	if resp.StatusCode != 400 || !strings.HasPrefix(string(body), `{"error":{"code":400,"message":`) || !strings.Contains(string(body), `"status":"INVALID_ARGUMENT"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// TestGeminiPathModel: a Gemini call's line keeps the model its path names, and a response without
// modelVersion (an error body here) takes its record's model from it; a Chat call's line has no
// path_model.
func TestGeminiPathModel(t *testing.T) {
	e := newEnv(t, capturetest.Replay(http.StatusTooManyRequests, "application/json",
		[]byte(`{"error":{"code":429,"message":"Resource has been exhausted.","status":"RESOURCE_EXHAUSTED"}}`)))
	if resp, _ := e.post("g-3", "/v1beta/models/gemini-2.5-flash:generateContent", `{"contents":[]}`, nil); resp.StatusCode != 429 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	l := e.one("g-3")
	if l.PathModel == nil || *l.PathModel != "gemini-2.5-flash" {
		t.Errorf("path_model = %v, want gemini-2.5-flash", l.PathModel)
	}
	if l.Record == nil || l.Record.Model == nil || *l.Record.Model != "gemini-2.5-flash" {
		t.Errorf("record model = %v, want gemini-2.5-flash", l.Record)
	}
	if resp, _ := e.post("c-3", "/v1/chat/completions", `{"model":"m","messages":[]}`, nil); resp.StatusCode != 429 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if l := e.one("c-3"); l.Has("path_model") {
		t.Errorf("a chat line has path_model: %s", l.Data)
	}
}
