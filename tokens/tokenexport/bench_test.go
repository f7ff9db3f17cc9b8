package tokenexport

import (
	"io"
	"testing"
)

// BenchmarkFromLineJSONL reads a vLLM Chat call and a llama-server stream into rows and writes
// them as JSONL: the per-call cost of export tokens, without the capture file read.
func BenchmarkFromLineJSONL(b *testing.B) {
	t := &testing.T{}
	lines := [][]byte{captureLine(t, "vllm_chat_json", "a"), captureLine(t, "llamacpp_chat_sse", "b")}
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	b.SetBytes(int64(n))
	w := NewJSONLWriter(io.Discard)
	b.ResetTimer()
	for b.Loop() {
		for i, l := range lines {
			r, err := FromLine("r1", i, l)
			if err != nil {
				b.Fatal(err)
			}
			if err := w.Write(&r); err != nil {
				b.Fatal(err)
			}
		}
	}
}
