package tokens

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the want.json goldens from the current output")

// readCase loads one testdata directory as a Call: request.json, response.json, response.sse or
// response_raw.txt (the line's response_raw), token_capture.json and dialect, each optional.
func readCase(t *testing.T, dir string) Call {
	t.Helper()
	file := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	c := Call{Dialect: "chat", Request: file("request.json"), Response: file("response.json"), TokenCapture: file("token_capture.json")}
	if d := file("dialect"); d != nil {
		c.Dialect = strings.TrimSpace(string(d))
	}
	if raw := file("response.sse"); raw != nil {
		c.ResponseRaw = raw
	}
	if raw := file("response_raw.txt"); raw != nil {
		c.ResponseRaw = raw
	}
	return c
}

// TestReadGolden reads each engine's documented shapes from testdata/<case>/ and compares the
// result with testdata/<case>/want.json (go test ./tokens -update rewrites them).
func TestReadGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || filepath.Base(dir) == "fuzz" {
			continue
		}
		n++
		t.Run(filepath.Base(dir), func(t *testing.T) {
			got, err := json.MarshalIndent(Read(readCase(t, dir)), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			wantPath := filepath.Join(dir, "want.json")
			if *update {
				if err := os.WriteFile(wantPath, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(wantPath)
			if err != nil {
				t.Fatalf("%v (run go test ./tokens -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Read differs from %s:\n%s", wantPath, got)
			}
		})
	}
	if n < 15 {
		t.Fatalf("only %d golden cases found", n)
	}
}

// TestReadFacts states, per shape, what a trainer relies on, so a golden rewritten by -update
// cannot silently change it.
func TestReadFacts(t *testing.T) {
	type want struct {
		source, promptSource Source
		gen, prompt          int  // lengths of the first choice's ids and of the prompt ids
		complete             bool // Complete()
		findings             []string
	}
	cases := map[string]want{
		"vllm_chat_json":             {SourceEngineIDs, SourceEngineIDs, 3, 9, true, nil},
		"vllm_chat_token_id_strings": {SourceLogprobTokenStrings, SourceAbsent, 3, 0, false, []string{FindingCompletionCountMismatch}},
		"vllm_chat_sse":              {SourceEngineIDs, SourceEngineIDs, 3, 9, true, nil},
		"vllm_chat_sse_lost_tokens":  {SourceEngineIDs, SourceEngineIDs, 4, 9, true, []string{FindingStreamChunkWithoutIDs, FindingStreamTokensLost}},
		"vllm_completions_json":      {SourceEngineIDs, SourceEngineIDs, 2, 5, true, nil},
		"vllm_completions_sse":       {SourceEngineIDs, SourceEngineIDs, 2, 5, true, nil},
		"sglang_chat_json":           {SourceEngineIDs, SourceEngineIDs, 3, 9, true, nil},
		"sglang_sglext_json":         {SourceEngineIDs, SourceEngineIDs, 2, 9, true, nil},
		"sglang_sglext_sse":          {SourceEngineIDs, SourceEngineIDs, 3, 9, false, []string{FindingNoLogprobs}},
		"llamacpp_chat_json":         {SourceLogprobEntryIDs, SourceServerRender, 2, 9, true, nil},
		"llamacpp_chat_sse":          {SourceLogprobEntryIDs, SourceServerRender, 2, 9, true, []string{FindingStreamTokensLost}},
		"unknown_shape":              {SourceAbsent, SourceAbsent, 0, 0, false, []string{FindingMalformedTokenField, FindingMalformedTokenField, FindingMalformedTokenField}},
		"unreadable_raw":             {SourceAbsent, SourceAbsent, 0, 0, false, []string{FindingUnreadableResponse}},
		"messages_plain":             {SourceAbsent, SourceAbsent, 0, 0, false, nil},
		"vllm_chat_ids_disagree":     {SourceEngineIDs, SourceEngineIDs, 3, 3, true, []string{FindingIDSourcesDisagree}},
		"gym_model_server_chat":      {SourceEngineIDs, SourceEngineIDs, 3, 3, true, nil},
	}
	for name, w := range cases {
		t.Run(name, func(t *testing.T) {
			got := Read(readCase(t, filepath.Join("testdata", name)))
			var codes []string
			for _, f := range got.Findings {
				codes = append(codes, f.Code)
			}
			if got.Source != w.source || got.PromptSource != w.promptSource || len(got.GenerationTokenIDs()) != w.gen ||
				len(got.PromptTokenIDs) != w.prompt || got.Complete() != w.complete || strings.Join(codes, ",") != strings.Join(w.findings, ",") {
				t.Errorf("got source %s, prompt source %s, %d generated, %d prompt ids, complete %v, findings %v\nwant %+v",
					got.Source, got.PromptSource, len(got.GenerationTokenIDs()), len(got.PromptTokenIDs), got.Complete(), got.Findings, w)
			}
		})
	}
}

func TestReadEmptyCall(t *testing.T) {
	got := Read(Call{})
	if got.Source != SourceAbsent || got.PromptSource != SourceAbsent || len(got.Findings) != 0 || got.Choices != nil {
		t.Errorf("empty call: %+v", got)
	}
}

func TestLegacyTopLogprobsKeepOrder(t *testing.T) {
	got := Read(Call{Response: []byte(`{"choices":[{"index":0,"token_ids":[5],"logprobs":{"tokens":["b"],"token_logprobs":[-1.0],"top_logprobs":[{"z":-1.0,"a":-2.0,"m":-3.0}]}}]}`)})
	top := got.Choices[0].LogProbs[0].Top
	if len(top) != 3 || top[0].Token != "z" || top[1].Token != "a" || top[2].Token != "m" {
		t.Errorf("top_logprobs order lost: %+v", top)
	}
}

func TestServerRenderFailure(t *testing.T) {
	got := Read(Call{TokenCapture: []byte(`{"engine":"llama-server","prompt_token_error":"/tokenize: status 404"}`)})
	if !got.Has(FindingServerRenderFailed) || got.PromptSource != SourceAbsent {
		t.Errorf("got %+v", got)
	}
}
