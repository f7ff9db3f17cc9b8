package dialect

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// fuzzStream checks one dialect: no panic, Response and Terminal independent of chunking, the
// terminal reported at most once, and the response (when any) a valid UTF-8 JSON object at most
// 64 times the input's size plus 4 KiB (an index far beyond what arrived must not be filled in).
func fuzzStream(f *testing.F, d Dialect) {
	// Fixture seeds, cut to at most 3 KB at both ends: the fuzzer minimises every new input it
	// finds, and minimising 20 KB inputs stalls it for minutes.
	const maxSeed = 3000
	for _, file := range streamFixtures(f) {
		if fixtureDialect(f, file) != d {
			continue
		}
		b := readFile(f, file)
		if len(b) <= maxSeed {
			f.Add(b, uint8(97))
			continue
		}
		f.Add(b[:maxSeed], uint8(97))
		f.Add(b[len(b)-maxSeed:], uint8(7))
	}
	f.Add([]byte("data: {\"choices\":[{\"index\":1,\"delta\":{\"tool_calls\":[{\"id\":\"a\"},{\"index\":0,\"id\":\"b\"}]}}]}\r\rdata: [DONE]"), uint8(3))
	f.Add([]byte("data: {\"type\":\"response.output_text.delta\",\"item_id\":\"m\",\"content_index\":2,\"delta\":\"x\"}\n\ndata: {\"type\":\"response.completed\",\"response\":{}}"), uint8(5))
	f.Add([]byte("data: {\"type\":\"content_block_delta\",\"index\":-1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n"), uint8(2))
	// Indexes far beyond what arrived, for every index a stream may name.
	f.Add([]byte("data: {\"type\":\"response.output_text.delta\",\"output_index\":7,\"content_index\":65536,\"delta\":\"x\"}\n\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"n\",\"content_index\":17,\"delta\":\"y\"}\n\ndata: {\"type\":\"response.created\",\"response\":{}}\n\n"), uint8(11))
	f.Add([]byte("data: {\"type\":\"response.reasoning_summary_part.added\",\"output_index\":9223372036854775807,\"summary_index\":16,\"part\":{}}\n\ndata: {\"type\":\"response.output_item.added\",\"item\":{}}\n\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[]}}\n\n"), uint8(13))
	f.Add([]byte("data: {\"choices\":[{\"index\":9223372036854775807,\"delta\":{\"tool_calls\":[{\"index\":1000000000000000},{\"index\":-9223372036854775808,\"id\":\"a\"}]}}]}\n\n"), uint8(9))
	f.Add([]byte("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1000000000000000,\"content_block\":{\"type\":\"text\",\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"a\":9}}\n\n"), uint8(4))
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		whole := runStream(d, in, 0)
		if whole.response != nil {
			if !utf8.Valid(whole.response) || !json.Valid(whole.response) || whole.response[0] != '{' {
				t.Fatalf("response is not a valid JSON object: %q", whole.response)
			}
			if len(whole.response) > 64*len(in)+4096 {
				t.Fatalf("a response of %d bytes from %d bytes of stream", len(whole.response), len(in))
			}
		}
		if len(whole.hits) > 1 || (len(whole.hits) == 1) != (whole.terminal != TerminalNone) {
			t.Fatalf("terminal %v reported at %v", whole.terminal, whole.hits)
		}
		for _, n := range []int{int(step)%31 + 1, 1} {
			r := runStream(d, in, n)
			if !bytes.Equal(r.response, whole.response) || r.terminal != whole.terminal {
				t.Fatalf("chunks of %d: (%v, %s), whole body: (%v, %s)", n, r.terminal, r.response, whole.terminal, whole.response)
			}
			if len(r.hits) != len(whole.hits) {
				t.Fatalf("chunks of %d: terminal reported at %v", n, r.hits)
			}
		}
	})
}

func FuzzStreamResponses(f *testing.F) { fuzzStream(f, Responses) }
func FuzzStreamChat(f *testing.F)      { fuzzStream(f, Chat) }
func FuzzStreamMessages(f *testing.F)  { fuzzStream(f, Messages) }
func FuzzStreamGemini(f *testing.F) {
	f.Add([]byte("data: {\"candidates\":[{\"index\":2,\"content\":{\"parts\":[{\"text\":\"a\",\"thought\":true},{\"text\":\"b\"}]}},{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{}}}]},\"finishReason\":\"STOP\"}]}\r\n\r\n"), uint8(4))
	fuzzStream(f, Gemini)
}

// FuzzCompletionsPrompt: whatever the body, no panic; a text or ids prompt is valid JSON taken
// from the body, a prompt of ids is a list of integers, and the other kinds return no value.
func FuzzCompletionsPrompt(f *testing.F) {
	for _, s := range []string{`{"prompt":"hi"}`, `{"prompt":[1,2]}`, `{"prompt":[[1,"a"]]}`, `{"prompt":["a","b"]}`,
		`{"prompt":[[[1]]]}`, `{"prompt":{"prompt_string":"x"}}`, `{"prompt":[1,"x",[2]]}`, `{"prompt":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, kind := CompletionsPrompt(b)
		switch kind {
		case PromptText, PromptIDs:
			if !json.Valid(p) || !bytes.Contains(b, p) {
				t.Fatalf("%q: prompt %q", b, p)
			}
			var ids []int64
			if kind == PromptIDs && json.Unmarshal(p, &ids) != nil {
				t.Fatalf("%q: ids prompt %q", b, p)
			}
		default:
			if p != nil {
				t.Fatalf("%q: kind %d with prompt %q", b, kind, p)
			}
		}
	})
}
