package tokenexport

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"strings"
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

// vllmLine is the capture line of one `--tokens vllm` Chat call of the shape the export row of
// the bench measures: a Chat request of about 5.6 KB, vLLM's JSON answer with promptN
// prompt_token_ids and gen token_ids and logprobs.content entries (token, logprob, bytes, empty
// top_logprobs), and token_capture; about 35 KB.
func vllmLine(b *testing.B, seed uint64, promptN, gen int) []byte {
	b.Helper()
	rng := rand.New(rand.NewPCG(7, seed))
	words := []string{"The", " file", " reads", " the", " config", " and", " returns", " a", " list", " of", " paths", ".", "\n", " I", "'ll"}
	type entry struct {
		Token       string   `json:"token"`
		LogProb     float64  `json:"logprob"`
		Bytes       []int    `json:"bytes"`
		TopLogProbs []string `json:"top_logprobs"`
	}
	prompt := make([]int64, promptN)
	for i := range prompt {
		prompt[i] = int64(rng.IntN(151000))
	}
	ids := make([]int64, gen)
	entries := make([]entry, gen)
	var content strings.Builder
	for i := range ids {
		ids[i] = int64(rng.IntN(151000))
		w := words[i%len(words)]
		content.WriteString(w)
		bs := make([]int, len(w))
		for j := range len(w) {
			bs[j] = int(w[j])
		}
		entries[i] = entry{w, -rng.ExpFloat64() / 3, bs, []string{}}
	}
	resp, err := json.Marshal(map[string]any{
		"id": "chatcmpl-bench", "object": "chat.completion", "created": 1790000000, "model": "Qwen/Qwen3-8B",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content.String()},
			"logprobs": map[string]any{"content": entries}, "finish_reason": "stop", "token_ids": ids}},
		"usage":            map[string]int{"prompt_tokens": promptN, "completion_tokens": gen, "total_tokens": promptN + gen},
		"prompt_token_ids": prompt,
	})
	if err != nil {
		b.Fatal(err)
	}
	req, err := json.Marshal(map[string]any{"model": "Qwen/Qwen3-8B", "stream": false,
		"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("Read the config and list its paths. ", promptN*4/36)}}})
	if err != nil {
		b.Fatal(err)
	}
	line, err := json.Marshal(map[string]any{"model_call_id": "0123456789abcdef0123456789abcdef", "dialect": "chat",
		"started_at": 1790000000.0, "completed_at": 1790000000.5, "latency_ms": 500, "status_code": 200,
		"request": json.RawMessage(req), "response": json.RawMessage(resp),
		"token_capture": json.RawMessage(`{"engine":"vllm","added":{"return_token_ids":true,"logprobs":true}}`)})
	if err != nil {
		b.Fatal(err)
	}
	return line
}

// BenchmarkFromLineVLLM is the per-line work of export tokens on the bench's token capture (about
// 35 KB a line, most of it the answer's ids and logprobs): FromLine and the JSONL or Parquet
// writer, over lines drawn so that no two are alike. cpu-ns/op is the process's CPU time per pass.
func BenchmarkFromLineVLLM(b *testing.B) {
	lines := make([][]byte, 20)
	n := 0
	for i := range lines {
		lines[i] = vllmLine(b, uint64(i), 1400, 200)
		n += len(lines[i])
	}
	for _, format := range []string{"jsonl", "parquet"} {
		b.Run(format, func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			var w Writer
			if format == "jsonl" {
				w = NewJSONLWriter(io.Discard)
			} else {
				w = NewParquetWriter(io.Discard)
			}
			cpu := processCPU()
			for b.Loop() {
				for i, l := range lines {
					r, err := FromLine("r1", i, l)
					if err != nil {
						b.Fatal(err)
					}
					if !r.Complete() || len(r.Findings) != 0 {
						b.Fatalf("line %d: incomplete row %+v", i, r.Findings)
					}
					if err := w.Write(&r); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			// The machine may be shared: CPU time per pass (the garbage collector's included)
			// compares runs better than wall time.
			if cpu > 0 {
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
