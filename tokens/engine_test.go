package tokens

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestAddRequestFields(t *testing.T) {
	for _, tc := range []struct {
		engine      Engine
		dialect     string
		body        string
		want, added string // want "" means the body is returned unchanged
		not         NotAsked
	}{
		{EngineVLLM, "chat", `{"model":"m","messages":[]}`, `{"model":"m","messages":[],"return_token_ids":true,"logprobs":true}`, `{"return_token_ids":true,"logprobs":true}`, ""},
		{EngineVLLM, "chat", `{"model":"m","logprobs":false}` + "\n", `{"model":"m","logprobs":false,"return_token_ids":true}`, `{"return_token_ids":true}`, ""},
		{EngineVLLM, "chat", `{"return_token_ids":null,"logprobs":true}`, "", "{}", ""},
		{EngineSGLang, "chat", `{ }`, `{ "return_input_ids_in_sglext":true,"return_output_ids_in_sglext":true,"logprobs":true}`, `{"return_input_ids_in_sglext":true,"return_output_ids_in_sglext":true,"logprobs":true}`, ""},
		{EngineLlamaServer, "chat", `{"messages":[],"top_logprobs":5}`, `{"messages":[],"top_logprobs":5,"logprobs":true}`, `{"logprobs":true}`, ""},
		{EngineLlamaServer, "responses", `{"input":"x"}`, "", "", ""},
		// llama-server refuses logprobs on a streamed call with tools (400): nothing is added, and
		// the line says why.
		{EngineLlamaServer, "chat", `{"messages":[],"stream":true,"tools":[{"type":"function"}]}`, "", "{}", NotAskedStreamWithTools},
		{EngineLlamaServer, "chat", `{"messages":[],"stream":true,"logprobs":true,"tools":[{}]}`, "", "{}", NotAskedStreamWithTools},
		{EngineLlamaServer, "chat", `{"messages":[],"stream":true,"tools":[ ]}`, `{"messages":[],"stream":true,"tools":[ ],"logprobs":true,"top_logprobs":1}`, `{"logprobs":true,"top_logprobs":1}`, ""},
		{EngineLlamaServer, "chat", `{"messages":[],"stream":false,"tools":[{}]}`, `{"messages":[],"stream":false,"tools":[{}],"logprobs":true,"top_logprobs":1}`, `{"logprobs":true,"top_logprobs":1}`, ""},
		{EngineLlamaServer, "chat", `{"messages":[],"tools":[{}]}`, `{"messages":[],"tools":[{}],"logprobs":true,"top_logprobs":1}`, `{"logprobs":true,"top_logprobs":1}`, ""},
		{EngineLlamaServer, "chat", `{"messages":[],"stream":true}`, `{"messages":[],"stream":true,"logprobs":true,"top_logprobs":1}`, `{"logprobs":true,"top_logprobs":1}`, ""},
		{EngineVLLM, "chat", `{"stream":true,"tools":[{}]}`, `{"stream":true,"tools":[{}],"return_token_ids":true,"logprobs":true}`, `{"return_token_ids":true,"logprobs":true}`, ""},
		{EngineSGLang, "chat", `{"stream":true,"tools":[{}]}`, `{"stream":true,"tools":[{}],"return_input_ids_in_sglext":true,"return_output_ids_in_sglext":true,"logprobs":true}`, `{"return_input_ids_in_sglext":true,"return_output_ids_in_sglext":true,"logprobs":true}`, ""},
		// Completions: the legacy logprobs is a count of alternatives.
		{EngineVLLM, "completions", `{"model":"m","prompt":"hi"}`, `{"model":"m","prompt":"hi","return_token_ids":true,"logprobs":0}`, `{"return_token_ids":true,"logprobs":0}`, ""},
		{EngineVLLM, "completions", `{"prompt":[1,2],"logprobs":5,"stream":true}`, `{"prompt":[1,2],"logprobs":5,"stream":true,"return_token_ids":true}`, `{"return_token_ids":true}`, ""},
		{EngineSGLang, "completions", `{"prompt":"hi","stream":true}`, `{"prompt":"hi","stream":true,"return_token_ids":true,"logprobs":0}`, `{"return_token_ids":true,"logprobs":0}`, ""},
		{EngineLlamaServer, "completions", `{"prompt":"hi","stream":true}`, `{"prompt":"hi","stream":true,"logprobs":1}`, `{"logprobs":1}`, ""},
		// llama-server reads logprobs as its n_probs: a client's own n_probs wins.
		{EngineLlamaServer, "completions", `{"prompt":"hi","n_probs":3}`, "", "{}", ""},
		{EngineLlamaServer, "completions", `{"prompt":"hi","logprobs":null}`, "", "{}", ""},
		// Tools do not exist on Completions; a stream is asked.
		{EngineLlamaServer, "completions", `{"prompt":"hi","stream":true,"tools":[{}]}`, `{"prompt":"hi","stream":true,"tools":[{}],"logprobs":1}`, `{"logprobs":1}`, ""},
		{EngineVLLM, "messages", `{"messages":[]}`, "", "", ""},
		{EngineSGLang, "gemini", `{"contents":[]}`, "", "", ""},
		{"", "chat", `{"messages":[]}`, "", "", ""},
		{"", "completions", `{"prompt":"x"}`, "", "", ""},
		// Members of odd types, an escaped name, a repeated name: a member the client set is left
		// as it is, whatever its value (the engine answers for it); the last of a repeated name
		// decides, as the engines' JSON readers do.
		{EngineVLLM, "chat", `{"logprobs":"yes","return_token_ids":[1]}`, "", "{}", ""},
		{EngineVLLM, "chat", `{"logpr\u006fbs":{"a":1}}`, `{"logpr\u006fbs":{"a":1},"return_token_ids":true}`, `{"return_token_ids":true}`, ""},
		{EngineLlamaServer, "chat", `{"stream":true,"stream":false,"tools":[{}]}`, `{"stream":true,"stream":false,"tools":[{}],"logprobs":true,"top_logprobs":1}`, `{"logprobs":true,"top_logprobs":1}`, ""},
		{EngineLlamaServer, "chat", `{"stream":false,"stream":true,"tools":[{}]}`, "", "{}", NotAskedStreamWithTools},
		{EngineLlamaServer, "chat", `{"stream":"true","tools":[{}]}`, `{"stream":"true","tools":[{}],"logprobs":true,"top_logprobs":1}`, `{"logprobs":true,"top_logprobs":1}`, ""},
		{EngineLlamaServer, "chat", `{"stream":true,"tools":null}`, `{"stream":true,"tools":null,"logprobs":true,"top_logprobs":1}`, `{"logprobs":true,"top_logprobs":1}`, ""},
		{EngineLlamaServer, "completions", `{"prompt":"hi","logprobs":-1}`, "", "{}", ""},
		{EngineVLLM, "chat", `[1,2]`, "", "", ""},
		{EngineVLLM, "completions", `"hi"`, "", "", ""},
		{EngineVLLM, "chat", `{"a":1`, "", "", ""},
		{EngineVLLM, "chat", `not json}`, "", "", ""},
	} {
		out, added, not := AddRequestFields(tc.engine, tc.dialect, []byte(tc.body))
		want := tc.want
		if want == "" {
			want = tc.body
		}
		if string(out) != want || string(added) != tc.added || not != tc.not {
			t.Errorf("%s %s %s: got %s, added %s, not asked %q", tc.engine, tc.dialect, tc.body, out, added, not)
		}
		if tc.want != "" && !json.Valid(out) {
			t.Errorf("%s: result is not JSON", out)
		}
	}
}

func TestParseEngine(t *testing.T) {
	for _, s := range []string{"vllm", "sglang", "llama-server", ""} {
		if e, err := ParseEngine(s); err != nil || string(e) != s {
			t.Errorf("ParseEngine(%q) = %q, %v", s, e, err)
		}
	}
	if _, err := ParseEngine("tgi"); err == nil {
		t.Error("ParseEngine(tgi) accepted")
	}
}

// BenchmarkAddRequestFields is what --tokens adds before a call is forwarded: the members of a
// 200 KB Chat request checked and the fields appended.
func BenchmarkAddRequestFields(b *testing.B) {
	msg := `{"role":"user","content":"` + strings.Repeat("lorem ipsum dolor sit amet ", 40) + `"},`
	body := []byte(`{"model":"m","messages":[` + strings.Repeat(msg, 180) + `{"role":"user","content":"hi"}],"stream":true}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, added, _ := AddRequestFields(EngineVLLM, "chat", body); added == nil {
			b.Fatal("nothing added")
		}
	}
}
