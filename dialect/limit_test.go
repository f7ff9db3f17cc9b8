package dialect

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// TestSpilledTextSameResponse feeds every fixture with a spill threshold of a few bytes, so every
// joined text goes through a temp file, and checks that WriteResponse gives the very bytes the
// in-memory reassembly gives, in every chunking; Close removes nothing it should keep.
func TestSpilledTextSameResponse(t *testing.T) {
	for _, file := range streamFixtures(t) {
		t.Run(fixtureName(file), func(t *testing.T) {
			d := fixtureDialect(t, file)
			body := readFile(t, file)
			want := runStream(d, body, 0).response
			for _, n := range []int{1, 97, len(body)} {
				s := NewStream(d)
				s.Limit(0, 3, t.TempDir())
				for off := 0; off < len(body); off += n {
					s.Write(body[off:min(off+n, len(body))])
				}
				s.End()
				var got bytes.Buffer
				if err := s.WriteResponse(&got); err != nil {
					t.Fatal(err)
				}
				if want == nil {
					want = []byte("null")
				}
				if !bytes.Equal(got.Bytes(), want) {
					t.Fatalf("chunks of %d: spilled reassembly differs\n got %s\nwant %s", n, got.Bytes(), want)
				}
				if r := s.Response(); string(r) != string(want) && !(r == nil && string(want) == "null") {
					t.Fatalf("chunks of %d: Response after spilling differs", n)
				}
				s.Close()
			}
		})
	}
}

// TestSpillKeepsMemoryFlat: a chat stream of 8 MiB of text deltas keeps less than a spill
// threshold of each text in memory, and the written response holds the whole text, multi-byte
// characters split across write pieces included.
func TestSpillKeepsMemoryFlat(t *testing.T) {
	dir := t.TempDir()
	s := NewStream(Chat)
	s.Limit(1<<20, 64<<10, dir)
	piece := `data: {"choices":[{"index":0,"delta":{"content":"héllo wörld ✓ \n"}}]}` + "\n\n"
	var want strings.Builder
	for range 8 << 20 / len(piece) {
		s.Write([]byte(piece))
		want.WriteString("héllo wörld ✓ \n")
	}
	s.Write([]byte("data: [DONE]\n\n"))
	st := s.r.(*chatState).choices[0]
	if len(st.content.mem) > 64<<10 || st.content.f == nil {
		t.Fatalf("content in memory: %d bytes, spilled %v", len(st.content.mem), st.content.f != nil)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("spill files must be unlinked at once, found %d", len(entries))
	}
	var got bytes.Buffer
	if err := s.WriteResponse(&got); err != nil {
		t.Fatal(err)
	}
	content := at(t, got.Bytes(), "choices.0.message.content")
	text, ok := jsonscan.String(content)
	if !ok || text != want.String() {
		t.Fatalf("content: %d bytes, want %d (ok %v)", len(text), want.Len(), ok)
	}
	s.Close()
}

// TestOversizedEvents: an event over the Stream's limit is left out of the reassembly and
// counted, yet still ends the stream when it is the terminal event (by event type, or by the
// leading "type" member of a data-only event).
func TestOversizedEvents(t *testing.T) {
	big := strings.Repeat("z", 64<<10)
	tests := []struct {
		name string
		d    Dialect
		in   []byte
		want string
		term Terminal
	}{
		{"messages: huge text delta skipped, message_stop still terminal", Messages,
			body(`{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok "}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+big+`"}}`,
				"event: message_stop\ndata: {\"type\":\"message_stop\"}"),
			`{"id":"m","type":"message","content":[{"type":"text","text":"ok "}],"usage":{"input_tokens":1}}`, TerminalComplete},
		{"responses: data-only completed envelope too large, terminal by its leading type", Responses,
			body(`{"type":"response.created","response":{"id":"r","status":"in_progress","output":[]}}`,
				`{"type":"response.output_text.delta","item_id":"i","output_index":0,"content_index":0,"delta":"hi"}`,
				`{"type":"response.completed","response":{"id":"r","status":"completed","output":[{"x":"`+big+`"}]}}`),
			`{"id":"r","status":"in_progress","output":[{"id":"i","type":"message","content":[{"type":"output_text","text":"hi"}]}]}`, TerminalComplete},
		{"chat: a huge chunk is skipped, [DONE] still terminal", Chat,
			body(`{"choices":[{"index":0,"delta":{"content":"a"}}]}`, `{"choices":[{"index":0,"delta":{"content":"`+big+`"}}]}`, `[DONE]`),
			`{"object":"chat.completion","model":null,"choices":[{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":null}]}`, TerminalComplete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []int{5, 4096, len(tt.in)} {
				s := NewStream(tt.d)
				s.Limit(16<<10, 0, "")
				for off := 0; off < len(tt.in); off += n {
					s.Write(tt.in[off:min(off+n, len(tt.in))])
				}
				s.End()
				if got := string(s.Response()); got != tt.want {
					t.Fatalf("chunks of %d:\n got %s\nwant %s", n, got, tt.want)
				}
				if s.Terminal() != tt.term || s.Truncated() != 1 {
					t.Fatalf("chunks of %d: terminal %v, truncated %d; want %v, 1", n, s.Terminal(), s.Truncated(), tt.term)
				}
			}
		})
	}
}
