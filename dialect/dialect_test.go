package dialect

import (
	"encoding/json"
	"testing"

	"github.com/modelcalls/modelcalls/sse"
)

func TestForPath(t *testing.T) {
	tests := []struct {
		path string
		want Dialect
		ok   bool
	}{
		{"/v1/responses", Responses, true},
		{"/v1/chat/completions", Chat, true},
		{"/v1/messages", Messages, true},
		{"/v1/completions", Completions, true},
		{"/v1/completions/", "", false},
		{"/v1/messages/", "", false},
		{"/v1/messages/count_tokens", "", false},
		{"/v1/models", "", false},
		{"/v1/Responses", "", false},
		{"v1/responses", "", false},
		{"/v1/messages?beta=true", "", false}, // the caller strips the query
		{"/ng-rollout/x/v1/messages", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, ok := ForPath(tt.path)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("ForPath(%q) = %q, %v; want %q, %v", tt.path, got, ok, tt.want, tt.ok)
			}
			if ok && !got.Valid() {
				t.Fatalf("%q is not Valid", got)
			}
		})
	}
}

// TestTerminalOf runs every terminal event NeMo Gym's capture middleware detects (error events
// for responses and messages, response.incomplete, "event:error" without a space and an error
// payload for chat, "data:[DONE]"), and our additions (data-only events typed in their JSON, data
// lines joined before decoding), from the raw SSE text of one stream through the decoder. want is the first terminal
// kind among the stream's events.
func TestTerminalOf(t *testing.T) {
	tests := []struct {
		name string
		d    Dialect
		sse  string
		want Terminal
	}{
		// Responses: event lines.
		{"responses completed", Responses, "event: response.completed\ndata: {}\n\n", TerminalComplete},
		{"responses completed no space", Responses, "event:response.completed\ndata: {}\n\n", TerminalComplete},
		{"responses completed extra white space", Responses, "event: \t response.completed\n\n", TerminalComplete},
		{"responses completed CRLF", Responses, "event: response.completed\r\ndata: {}\r\n\r\n", TerminalComplete},
		{"responses completed without data", Responses, "event: response.completed\n\n", TerminalComplete},
		{"responses incomplete", Responses, "event: response.incomplete\ndata: {}\n\n", TerminalIncomplete},
		{"responses failed", Responses, "event: response.failed\ndata: {}\n\n", TerminalError},
		{"responses error event", Responses, "event: error\ndata: {\"type\":\"error\",\"code\":\"x\"}\n\n", TerminalError},
		{"responses trailing space defeats", Responses, "event: response.completed \ndata: {}\n\n", TerminalNone},
		{"responses field name case", Responses, "Event: response.completed\n\n", TerminalNone},
		{"responses value case", Responses, "event: Response.Completed\n\n", TerminalNone},
		{"responses comment never matches", Responses, ": event: response.completed\n\n", TerminalNone},
		{"responses delta", Responses, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\"}\n\n", TerminalNone},
		{"responses DONE is not terminal", Responses, "data: [DONE]\n\n", TerminalNone},
		{"responses message_stop is not terminal", Responses, "event: message_stop\n\n", TerminalNone},
		// Responses: data-only events, recognised by their JSON type (NeMo Gym misses them).
		{"responses data-only completed", Responses, "data: {\"type\":\"response.completed\",\"response\":{}}\n\n", TerminalComplete},
		{"responses data-only incomplete", Responses, "data: {\"type\":\"response.incomplete\"}\n\n", TerminalIncomplete},
		{"responses data-only failed", Responses, "data: {\"type\":\"response.failed\"}\n\n", TerminalError},
		{"responses data-only error", Responses, "data: {\"type\":\"error\",\"message\":\"m\"}\n\n", TerminalError},
		{"responses default event type message", Responses, "event: message\ndata: {\"type\":\"response.completed\"}\n\n", TerminalComplete},
		{"responses data type split over lines", Responses, "data: {\"type\":\ndata: \"response.completed\"}\n\n", TerminalComplete},
		{"responses event line wins over data type", Responses, "event: response.output_text.delta\ndata: {\"type\":\"response.completed\"}\n\n", TerminalNone},
		{"responses data-only message_stop", Responses, "data: {\"type\":\"message_stop\"}\n\n", TerminalNone},
		{"responses data-only type not a string", Responses, "data: {\"type\":1}\n\n", TerminalNone},
		{"responses data not JSON", Responses, "data: response.completed\n\n", TerminalNone},
		{"responses NaN rejected", Responses, "data: {\"type\":\"response.completed\",\"x\":NaN}\n\n", TerminalNone},
		{"responses first terminal wins", Responses, "event: error\ndata: {}\n\nevent: response.failed\ndata: {}\n\n", TerminalError},
		// Messages.
		{"messages stop", Messages, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", TerminalComplete},
		{"messages stop no space", Messages, "event:message_stop\n\n", TerminalComplete},
		{"messages error", Messages, "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\"}}\n\n", TerminalError},
		{"messages data-only stop", Messages, "data: {\"type\":\"message_stop\"}\n\n", TerminalComplete},
		{"messages data-only error", Messages, "data: {\"type\":\"error\",\"error\":{}}\n\n", TerminalError},
		{"messages delta", Messages, "event: message_delta\ndata: {\"type\":\"message_delta\"}\n\n", TerminalNone},
		{"messages ping", Messages, "event: ping\ndata: {\"type\": \"ping\"}\n\n", TerminalNone},
		{"messages responses type", Messages, "data: {\"type\":\"response.completed\"}\n\n", TerminalNone},
		{"messages DONE", Messages, "data: [DONE]\n\n", TerminalNone},
		{"messages unterminated stop", Messages, "event: message_stop\ndata: {\"type\":\"message_stop\"}", TerminalComplete},
		// Chat.
		{"chat DONE", Chat, "data: [DONE]\n\n", TerminalComplete},
		{"chat DONE no space", Chat, "data:[DONE]\n\n", TerminalComplete},
		{"chat DONE CRLF", Chat, "data: [DONE]\r\n\r\n", TerminalComplete},
		{"chat DONE trailing space", Chat, "data: [DONE] \n\n", TerminalNone},
		{"chat DONE lower case", Chat, "data: [done]\n\n", TerminalNone},
		{"chat DONE unterminated", Chat, "data: [DONE]", TerminalComplete},
		{"chat event error", Chat, "event: error\ndata: {}\n\n", TerminalError},
		{"chat event error no space", Chat, "event:error\ndata: {\"message\":\"x\"}\n\n", TerminalError},
		{"chat error payload", Chat, "data: {\"error\":{\"code\":400,\"message\":\"Token limit reached\"}}\n\n", TerminalError},
		{"chat error payload false", Chat, "data: {\"error\":false}\n\n", TerminalError},
		{"chat error payload string", Chat, "data: {\"error\":\"\"}\n\n", TerminalError},
		{"chat error null", Chat, "data: {\"error\":null,\"choices\":[]}\n\n", TerminalNone},
		{"chat error payload split over lines", Chat, "data: {\"error\":\ndata: {\"message\":\"x\"}}\n\n", TerminalError},
		{"chat error in an array", Chat, "data: [{\"error\":1}]\n\n", TerminalNone},
		{"chat nested error", Chat, "data: {\"choices\":[{\"error\":1}]}\n\n", TerminalNone},
		{"chat data-only type error", Chat, "data: {\"type\":\"error\",\"message\":\"x\"}\n\n", TerminalError},
		{"chat content chunk", Chat, "data: {\"choices\":[{\"delta\":{\"content\":\"[DONE]\"}}]}\n\n", TerminalNone},
		{"chat message_stop", Chat, "event: message_stop\n\n", TerminalNone},
		{"chat response.completed", Chat, "event: response.completed\n\n", TerminalNone},
		{"chat error NaN", Chat, "data: {\"error\":NaN}\n\n", TerminalNone},
		{"chat error after DONE", Chat, "data: [DONE]\n\ndata: {\"error\":1}\n\n", TerminalComplete},
		// Other values.
		{"unknown dialect", Dialect("embeddings"), "data: [DONE]\n\nevent: error\n\n", TerminalNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TerminalNone
			for _, ev := range sse.Parse([]byte(tt.sse)) {
				if k := tt.d.TerminalOf(ev); k != TerminalNone {
					got = k
					break
				}
			}
			if got != tt.want {
				t.Fatalf("%s terminal of %q = %v, want %v", tt.d, tt.sse, got, tt.want)
			}
			// A Stream fed the same bytes agrees.
			s := NewStream(tt.d)
			s.Write([]byte(tt.sse))
			s.End()
			if s.Terminal() != tt.want {
				t.Fatalf("Stream.Terminal() = %v, want %v", s.Terminal(), tt.want)
			}
		})
	}
}

func TestTerminalString(t *testing.T) {
	for term, want := range map[Terminal]string{
		TerminalNone: "none", TerminalComplete: "complete", TerminalIncomplete: "incomplete",
		TerminalError: "error", Terminal(9): "Terminal(9)",
	} {
		if got := term.String(); got != want {
			t.Errorf("Terminal(%d).String() = %q, want %q", int(term), got, want)
		}
	}
}

func TestErrorBody(t *testing.T) {
	tests := []struct {
		name    string
		d       Dialect
		status  int
		code    string
		message string
		want    string
	}{
		{"responses invalid rollout id", Responses, 400, "invalid_rollout_id", `rollout id "a/b" must match ^[A-Za-z0-9][A-Za-z0-9._-]*$`,
			`{"error":{"message":"rollout id \"a/b\" must match ^[A-Za-z0-9][A-Za-z0-9._-]*$","type":"invalid_request_error","param":null,"code":"invalid_rollout_id"}}`},
		{"chat upstream unreachable", Chat, 502, "upstream_unreachable", "dial tcp: connection refused",
			`{"error":{"message":"dial tcp: connection refused","type":"server_error","param":null,"code":"upstream_unreachable"}}`},
		{"chat empty code is null", Chat, 429, "", "slow down",
			`{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":null}}`},
		{"messages invalid rollout id", Messages, 400, "invalid_rollout_id", "bad id <x> & \"y\"\n",
			`{"type":"error","error":{"type":"invalid_request_error","message":"bad id <x> & \"y\"\n"}}`},
		{"messages too large", Messages, 413, "request_too_large", "body over 32 MiB",
			`{"type":"error","error":{"type":"request_too_large","message":"body over 32 MiB"}}`},
		{"messages timeout", Messages, 504, "upstream_timeout", "no answer in 600 s",
			`{"type":"error","error":{"type":"timeout_error","message":"no answer in 600 s"}}`},
		{"messages shutting down", Messages, 503, "shutting_down", "draining",
			`{"type":"error","error":{"type":"overloaded_error","message":"draining"}}`},
		{"messages bad gateway", Messages, 502, "upstream_unreachable", "é\u2028",
			`{"type":"error","error":{"type":"api_error","message":"é` + "\u2028" + `"}}`},
		{"messages auth", Messages, 401, "", "no key",
			`{"type":"error","error":{"type":"authentication_error","message":"no key"}}`},
		{"unknown dialect is OpenAI-shaped", Dialect("x"), 404, "not_found", "nope",
			`{"error":{"message":"nope","type":"not_found_error","param":null,"code":"not_found"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ErrorBody(tt.d, tt.status, tt.code, tt.message)
			if string(got) != tt.want {
				t.Fatalf("ErrorBody\n got %s\nwant %s", got, tt.want)
			}
			// The body is JSON the provider's SDKs can read back.
			var v struct {
				Type  string `json:"type"`
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(got, &v); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			if v.Error.Message != tt.message {
				t.Fatalf("message round trip: got %q, want %q", v.Error.Message, tt.message)
			}
		})
	}
}
