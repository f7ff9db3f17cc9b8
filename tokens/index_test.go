package tokens

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// FuzzReadIndexed: reading a response through the index of the line that holds it (Call.Index)
// gives what reading its text gives, for any response the strict check accepts.
func FuzzReadIndexed(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/response.json")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"choices":[{"index":1,"token_ids":[1,2],"logprobs":{"content":[{"token":"a","logprob":-1,"top_logprobs":[{"token":"b","id":3,"logprob":-2}]}]}},{"token_ids":[4]}],"prompt_token_ids":[5]}`))
	f.Add([]byte(`{"output":[{"type":"message","generation_token_ids":[1],"generation_log_probs":[-0.5],"prompt_token_ids":[2]}],"usage":{"prompt_tokens":1}}`))
	f.Fuzz(func(t *testing.T, resp []byte) {
		line := append(append([]byte(`{"request":{"prompt":[1,2]},"response":`), resp...), '}')
		var sc jsonscan.Scanner
		sc.Nested = "response"
		members, err := sc.Members(line, nil)
		if err != nil {
			return
		}
		var req, r []byte
		for _, m := range members {
			switch string(line[m.KeyStart:m.KeyEnd]) {
			case `"request"`:
				req = line[m.ValStart:m.ValEnd]
			case `"response"`:
				r = line[m.ValStart:m.ValEnd]
			}
		}
		text := Read(Call{Request: req, Response: r})
		indexed := Read(Call{Request: req, Response: r, Checked: true, Index: &sc.Tree})
		if !reflect.DeepEqual(text, indexed) {
			t.Fatalf("response %s:\ntext    %+v\nindexed %+v", resp, text, indexed)
		}
	})
}
