package tokens

import (
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
