package sse

import (
	"fmt"
	"strings"
	"testing"
)

// benchStream is a 200-event chat-completions-shaped stream (about 48 KB).
func benchStream() []byte {
	var sb strings.Builder
	for i := range 199 {
		fmt.Fprintf(&sb, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1727346176,"+
			"\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"token %d \"},"+
			"\"logprobs\":null,\"finish_reason\":null}]}\n\n", i)
	}
	sb.WriteString("data: [DONE]\n\n")
	return []byte(sb.String())
}

func benchmarkFeed(b *testing.B, chunk int) {
	body := benchStream()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var d Decoder
	n := 0
	emit := func(Event) { n++ }
	for b.Loop() {
		for off := 0; off < len(body); off += chunk {
			d.Feed(body[off:min(off+chunk, len(body))], emit)
		}
		d.Flush(emit)
	}
	if n == 0 {
		b.Fatal("no events")
	}
}

func BenchmarkDecoderFeed(b *testing.B) {
	for _, chunk := range []int{97, 4096, 1 << 20} {
		b.Run(fmt.Sprintf("chunk=%d", chunk), func(b *testing.B) { benchmarkFeed(b, chunk) })
	}
}
