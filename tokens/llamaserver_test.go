package tokens

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/sse"
)

// The llamaserver_* cases are answers of a real llama-server (testdata/README.md says which and
// how they were recorded). These tests check the reader against what the server sent, decoded here
// independently of the reader: TestReadGolden pins the whole output, these state the facts a
// trainer relies on, so a re-recording from another llama.cpp release shows which fact moved.

// llamaEntry is one logprobs.content[] entry as llama-server writes it.
type llamaEntry struct {
	ID      int64   `json:"id"`
	Token   string  `json:"token"`
	Bytes   []byte  `json:"bytes"`
	LogProb float64 `json:"logprob"`
	Top     []struct {
		ID int64 `json:"id"`
	} `json:"top_logprobs"`
}

// llamaObject is the part of a llama-server answer (or one streamed chunk) these tests decode.
type llamaObject struct {
	Choices []struct {
		Logprobs *struct {
			Content []llamaEntry `json:"content"`
		} `json:"logprobs"`
		Text  *string `json:"text"`
		Delta *struct {
			Content *string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

// llamaRecording is one recorded case decoded: its logprob entries in order (over all chunks of a
// stream) and its usage.
type llamaRecording struct {
	entries          []llamaEntry
	prompt, complete int64
	chunks           int // streamed chunks carrying a choice
}

func readLlamaRecording(t *testing.T, dir string) llamaRecording {
	t.Helper()
	var objs [][]byte
	if b, err := os.ReadFile(filepath.Join(dir, "response.json")); err == nil {
		objs = append(objs, b)
	} else {
		raw, err := os.ReadFile(filepath.Join(dir, "response.sse"))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range sse.Parse(raw) {
			if ev.HasData && ev.Data != "[DONE]" {
				objs = append(objs, []byte(ev.Data))
			}
		}
	}
	var rec llamaRecording
	for _, b := range objs {
		var o llamaObject
		if err := json.Unmarshal(b, &o); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, c := range o.Choices {
			rec.chunks++
			if c.Logprobs != nil {
				rec.entries = append(rec.entries, c.Logprobs.Content...)
			}
		}
		if o.Usage != nil {
			rec.prompt, rec.complete = o.Usage.PromptTokens, o.Usage.CompletionTokens
		}
	}
	if rec.complete == 0 || len(rec.entries) == 0 {
		t.Fatalf("%s: the recording has no usage or no logprob entries", dir)
	}
	return rec
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// renderedPrompt returns the /tokenize answer recorded for the chat request: the ids of the
// server's own render of it.
func renderedPrompt(t *testing.T) []int64 {
	t.Helper()
	var tok struct {
		Tokens []int64 `json:"tokens"`
	}
	readJSONFile(t, filepath.Join("testdata", "llamaserver_chat_json", "tokenize.json"), &tok)
	return tok.Tokens
}

func TestLlamaServerRecordings(t *testing.T) {
	// The server's answer to the JSON Chat call: its entries are the whole generation, ending with
	// the end-of-generation token (an entry with an empty token).
	base := readLlamaRecording(t, filepath.Join("testdata", "llamaserver_chat_json"))
	var want []int64
	for _, e := range base.entries {
		want = append(want, e.ID)
	}
	if last := base.entries[len(base.entries)-1]; last.Token != "" || len(last.Bytes) != 0 {
		t.Fatalf("the JSON answer's last entry is %+v, want the end token", last)
	}
	prompt := renderedPrompt(t)

	cases := []struct {
		dir          string
		promptSource Source
		// endToken: the answer carries an entry for the end token; llama-server's Chat stream
		// sends no chunk for it, its Completions stream does.
		endToken bool
	}{
		{"llamaserver_chat_json", SourceServerRender, true},
		{"llamaserver_chat_sse", SourceServerRender, false},
		{"llamaserver_completions_json", SourceAbsent, true},
		{"llamaserver_completions_sse", SourceAbsent, true},
		{"llamaserver_completions_ids_json", SourceRequestIDs, true},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			dir := filepath.Join("testdata", c.dir)
			rec := readLlamaRecording(t, dir)
			got := Read(readCase(t, dir))

			// Ids: the id of each logprob entry the server sent, in order; the same model and
			// prompt gave the same generation on every endpoint.
			wantIDs := want
			if !c.endToken {
				wantIDs = want[:len(want)-1]
			}
			var sent []int64
			for _, e := range rec.entries {
				sent = append(sent, e.ID)
				if len(e.Top) != 1 {
					t.Errorf("entry %+v: %d top logprobs, the request asked for 1", e, len(e.Top))
				}
			}
			if got.Source != SourceLogprobEntryIDs || !slices.Equal(got.GenerationTokenIDs(), sent) || !slices.Equal(sent, wantIDs) {
				t.Errorf("source %s, ids %v; the server sent %v, want %v", got.Source, got.GenerationTokenIDs(), sent, wantIDs)
			}
			// Logprobs: one per id, the server's numbers.
			lps := got.GenerationLogProbs()
			if len(lps) != len(rec.entries) {
				t.Fatalf("%d logprobs for %d entries", len(lps), len(rec.entries))
			}
			for i, e := range rec.entries {
				if lps[i] != e.LogProb {
					t.Errorf("logprob %d: %v, the server sent %v", i, lps[i], e.LogProb)
				}
			}
			// Counts against usage: equal, except the Chat stream's missing end token, which is
			// the finding naming both numbers and the only one.
			if got.CompletionTokens == nil || *got.CompletionTokens != rec.complete || got.Streamed != strings.HasSuffix(c.dir, "_sse") {
				t.Errorf("usage.completion_tokens %v (server %d), streamed %v", got.CompletionTokens, rec.complete, got.Streamed)
			}
			var codes []string
			for _, f := range got.Findings {
				codes = append(codes, f.Code+": "+f.Detail)
			}
			if c.endToken {
				if int64(len(sent)) != rec.complete || len(codes) != 0 {
					t.Errorf("%d ids, usage %d, findings %v; want equal counts and no finding", len(sent), rec.complete, codes)
				}
			} else {
				wantF := FindingStreamTokensLost + ": 6 generated ids (logprob_entry_ids), usage.completion_tokens is 7"
				if int64(len(sent)) != rec.complete-1 || len(codes) != 1 || codes[0] != wantF {
					t.Errorf("%d ids, usage %d, findings %v; want one id fewer and %q", len(sent), rec.complete, codes, wantF)
				}
			}
			// Prompt ids: the server's render of the request (/apply-template then /tokenize), or
			// the ids the client sent, both as long as usage.prompt_tokens.
			if got.PromptSource != c.promptSource {
				t.Errorf("prompt source %s, want %s", got.PromptSource, c.promptSource)
			}
			if c.promptSource != SourceAbsent && (!slices.Equal(got.PromptTokenIDs, prompt) || int64(len(prompt)) != rec.prompt) {
				t.Errorf("prompt ids %v, /tokenize gave %v, usage.prompt_tokens %d", got.PromptTokenIDs, prompt, rec.prompt)
			}
			if c.promptSource == SourceAbsent && got.PromptTokenIDs != nil {
				t.Errorf("a text Completions prompt read as ids %v", got.PromptTokenIDs)
			}
		})
	}
}

// TestLlamaServerRecordingsRender checks that the Chat cases were recorded as the gateway asks:
// the server got the client's request with exactly token_capture.added appended, and the prompt
// ids on token_capture are the /tokenize answer for the server's /apply-template render.
func TestLlamaServerRecordingsRender(t *testing.T) {
	for _, dir := range []string{"llamaserver_chat_json", "llamaserver_chat_sse"} {
		t.Run(dir, func(t *testing.T) {
			d := filepath.Join("testdata", dir)
			read := func(name string) []byte {
				b, err := os.ReadFile(filepath.Join(d, name))
				if err != nil {
					t.Fatal(err)
				}
				return bytes.TrimSpace(b)
			}
			var tc struct {
				Added          json.RawMessage `json:"added"`
				PromptTokenIDs []int64         `json:"prompt_token_ids"`
			}
			readJSONFile(t, filepath.Join(d, "token_capture.json"), &tc)
			req, sent := read("request.json"), read("sent.json")
			wantSent := append(append(slices.Clone(req[:len(req)-1]), ','), tc.Added[1:]...)
			if !bytes.Equal(sent, wantSent) {
				t.Errorf("sent %s\nwant %s", sent, wantSent)
			}
			var at struct {
				Prompt string `json:"prompt"`
			}
			var tr struct {
				Content      string `json:"content"`
				AddSpecial   bool   `json:"add_special"`
				ParseSpecial bool   `json:"parse_special"`
			}
			readJSONFile(t, filepath.Join(d, "apply_template.json"), &at)
			readJSONFile(t, filepath.Join(d, "tokenize_request.json"), &tr)
			if at.Prompt == "" || tr.Content != at.Prompt || !tr.AddSpecial || !tr.ParseSpecial {
				t.Errorf("tokenize request %+v for render %q", tr, at.Prompt)
			}
			if !slices.Equal(tc.PromptTokenIDs, renderedPrompt(t)) {
				t.Errorf("token_capture prompt ids %v, /tokenize gave %v", tc.PromptTokenIDs, renderedPrompt(t))
			}
		})
	}
}
