package dialect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// allocatedSince returns the bytes the process allocated since a MemStats reading.
func allocatedSince(m0 *runtime.MemStats) uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc - m0.TotalAlloc
}

// TestFarIndexesCostWhatArrived: for every index a stream may name, in every dialect, events
// naming an index far beyond what arrived make the reassembly allocate in proportion to the bytes
// received (at most 64 bytes per byte, plus 512 KiB), never empty slots up to the index. Among
// them the Responses stream of about 45 KB whose text deltas each name content_index 65536 on a new
// item: it once created 65537 empty parts per event, gigabytes in all. An index beyond the parts
// an item has by more than maxPartGap is refused, and OverLimit says so. The allocation is checked
// after every event, so a reassembly that materializes slots fails at its first event.
func TestFarIndexesCostWhatArrived(t *testing.T) {
	const far = int64(1) << 50
	tests := []struct {
		name    string
		d       Dialect
		event   func(i int) string
		refused bool // the index is refused (OverLimit), not kept sparsely
	}{
		{"chat choice index", Chat, func(i int) string {
			return fmt.Sprintf(`{"choices":[{"index":%d,"delta":{"content":"x"}}]}`, far+int64(i)*1e9)
		}, false},
		{"chat tool-call index", Chat, func(i int) string {
			return fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":"x"}}]}}]}`, far+int64(i)*1e9)
		}, false},
		{"responses output_index", Responses, func(i int) string {
			return fmt.Sprintf(`{"type":"response.output_text.delta","output_index":%d,"content_index":0,"delta":"x"}`, far+int64(i)*1e9)
		}, false},
		{"responses content_index 65536 on a new output_index", Responses, func(i int) string {
			return fmt.Sprintf(`{"type":"response.output_text.delta","output_index":%d,"content_index":65536,"delta":"x"}`, i)
		}, true},
		{"responses content_index 65536 on a new item_id", Responses, func(i int) string {
			return fmt.Sprintf(`{"type":"response.output_text.delta","item_id":"m%d","content_index":65536,"delta":"x"}`, i)
		}, true},
		{"responses summary_index", Responses, func(i int) string {
			return fmt.Sprintf(`{"type":"response.reasoning_summary_text.delta","item_id":"r%d","summary_index":65536,"delta":"x"}`, i)
		}, true},
		{"responses content part at the largest index", Responses, func(i int) string {
			return fmt.Sprintf(`{"type":"response.content_part.added","output_index":%d,"content_index":9223372036854775807,"part":{"type":"output_text","text":""}}`, i)
		}, true},
		{"messages block started at a far index", Messages, func(i int) string {
			return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, far+int64(i)*1e9)
		}, false},
		{"messages delta for a far block", Messages, func(i int) string {
			return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":"{"}}`, far+int64(i)*1e9)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var events [][]byte
			size := 0
			for i := 0; size < 45<<10; i++ {
				ev := body(tt.event(i))
				events = append(events, ev)
				size += len(ev)
			}
			s := NewStream(tt.d)
			defer s.Close()
			var m0 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			fed := 0
			for i, ev := range events {
				s.Write(ev)
				fed += len(ev)
				if a := allocatedSince(&m0); a > 64*uint64(fed)+512<<10 {
					t.Fatalf("after event %d (%d bytes received) the reassembly allocated %d bytes", i+1, fed, a)
				}
			}
			s.End()
			resp := s.Response()
			total := allocatedSince(&m0)
			t.Logf("%d events, %d bytes: %d bytes allocated, response %d bytes", len(events), fed, total, len(resp))
			if resp != nil && (!json.Valid(resp) || len(resp) > 64*fed+4096) {
				t.Fatalf("response of %d bytes for %d received (valid JSON %v)", len(resp), fed, json.Valid(resp))
			}
			if s.OverLimit() != tt.refused {
				t.Fatalf("OverLimit %v, want %v", s.OverLimit(), tt.refused)
			}
		})
	}
}

// workShape builds the input of one hostile shape at size n (elements, keys or events).
type workShape struct {
	name  string
	d     Dialect
	build func(n int) []byte
}

// manyKeys is a JSON object of n members "k0".."k<n-1>", each 1 (plus extra members, raw).
func manyKeys(n int, extra string) string {
	var b strings.Builder
	b.WriteString("{")
	b.WriteString(extra)
	for i := range n {
		if i > 0 || extra != "" {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":1`, i)
	}
	b.WriteString("}")
	return b.String()
}

// eventsOf frames n events made by ev as SSE events.
func eventsOf(n int, ev func(i int) string, tail ...string) []byte {
	var b bytes.Buffer
	for i := range n {
		b.Write(body(ev(i)))
	}
	b.Write(body(tail...))
	return b.Bytes()
}

var workShapes = []workShape{
	{"chat: one event of tool-call deltas with distinct indexes", Chat, func(n int) []byte {
		var calls []string
		for i := range n {
			calls = append(calls, fmt.Sprintf(`{"index":%d,"id":"c%d","function":{"name":"f","arguments":"{}"}}`, i, i))
		}
		return body(`{"choices":[{"index":0,"delta":{"tool_calls":[`+strings.Join(calls, ",")+`]}}]}`, `[DONE]`)
	}},
	{"chat: one event of tool-call deltas with distinct ids at index 0", Chat, func(n int) []byte {
		var calls []string
		for i := range n {
			calls = append(calls, fmt.Sprintf(`{"index":0,"id":"c%d","function":{"arguments":"x"}}`, i))
		}
		return body(`{"choices":[{"index":0,"delta":{"tool_calls":[`+strings.Join(calls, ",")+`]}}]}`, `[DONE]`)
	}},
	{"chat: one event of choices with distinct indexes", Chat, func(n int) []byte {
		var choices []string
		for i := range n {
			choices = append(choices, fmt.Sprintf(`{"index":%d,"delta":{"content":"x"}}`, i))
		}
		return body(`{"choices":[`+strings.Join(choices, ",")+`]}`, `[DONE]`)
	}},
	{"chat: token ids and logprobs, one per chunk", Chat, func(n int) []byte {
		return eventsOf(n, func(i int) string {
			return fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":"x"},"token_ids":[%d],"logprobs":{"content":[{"token":"x","logprob":-0.5}]}}]}`, i)
		}, `[DONE]`)
	}},
	{"completions: text, ids and legacy logprobs, one per chunk", Completions, func(n int) []byte {
		return eventsOf(n, func(i int) string {
			return fmt.Sprintf(`{"choices":[{"index":0,"text":"x","token_ids":[%d],"logprobs":{"tokens":["x"],"token_logprobs":[-0.5],"top_logprobs":[{"x":-0.5}],"text_offset":[%d]}}]}`, i, i)
		}, `[DONE]`)
	}},
	{"completions: choices with distinct indexes", Completions, func(n int) []byte {
		return eventsOf(n, func(i int) string {
			return fmt.Sprintf(`{"choices":[{"index":%d,"text":"x"}]}`, i)
		}, `[DONE]`)
	}},
	{"responses: items without output_index", Responses, func(n int) []byte {
		return eventsOf(n, func(i int) string {
			return fmt.Sprintf(`{"type":"response.output_item.added","item":{"id":"m%d","type":"message","content":[]}}`, i)
		}, `{"type":"response.completed","response":{"id":"r","output":[]}}`)
	}},
	{"responses: deltas for new item ids without output_index", Responses, func(n int) []byte {
		return eventsOf(n, func(i int) string {
			return fmt.Sprintf(`{"type":"response.function_call_arguments.delta","item_id":"f%d","delta":"x"}`, i)
		}, `{"type":"response.completed","response":{"id":"r","output":[]}}`)
	}},
	{"responses: an item with many keys, then deltas into it", Responses, func(n int) []byte {
		head := body(`{"type":"response.output_item.added","output_index":0,"item":` + manyKeys(n, `"id":"m","type":"message"`) + `}`)
		return append(head, eventsOf(n, func(i int) string {
			return `{"type":"response.output_text.delta","item_id":"m","content_index":0,"delta":"x"}`
		}, `{"type":"response.completed","response":{"id":"r","output":[]}}`)...)
	}},
	{"responses: an envelope with many keys, output rebuilt", Responses, func(n int) []byte {
		return body(`{"type":"response.output_item.added","output_index":0,"item":{"id":"m","type":"message"}}`,
			`{"type":"response.completed","response":`+manyKeys(n, `"output":[]`)+`}`)
	}},
	{"messages: a content block with many keys", Messages, func(n int) []byte {
		return body(`{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}`,
			`{"type":"content_block_start","index":0,"content_block":`+manyKeys(n, `"type":"text"`)+`}`,
			`{"type":"message_stop"}`)
	}},
	{"messages: text deltas into a block with many keys", Messages, func(n int) []byte {
		head := body(`{"type":"message_start","message":{"id":"m"}}`,
			`{"type":"content_block_start","index":0,"content_block":`+manyKeys(n, "")+`}`)
		return append(head, eventsOf(n, func(i int) string {
			return `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`
		}, `{"type":"message_stop"}`)...)
	}},
	{"messages: usage with many keys", Messages, func(n int) []byte {
		return body(`{"type":"message_start","message":{"id":"m","usage":`+manyKeys(n, "")+`}}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":`+manyKeys(n, "")+`}`,
			`{"type":"message_stop"}`)
	}},
	{"messages: blocks with distinct indexes", Messages, func(n int) []byte {
		return eventsOf(n, func(i int) string {
			return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":"x"}}`, i)
		}, `{"type":"message_stop"}`)
	}},
}

// reassemblyWork runs one stream over in and returns the bytes it allocated and the CPU time of
// this thread (ok false where the platform cannot tell it).
func reassemblyWork(d Dialect, in []byte) (allocated uint64, cpu time.Duration, ok bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	c0, ok := threadCPU()
	s := NewStream(d)
	s.Write(in)
	s.End()
	s.Response()
	c1, _ := threadCPU()
	allocated = allocatedSince(&m0)
	s.Close()
	return allocated, c1 - c0, ok
}

// TestReassemblyWorkIsLinear measures each hostile shape at n and 10n elements (tool-call deltas,
// choices, items without output_index, keys of an object, blocks) and requires the work to grow
// about tenfold, not a hundredfold as a linear search per element makes it: bytes allocated at most
// 16x, and the CPU time of the measuring thread at most 30x (a scan per element costs about 100x;
// thread CPU time, unlike wall time, does not count other processes' turns on a busy machine, and
// the best of up to three runs drops the rest). Allocation alone cannot see a scan, which allocates
// nothing. The garbage collector is off while measuring, so its work does not land in a run.
func TestReassemblyWorkIsLinear(t *testing.T) {
	if raceOn {
		t.Skip("measures work; the race detector's instrumentation would be measured instead")
	}
	const n = 4000 // 10n stays below MaxElements
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for _, sh := range workShapes {
		t.Run(sh.name, func(t *testing.T) {
			small, large := sh.build(n), sh.build(10*n)
			// The best of three runs at 1x; at 10x, runs until one is within the bounds (at most
			// three), so a linear reassembly measures 10x once.
			a1, c1, ok := uint64(1<<63), time.Duration(1<<62), false
			for range 3 {
				runtime.GC()
				a, c, k := reassemblyWork(sh.d, small)
				a1, c1, ok = min(a1, a), min(c1, c), k
			}
			a1, c1 = max(a1, 1), max(c1, time.Microsecond)
			a10, c10 := uint64(1<<63), time.Duration(1<<62)
			for range 3 {
				runtime.GC()
				a, c, _ := reassemblyWork(sh.d, large)
				a10, c10 = min(a10, a), min(c10, c)
				if float64(a10)/float64(a1) <= 16 && (!ok || float64(c10)/float64(c1) <= 30) {
					break
				}
			}
			ra, rc := float64(a10)/float64(a1), float64(c10)/float64(c1)
			t.Logf("input %d -> %d bytes: allocated %d -> %d bytes (x%.1f), thread CPU %v -> %v (x%.1f)",
				len(small), len(large), a1, a10, ra, c1, c10, rc)
			if ra > 16 {
				t.Errorf("bytes allocated grew x%.1f for 10x the input", ra)
			}
			if ok && rc > 30 {
				t.Errorf("CPU time grew x%.1f for 10x the input", rc)
			}
		})
	}
}

// limited returns a Stream of d whose reassembly creates at most n elements.
func limited(d Dialect, n int) *Stream {
	s := NewStream(d)
	s.lim.left = n
	return s
}

// TestElementLimit: past its element limit a stream's reassembly creates no element: what would
// need one is left out, while deltas to the elements already there, the final envelope and the
// terminal event still count; OverLimit reports it. A part index may skip at most maxPartGap
// parts.
func TestElementLimit(t *testing.T) {
	tests := []struct {
		name  string
		d     Dialect
		limit int
		in    []byte
		want  string
		term  Terminal
		over  bool
	}{
		{"chat: the third element refused, later deltas kept", Chat, 3,
			body(`{"choices":[{"index":0,"delta":{"content":"a","tool_calls":[{"index":0,"id":"x"},{"index":1,"id":"y"},{"index":2,"id":"z"}]}}]}`,
				`{"choices":[{"index":0,"delta":{"content":"b","tool_calls":[{"index":1,"function":{"arguments":"{\"k\":1}"}}]}},{"index":1,"delta":{"content":"new choice"}}]}`, `[DONE]`),
			`{"object":"chat.completion","model":null,"choices":[{"index":0,"message":{"role":"assistant","content":"ab","tool_calls":[{"id":"x","type":"function","function":{"name":"","arguments":"{}"}},{"id":"y","type":"function","function":{"name":"","arguments":"{\"k\":1}"}}]},"finish_reason":null}]}`,
			TerminalComplete, true},
		{"chat: exactly at the limit", Chat, 2,
			body(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x"}]}}]}`, `{"choices":[{"index":0,"delta":{"content":"b"}}]}`, `[DONE]`),
			`{"object":"chat.completion","model":null,"choices":[{"index":0,"message":{"role":"assistant","content":"b","tool_calls":[{"id":"x","type":"function","function":{"name":"","arguments":"{}"}}]},"finish_reason":null}]}`,
			TerminalComplete, false},
		{"responses: the third item refused", Responses, 2,
			body(`{"type":"response.created","response":{"id":"r","output":[]}}`,
				`{"type":"response.output_item.added","item":{"id":"a","type":"function_call","arguments":""}}`,
				`{"type":"response.output_item.added","item":{"id":"b","type":"function_call","arguments":""}}`,
				`{"type":"response.output_item.added","item":{"id":"c","type":"function_call","arguments":""}}`,
				`{"type":"response.function_call_arguments.delta","item_id":"a","delta":"{}"}`,
				`{"type":"response.completed","response":{"id":"r","status":"completed","output":[]}}`),
			`{"id":"r","status":"completed","output":[{"id":"a","type":"function_call","arguments":"{}"},{"id":"b","type":"function_call","arguments":""}]}`,
			TerminalComplete, true},
		{"messages: the second block refused", Messages, 1,
			body(`{"type":"message_start","message":{"id":"m"}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"late"}}`,
				`{"type":"message_stop"}`),
			`{"id":"m","type":"message","content":[{"type":"text","text":"late"}]}`,
			TerminalComplete, true},
		{"responses: a part index may skip 16 parts", Responses, MaxElements,
			body(`{"type":"response.output_text.delta","item_id":"m","content_index":16,"delta":"x"}`,
				`{"type":"response.completed","response":{"id":"r","output":[]}}`),
			`{"id":"r","output":[{"id":"m","type":"message","content":[` + strings.Repeat(`{"type":"output_text"},`, 16) + `{"type":"output_text","text":"x"}]}]}`,
			TerminalComplete, false},
		{"responses: a part index 17 beyond the parts is refused, the rest kept", Responses, MaxElements,
			body(`{"type":"response.output_text.delta","item_id":"m","content_index":0,"delta":"a"}`,
				`{"type":"response.output_text.delta","item_id":"m","content_index":18,"delta":"x"}`,
				`{"type":"response.output_text.delta","item_id":"m","content_index":0,"delta":"b"}`,
				`{"type":"response.completed","response":{"id":"r","output":[]}}`),
			`{"id":"r","output":[{"id":"m","type":"message","content":[{"type":"output_text","text":"ab"}]}]}`,
			TerminalComplete, true},
		{"responses: the parts a gap creates count as elements", Responses, 5,
			body(`{"type":"response.output_text.delta","item_id":"m","content_index":4,"delta":"x"}`,
				`{"type":"response.completed","response":{"id":"r","output":[]}}`),
			`{"id":"r","output":[{"id":"m","type":"message"}]}`,
			TerminalComplete, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []int{1, 7, len(tt.in)} {
				s := limited(tt.d, tt.limit)
				for off := 0; off < len(tt.in); off += n {
					s.Write(tt.in[off:min(off+n, len(tt.in))])
				}
				s.End()
				if got := string(s.Response()); got != tt.want {
					t.Fatalf("chunks of %d:\n got %s\nwant %s", n, got, tt.want)
				}
				if s.Terminal() != tt.term || s.OverLimit() != tt.over {
					t.Fatalf("chunks of %d: terminal %v, over limit %v; want %v, %v", n, s.Terminal(), s.OverLimit(), tt.term, tt.over)
				}
			}
		})
	}
}

// TestMaxElementsChat: one Chat event with MaxElements+1 tool-call deltas of distinct indexes
// keeps MaxElements elements (the choice and MaxElements-1 calls), is over the limit, and still
// ends at [DONE].
func TestMaxElementsChat(t *testing.T) {
	var calls []string
	for i := range MaxElements + 1 {
		calls = append(calls, fmt.Sprintf(`{"index":%d,"function":{"arguments":"1"}}`, i))
	}
	in := body(`{"choices":[{"index":0,"delta":{"tool_calls":[`+strings.Join(calls, ",")+`]}}]}`, `[DONE]`)
	s := NewStream(Chat)
	if !s.Write(in) || !s.OverLimit() {
		t.Fatalf("terminal %v, over limit %v", s.Terminal(), s.OverLimit())
	}
	if got := bytes.Count(s.Response(), []byte(`"type":"function"`)); got != MaxElements-1 {
		t.Fatalf("%d tool calls kept, want %d", got, MaxElements-1)
	}
}

// TestStopFromAnotherGoroutine: Stop may be called while Write runs (the gateway calls it when the
// client goes away): no data race, and once Stop has returned, Write adds nothing.
func TestStopFromAnotherGoroutine(t *testing.T) {
	var calls []string
	for i := range 20000 {
		calls = append(calls, fmt.Sprintf(`{"index":%d,"function":{"arguments":"1"}}`, i))
	}
	big := body(`{"choices":[{"index":0,"delta":{"tool_calls":[` + strings.Join(calls, ",") + `]}}]}`)
	s := NewStream(Chat)
	s.Write(body(`{"choices":[{"index":0,"delta":{"content":"before"}}]}`))
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Write(big)
	}()
	s.Stop()
	<-done
	before := s.Response()
	s.Write(body(`{"choices":[{"index":0,"delta":{"content":" after"}}]}`, `[DONE]`))
	if !bytes.Equal(s.Response(), before) || s.Terminal() != TerminalComplete || s.OverLimit() {
		t.Fatalf("after Stop: response changed %v, terminal %v, over limit %v", !bytes.Equal(s.Response(), before), s.Terminal(), s.OverLimit())
	}
	if !bytes.Contains(before, []byte(`"content":"before"`)) {
		t.Fatalf("the reconstruction before Stop is lost: %.200s", before)
	}
}
