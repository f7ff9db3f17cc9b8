package otelexport

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/dialect"
)

// A streamed answer whose texts spilled to a temp file reaches live export as the stream's
// summary, texts cut to dialect.SummaryTextBytes; the live span must carry the content the span
// export otlp builds from the capture line carries: each text cut at ContentTextLimit, at the same
// UTF-8 boundary, and modelcalls.content_truncated set when a text was cut.
func TestSpilledStreamContentMatchesLine(t *testing.T) {
	type sizes struct{ content, reasoning, args int }
	for _, tt := range []sizes{
		{ContentTextLimit - 10, 100, 50},        // spilled, under the limit: whole
		{ContentTextLimit + 1, 100, 50},         // one byte over
		{ContentTextLimit + 3<<20, 2 << 20, 50}, // far over, reasoning too
		{1000, 100, ContentTextLimit + 5000},    // long tool-call arguments
	} {
		for shift := range 3 { // where the multi-byte characters fall against the cut
			t.Run(strconv.Itoa(tt.content)+"/"+strconv.Itoa(tt.args)+"/"+strconv.Itoa(shift), func(t *testing.T) {
				content := strings.Repeat("a", shift) + strings.Repeat("é€", tt.content/5+1)
				content = content[:tt.content]
				for !utf8.ValidString(content) {
					content = content[:len(content)-1]
				}
				reasoning := strings.Repeat("r", tt.reasoning)
				args := `{"q":"` + strings.Repeat("€", tt.args/3) + `"}`
				s := dialect.NewStream(dialect.Chat)
				defer s.Close()
				s.Limit(0, 64<<10, t.TempDir())
				delta := func(d map[string]any) {
					b, _ := json.Marshal(map[string]any{"id": "c1", "model": "m", "choices": []any{map[string]any{"index": 0, "delta": d}}})
					s.Write(append(append([]byte("data: "), b...), "\n\n"...))
				}
				delta(map[string]any{"role": "assistant", "content": content})
				delta(map[string]any{"reasoning_content": reasoning})
				delta(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function", "function": map[string]any{"name": "f", "arguments": args}}}})
				s.Write([]byte("data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n"))
				s.End()
				full, sum := s.Response(), s.Summary(dialect.SummaryTextBytes)
				if len(full) < tt.content || len(sum) > len(full) {
					t.Fatalf("response %d bytes, summary %d", len(full), len(sum))
				}
				live := exchange("chat", chatReq, string(sum), func(ex *capture.Exchange) { ex.PayloadsChecked = true })
				file := recordOf(t, exchange("chat", chatReq, string(full), nil))
				l, f := liveAndFileSpan(t, live, file, true)
				la, fa := attrMap(l.Attributes), attrMap(f.Attributes)
				if !reflect.DeepEqual(la, fa) {
					for k, v := range fa {
						if !reflect.DeepEqual(la[k], v) {
							t.Errorf("%s: live %.200v..., file %.200v...", k, la[k], v)
						}
					}
					t.FailNow()
				}
				cut := len(content) > ContentTextLimit || len(reasoning) > ContentTextLimit || len(args) > ContentTextLimit
				if got, _ := fa[AttrContentTruncated].(bool); got != cut {
					t.Errorf("content_truncated %v, want %v", fa[AttrContentTruncated], cut)
				}
				out, _ := fa[AttrOutputMessages].(string)
				var msgs []message
				if err := json.Unmarshal([]byte(out), &msgs); err != nil || len(msgs) != 1 {
					t.Fatalf("output messages: %v", err)
				}
				for _, p := range msgs[0].Parts {
					text, _ := p.Content.(string)
					if p.Type == "tool_call" {
						text, _ = p.Arguments.(string)
					}
					if len(text) > ContentTextLimit || !utf8.ValidString(text) {
						t.Errorf("%s part: %d bytes, valid UTF-8 %v", p.Type, len(text), utf8.ValidString(text))
					}
				}
			})
		}
	}
}

// capText never splits a UTF-8 sequence and never cuts more than the one it would split.
func TestCapText(t *testing.T) {
	for pre := range 4 {
		for _, r := range []string{"a", "é", "€", "😀"} {
			s := strings.Repeat("x", ContentTextLimit-pre) + strings.Repeat(r, 4)
			got := capText(s)
			if !utf8.ValidString(got) || len(got) > ContentTextLimit || len(got) <= ContentTextLimit-utf8.UTFMax || !strings.HasPrefix(s, got) {
				t.Errorf("pre %d rune %q: cut to %d bytes (valid %v)", pre, r, len(got), utf8.ValidString(got))
			}
		}
	}
}
