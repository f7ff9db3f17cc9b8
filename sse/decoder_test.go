package sse

import (
	"reflect"
	"strings"
	"testing"
)

// feedChunks decodes body split at the given offsets (ascending, within the body) and flushes.
func feedChunks(body []byte, cuts []int) []Event {
	var d Decoder
	var got []Event
	emit := func(ev Event) { got = append(got, ev) }
	prev := 0
	for _, c := range cuts {
		d.Feed(body[prev:c], emit)
		prev = c
	}
	d.Feed(body[prev:], emit)
	d.Flush(emit)
	return got
}

// feedEvery decodes body in chunks of n bytes and flushes.
func feedEvery(body []byte, n int) []Event {
	var cuts []int
	for c := n; c < len(body); c += n {
		cuts = append(cuts, c)
	}
	return feedChunks(body, cuts)
}

func TestDecoder(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Event
	}{
		{"empty", "", nil},
		{"only blank lines", "\n\r\n\r\n\n", nil},
		{"one event LF", "event: a\ndata: x\n\n",
			[]Event{{Type: "a", Data: "x", HasData: true}}},
		{"one event CRLF", "event: a\r\ndata: x\r\n\r\n",
			[]Event{{Type: "a", Data: "x", HasData: true}}},
		{"one event lone CR", "event: a\rdata: x\r\r",
			[]Event{{Type: "a", Data: "x", HasData: true}}},
		{"mixed line ends", "data: 1\r\n\ndata: 2\n\r\ndata: 3\r\rdata: 4\n\n",
			[]Event{{Data: "1", HasData: true}, {Data: "2", HasData: true}, {Data: "3", HasData: true}, {Data: "4", HasData: true}}},
		{"CR LF is one break, LF CR is two", "data: a\r\n\n\rdata: b\n\r",
			[]Event{{Data: "a", HasData: true}, {Data: "b", HasData: true}}},
		{"multi-line data joined with LF", "data: {\"a\":\ndata: 1}\n\n",
			[]Event{{Data: "{\"a\":\n1}", HasData: true}}},
		{"empty data lines", "data\ndata:\ndata: \n\n",
			[]Event{{Data: "\n\n", HasData: true}}},
		{"comments ignored", ": keep-alive\n\n: OPENROUTER PROCESSING\r\n\r\n:\ndata: x\n: inside\n\n",
			[]Event{{Data: "x", HasData: true}}},
		{"event without data is an event", "event: message_stop\n\n",
			[]Event{{Type: "message_stop"}}},
		{"id only", "id: 7\n\n", []Event{{ID: "7"}}},
		{"retry and unknown fields make no event", "retry: 3000\nfoo: bar\n\n", nil},
		{"retry does not disturb data", "data: a\nretry: 10\ndata: b\n\n",
			[]Event{{Data: "a\nb", HasData: true}}},
		{"no space after colon", "event:error\ndata:{}\n\n",
			[]Event{{Type: "error", Data: "{}", HasData: true}}},
		{"all leading white space stripped", "event: \t  error\ndata:\u00a0\u2003 x \n\n",
			[]Event{{Type: "error", Data: "x ", HasData: true}}},
		{"python separators are white space", "data:\x1c\x1f\x0b\x0cx\n\n",
			[]Event{{Data: "x", HasData: true}}},
		{"trailing white space kept", "event: response.completed \ndata: 1\n\n",
			[]Event{{Type: "response.completed ", Data: "1", HasData: true}}},
		{"field names are case-sensitive", "Data: x\nEVENT: y\n\n", nil},
		{"field without colon", "data\n\n", []Event{{Data: "", HasData: true}}},
		{"colon in value kept", "data: a: b\n\n", []Event{{Data: "a: b", HasData: true}}},
		{"last event type wins", "event: a\nevent: b\ndata: 1\n\n",
			[]Event{{Type: "b", Data: "1", HasData: true}}},
		{"id is per event", "id: 1\ndata: a\n\ndata: b\n\n",
			[]Event{{ID: "1", Data: "a", HasData: true}, {Data: "b", HasData: true}}},
		{"unterminated last event flushed", "data: a\n\nevent: message_stop\ndata: {}",
			[]Event{{Data: "a", HasData: true}, {Type: "message_stop", Data: "{}", HasData: true}}},
		{"unterminated after one line break", "data: [DONE]\n",
			[]Event{{Data: "[DONE]", HasData: true}}},
		{"unterminated after CR", "data: [DONE]\r",
			[]Event{{Data: "[DONE]", HasData: true}}},
		{"byte order mark skipped once", "\ufeffdata: a\n\n\ufeffdata: b\n\n",
			[]Event{{Data: "a", HasData: true}}},
		{"unicode line separators are not breaks", "data: a\u2028b\u0085c\x0bd\n\n",
			[]Event{{Data: "a\u2028b\u0085c\x0bd", HasData: true}}},
		{"invalid utf-8 passed through", "data: \xff\xfe\n\n",
			[]Event{{Data: "\xff\xfe", HasData: true}}},
		{"NUL kept", "data: a\x00b\n\n", []Event{{Data: "a\x00b", HasData: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.in)
			if got := Parse(body); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse(%q)\n got %#v\nwant %#v", tt.in, got, tt.want)
			}
			// Every single split point, and every byte on its own.
			for c := 0; c <= len(body); c++ {
				if got := feedChunks(body, []int{c}); !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("split at %d of %q\n got %#v\nwant %#v", c, tt.in, got, tt.want)
				}
			}
			if got := feedEvery(body, 1); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("byte by byte %q\n got %#v\nwant %#v", tt.in, got, tt.want)
			}
		})
	}
}

// TestDecoderEmitsOnTheCompletingChunk checks that an event is emitted by the Feed call whose
// chunk holds its dispatching blank line, and not before.
func TestDecoderEmitsOnTheCompletingChunk(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   []int // number of events emitted by each Feed
	}{
		{"LF LF split", []string{"data: a\n", "\n"}, []int{0, 1}},
		{"CRLF split inside second break", []string{"data: a\r\n\r", "\n"}, []int{1, 0}},
		{"CRLF split between CR and LF", []string{"data: a\r", "\n\r\n"}, []int{0, 1}},
		{"lone CR then data", []string{"data: a\r", "\rdata: b\r", "\r"}, []int{0, 1, 1}},
		{"two events in one chunk", []string{"data: a\n\ndata: b\n\n"}, []int{2}},
		{"event type split", []string{"event: message_", "stop\ndata: {}\n", "\n"}, []int{0, 0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Decoder
			for i, c := range tt.chunks {
				n := 0
				d.Feed([]byte(c), func(Event) { n++ })
				if n != tt.want[i] {
					t.Fatalf("chunk %d (%q) emitted %d events, want %d", i, c, n, tt.want[i])
				}
			}
			n := 0
			d.Flush(func(Event) { n++ })
			if n != 0 {
				t.Fatalf("Flush emitted %d events after a terminated stream", n)
			}
		})
	}
}

func TestDecoderReuseAfterFlush(t *testing.T) {
	var d Decoder
	var got []Event
	emit := func(ev Event) { got = append(got, ev) }
	d.Feed([]byte("event: x\ndata: partial"), emit)
	d.Flush(emit)
	d.Feed([]byte("\ufeffdata: next\r"), emit)
	d.Feed([]byte("\n\r\n"), emit)
	d.Flush(emit)
	want := []Event{{Type: "x", Data: "partial", HasData: true}, {Data: "next", HasData: true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
}

// TestDecoderBufferBounded checks that decoding many events keeps only the current line and event.
func TestDecoderBufferBounded(t *testing.T) {
	var d Decoder
	ev := []byte("event: e\ndata: " + strings.Repeat("x", 100) + "\n\n")
	for range 10000 {
		d.Feed(ev, func(Event) {})
	}
	if cap(d.line) > 256 || cap(d.data) > 256 {
		t.Fatalf("buffers grew with the stream: line cap %d, data cap %d", cap(d.line), cap(d.data))
	}
}
