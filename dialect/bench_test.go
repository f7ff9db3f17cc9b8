package dialect

import (
	"fmt"
	"strings"
	"testing"
)

// benchStreams builds a 200-event stream per dialect shaped like real traffic: mostly small text
// deltas, a tool call with argument fragments, usage at the end.
func benchStreams() map[Dialect][]byte {
	var chat, msgs, resp strings.Builder
	for i := range 180 {
		fmt.Fprintf(&chat, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1727346176,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"token %d \"},\"logprobs\":null,\"finish_reason\":null}]}\n\n", i)
	}
	for i := range 18 {
		fmt.Fprintf(&chat, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1727346176,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"k%d\\\":1}\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n", i)
	}
	chat.WriteString("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":76,\"completion_tokens\":200,\"total_tokens\":276}}\n\n")
	chat.WriteString("data: [DONE]\n\n")

	msgs.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":377,\"output_tokens\":1}}}\n\n")
	msgs.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for i := range 195 {
		fmt.Fprintf(&msgs, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"token %d \"}}\n\n", i)
	}
	msgs.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":200}}\n\n")
	msgs.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	msgs.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")

	resp.WriteString("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-5\",\"output\":[],\"usage\":null}}\n\n")
	resp.WriteString("event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[]}}\n\n")
	resp.WriteString("event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"\",\"annotations\":[]}}\n\n")
	for i := range 196 {
		fmt.Fprintf(&resp, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"token %d \"}\n\n", i+3, i)
	}
	resp.WriteString("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"gpt-5\",\"output\":[],\"usage\":{\"input_tokens\":53,\"output_tokens\":200,\"total_tokens\":253}}}\n\n")
	return map[Dialect][]byte{Chat: []byte(chat.String()), Messages: []byte(msgs.String()), Responses: []byte(resp.String())}
}

// BenchmarkStreamWrite measures feeding a 200-event stream through a Stream (decode, terminal
// detection, reassembly) in 97-byte chunks and in one piece, plus one Response at the end.
func BenchmarkStreamWrite(b *testing.B) {
	streams := benchStreams()
	for _, d := range []Dialect{Chat, Messages, Responses} {
		in := streams[d]
		if s := NewStream(d); !s.Write(in) || s.Response() == nil {
			b.Fatalf("%s bench stream has no terminal or no response", d)
		}
		for _, chunk := range []int{97, len(in)} {
			b.Run(fmt.Sprintf("%s/chunk=%d", d, chunk), func(b *testing.B) {
				b.SetBytes(int64(len(in)))
				b.ReportAllocs()
				for b.Loop() {
					s := NewStream(d)
					for off := 0; off < len(in); off += chunk {
						s.Write(in[off:min(off+chunk, len(in))])
					}
					s.End()
					if s.Response() == nil {
						b.Fatal("no response")
					}
				}
			})
		}
	}
}
