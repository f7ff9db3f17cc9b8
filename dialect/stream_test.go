package dialect

import (
	"fmt"
	"testing"
)

// TestWriteReportsTerminalChunk: Write reports true for exactly the chunk that completes the
// first terminal event (the chunk NeMo Gym's middleware holds until the capture line is durable,
// also when the event is split across two chunks), End for an unterminated one.
func TestWriteReportsTerminalChunk(t *testing.T) {
	tests := []struct {
		name   string
		d      Dialect
		chunks []string
		want   []bool // per Write, then End
		term   Terminal
	}{
		{"terminal split across chunks (item 9)", Messages,
			[]string{"event: message_", "stop\ndata: {\"type\":\"message_stop\"}\n\n", ""},
			[]bool{false, true, false, false}, TerminalComplete},
		{"blank line alone completes it", Chat,
			[]string{"data: [DONE]\n", "\n"}, []bool{false, true, false}, TerminalComplete},
		{"CRLF: the CR of the blank line completes it", Chat,
			[]string{"data: [DONE]\r\n\r", "\n"}, []bool{true, false, false}, TerminalComplete},
		{"CRLF: a CR ending the data line is not enough", Chat,
			[]string{"data: [DONE]\r", "\n\r\n"}, []bool{false, true, false}, TerminalComplete},
		{"earlier events sharing the chunk", Responses,
			[]string{"event: response.output_text.delta\ndata: {}\n\nevent: response.completed\ndata: {}\n\nevent: x\n\n"},
			[]bool{true, false}, TerminalComplete},
		{"only the first terminal is reported", Responses,
			[]string{"event: error\ndata: {}\n\n", "event: response.failed\ndata: {}\n\n", "data: {\"type\":\"response.completed\"}\n\n"},
			[]bool{true, false, false, false}, TerminalError},
		{"bytes after the terminal", Chat,
			[]string{"data: [DONE]\n\n", ": trailing comment\n\n", "data: {\"error\":1}\n\n"},
			[]bool{true, false, false, false}, TerminalComplete},
		{"unterminated terminal seen by End", Messages,
			[]string{"event: message_stop\n", "data: {\"type\":\"message_stop\"}"},
			[]bool{false, false, true}, TerminalComplete},
		{"no terminal", Chat,
			[]string{"data: {\"choices\":[]}\n\n"}, []bool{false, false}, TerminalNone},
		{"empty chunks", Chat,
			[]string{"", "data: [DONE]\n\n", ""}, []bool{false, true, false, false}, TerminalComplete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStream(tt.d)
			var got []bool
			for _, c := range tt.chunks {
				got = append(got, s.Write([]byte(c)))
			}
			got = append(got, s.End())
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("reports %v, want %v", got, tt.want)
			}
			if s.Terminal() != tt.term {
				t.Fatalf("Terminal() = %v, want %v", s.Terminal(), tt.term)
			}
		})
	}
}
