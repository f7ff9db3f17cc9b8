package tokens

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead feeds arbitrary bodies as the response, the raw response and the request: Read must
// not panic, and must always say where its ids came from.
func FuzzRead(f *testing.F) {
	for _, pattern := range []string{"testdata/*/response.json", "testdata/*/response.sse", "testdata/*/request.json"} {
		files, _ := filepath.Glob(pattern)
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte(`data: {"choices":[{"token_ids":[1,2],"logprobs":{"content":[{"id":1}]}}]}` + "\n\n"))
	f.Add([]byte(`{"sglext":{"output_ids":[[1],"x",[2]]},"choices":[{"index":-1}]}`))
	f.Add([]byte(`{"prompt_token_ids":[1,-2],"choices":[{"index":0,"token_ids":[99999999999999999999]},{"index":0,"logprobs":{"content":[{"id":-5,"logprob":"NaN"}]}}]}`))
	f.Add([]byte("data: {\"prompt_token_ids\":[1]}\n\ndata: {\"prompt_token_ids\":[2]}\n\ndata: {\"choices\":[{\"tok"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range []Call{{Response: b}, {ResponseRaw: b}, {Request: b, TokenCapture: b}} {
			got := Read(c)
			if got.Source == "" || got.PromptSource == "" || got.Findings == nil {
				t.Fatalf("incomplete result %+v", got)
			}
			for _, ch := range got.Choices {
				if ch.Source == "" {
					t.Fatalf("choice without a source %+v", ch)
				}
			}
			_ = got.GenerationLogProbs()
		}
	})
}

// FuzzAddRequestFields: whatever the body, the result is the body itself or a JSON object that
// starts with the client's bytes, and what was added is a JSON object.
func FuzzAddRequestFields(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[]}`))
	f.Add([]byte(`{ }`))
	f.Add([]byte(`{"logprobs":false}  `))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, e := range Engines {
			for _, d := range []string{"chat", "completions"} {
				out, added, not := AddRequestFields(e, d, b)
				if added == nil {
					if string(out) != string(b) || not != "" {
						t.Fatalf("%s %s: body changed without additions", e, d)
					}
					continue
				}
				if !json.Valid(out) || !json.Valid(added) || added[0] != '{' {
					t.Fatalf("%s %s: %q -> %q, added %q", e, d, b, out, added)
				}
				if not != "" && (string(added) != "{}" || string(out) != string(b)) {
					t.Fatalf("%s %s: not asked (%s) but added %q", e, d, not, added)
				}
				if string(added) != "{}" && !bytes.HasPrefix(out, bytes.TrimRight(b, " \t\r\n")[:len(bytes.TrimRight(b, " \t\r\n"))-1]) {
					t.Fatalf("%s %s: client bytes not kept: %q -> %q", e, d, b, out)
				}
			}
		}
	})
}
