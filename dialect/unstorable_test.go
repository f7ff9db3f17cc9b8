package dialect

import (
	"strings"
	"testing"
)

// An event that is JSON a lenient reader accepts but the store cannot hold (a number overflowing
// a double, an unpaired surrogate escape) leaves no reconstruction: leaving the event out would
// rebuild a different response, such as the in_progress envelope in place of the completed one.
// Events that are not JSON at all are skipped as before.
func TestUnstorableEventLeavesNoResponse(t *testing.T) {
	const created = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"output\":[]}}\n\n"
	const chatStart = "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"hi\"}}]}\n\n"
	tests := []struct {
		name   string
		d      Dialect
		stream string
		want   bool // a response is rebuilt
	}{
		{"responses completed with 1e400", Responses, created +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"temperature\":1e400,\"output\":[]}}\n\n", false},
		{"chat delta with a lone surrogate", Chat, chatStart +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\ud800\"}}]}\n\ndata: [DONE]\n\n", false},
		{"messages delta with -1e999", Messages,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"role\":\"assistant\",\"content\":[]}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":-1e999}}\n\n" +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", false},
		{"chat event that is not JSON is skipped", Chat, chatStart + "data: {not json\n\ndata: [DONE]\n\n", true},
		{"responses with 1e-400 (reads as 0)", Responses, created +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"temperature\":1e-400,\"output\":[]}}\n\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStream(tt.d)
			defer s.Close()
			s.Write([]byte(tt.stream))
			s.End()
			if got := s.HasResponse(); got != tt.want {
				t.Fatalf("HasResponse = %v, want %v (response %s)", got, tt.want, s.Response())
			}
			if !tt.want && s.Response() != nil {
				t.Fatalf("Response = %s, want nil", s.Response())
			}
			if s.Terminal() == TerminalNone {
				t.Fatalf("terminal not detected")
			}
		})
	}
}

// Summary keeps the reconstruction but cuts texts that spilled to a file to their first bytes
// (none: ""), never inside a UTF-8 sequence; texts kept in memory stay whole.
func TestSummaryCutsSpilledText(t *testing.T) {
	const text = "0123456789abcdef\u00e9gh\u20acij" // é (2 bytes) at 16, € (3 bytes) at 20
	tests := []struct {
		textBytes int
		want      string
	}{
		{0, ""},
		{5, "01234"},
		{16, "0123456789abcdef"},
		{17, "0123456789abcdef"}, // é would be cut
		{18, "0123456789abcdef\u00e9"},
		{21, "0123456789abcdef\u00e9gh"}, // € would be cut
		{22, "0123456789abcdef\u00e9gh"},
		{23, "0123456789abcdef\u00e9gh\u20ac"},
		{100, "0123456789abcdef\u00e9gh\u20acij"},
	}
	for _, tt := range tests {
		s := NewStream(Chat)
		s.Limit(0, 16, t.TempDir())
		s.Write([]byte("data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"" + text + "\"}}]}\n\n" +
			"data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"short\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1}}\n\ndata: [DONE]\n\n"))
		s.End()
		full, sum := string(s.Response()), string(s.Summary(tt.textBytes))
		s.Close()
		whole := `"content":"` + text + `"`
		if !strings.Contains(full, whole) {
			t.Fatalf("Response %s lacks the spilled text", full)
		}
		want := strings.Replace(full, whole, `"content":"`+tt.want+`"`, 1)
		if sum != want {
			t.Errorf("Summary(%d)\n %s\nwant\n %s", tt.textBytes, sum, want)
		}
	}
}
