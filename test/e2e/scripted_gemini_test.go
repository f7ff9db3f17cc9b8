package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestScriptedGemini plays Gemini CLI's tool loop against the scripted upstream: a first turn
// offering read_file (declared with parametersJsonSchema, as Gemini CLI declares its tools) is
// answered with a thought and a functionCall of it, streamed as CRLF-framed events when the URL
// asks for alt=sse; the turn carrying the functionResponse gets the nonce back; the usage the tests
// read from either body is the one the upstream accounts for.
func TestScriptedGemini(t *testing.T) {
	const file = "/work/project/hello.txt"
	sc := &Scripted{FilePath: file}
	srv := capturetest.NewServer(t, sc.ServeHTTP)
	first := `{"contents":[{"role":"user","parts":[{"text":"Read hello.txt"}]}],"tools":[{"functionDeclarations":[` +
		`{"name":"list_directory","parametersJsonSchema":{"type":"object","required":["dir_path"]}},` +
		`{"name":"read_file","parametersJsonSchema":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}}]}]}`
	second := `{"contents":[{"role":"user","parts":[{"text":"Read hello.txt"}]},` +
		`{"role":"model","parts":[{"functionCall":{"id":"c1","name":"read_file","args":{"file_path":"` + file + `"}}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"read_file","response":{"output":"e2e-nonce-0123456789abcdef\n"}}}]}]}`
	post := func(path, body string) (http.Header, []byte) {
		t.Helper()
		res, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, res.StatusCode, b)
		}
		return res.Header, b
	}
	for _, stream := range []bool{true, false} {
		path := "/v1beta/models/gemini-e2e:generateContent"
		if stream {
			path = "/v1beta/models/gemini-e2e:streamGenerateContent?alt=sse"
		}
		for turn, body := range []string{first, second} {
			hdr, b := post(path, body)
			served := sc.Take()
			if len(served) != 1 {
				t.Fatalf("%d calls served", len(served))
			}
			sv := served[0]
			if sv.Dialect != DialectGemini || sv.Stream != stream || sv.Model != "gemini-e2e" {
				t.Errorf("served %+v", sv)
			}
			if ct := hdr.Get("Content-Type"); (ct == "text/event-stream") != stream {
				t.Errorf("stream %v: Content-Type %s", stream, ct)
			}
			if stream && !strings.Contains(string(b), "\r\n\r\n") {
				t.Errorf("events are not CRLF-framed: %q", b)
			}
			switch turn {
			case 0:
				if sv.ToolCall == nil || sv.ToolCall.Name != "read_file" || sv.ToolCall.Arguments["file_path"] != file {
					t.Errorf("first turn: tool call %+v", sv.ToolCall)
				}
				if !strings.Contains(string(b), `"thought":true`) || !strings.Contains(string(b), `"functionCall"`) {
					t.Errorf("first turn body lacks the thought or the call: %s", b)
				}
			case 1:
				if sv.Text != AnswerForNonce("e2e-nonce-0123456789abcdef") {
					t.Errorf("second turn: text %q (tool result %q)", sv.Text, sv.ToolResult)
				}
			}
			obs := Observe(DialectGemini, b)
			if strOr(obs.ResponseID) != sv.ResponseID || strOr(obs.Model) != sv.Model || obs.TokensOut == nil ||
				*obs.TokensOut != sv.TokensOut || *obs.TokensIn != sv.TokensIn || *obs.Cached != sv.CachedTokens ||
				*obs.TokensAll != sv.TokensIn+sv.TokensOut {
				ob, _ := json.Marshal(obs)
				t.Errorf("stream %v turn %d: observed %s, served %+v", stream, turn, ob, sv)
			}
		}
	}
	_, b := post("/v1beta/models/gemini-e2e:countTokens", first)
	var ct struct{ TotalTokens int }
	if json.Unmarshal(b, &ct) != nil || ct.TotalTokens < 1 {
		t.Errorf("countTokens: %s", b)
	}
}

func strOr(p *string) string {
	if p == nil {
		return "<none>"
	}
	return *p
}
