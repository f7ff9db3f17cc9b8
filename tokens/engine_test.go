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
	}{
		{EngineVLLM, "chat", `{"model":"m","messages":[]}`, `{"model":"m","messages":[],"return_token_ids":true,"logprobs":true}`, `{"return_token_ids":true,"logprobs":true}`},
		{EngineVLLM, "chat", `{"model":"m","logprobs":false}` + "\n", `{"model":"m","logprobs":false,"return_token_ids":true}`, `{"return_token_ids":true}`},
		{EngineVLLM, "chat", `{"return_token_ids":null,"logprobs":true}`, "", "{}"},
		{EngineSGLang, "chat", `{ }`, `{ "return_input_ids_in_sglext":true,"return_output_ids_in_sglext":true,"logprobs":true}`, `{"return_input_ids_in_sglext":true,"return_output_ids_in_sglext":true,"logprobs":true}`},
		{EngineLlamaServer, "chat", `{"messages":[],"top_logprobs":5}`, `{"messages":[],"top_logprobs":5,"logprobs":true}`, `{"logprobs":true}`},
		{EngineLlamaServer, "responses", `{"input":"x"}`, "", ""},
		// llama-server refuses logprobs on a streamed call with tools (400).
		{EngineLlamaServer, "chat", `{"messages":[],"stream":true,"tools":[{"type":"function"}]}`, "", "{}"},
		{EngineLlamaServer, "chat", `{"messages":[],"stream":true,"tools":[ ]}`, `{"messages":[],"stream":true,"tools":[ ],"logprobs":true,"top_logprobs":1}`, `{"logprobs":true,"top_logprobs":1}`},
		{EngineLlamaServer, "chat", `{"messages":[],"stream":false,"tools":[{}]}`, `{"messages":[],"stream":false,"tools":[{}],"logprobs":true,"top_logprobs":1}`, `{"logprobs":true,"top_logprobs":1}`},
		{EngineVLLM, "chat", `{"stream":true,"tools":[{}]}`, `{"stream":true,"tools":[{}],"return_token_ids":true,"logprobs":true}`, `{"return_token_ids":true,"logprobs":true}`},
		{EngineVLLM, "messages", `{"messages":[]}`, "", ""},
		{"", "chat", `{"messages":[]}`, "", ""},
		{EngineVLLM, "chat", `[1,2]`, "", ""},
		{EngineVLLM, "chat", `{"a":1`, "", ""},
		{EngineVLLM, "chat", `not json}`, "", ""},
	} {
		out, added := AddRequestFields(tc.engine, tc.dialect, []byte(tc.body))
		want := tc.want
		if want == "" {
			want = tc.body
		}
		if string(out) != want || string(added) != tc.added {
			t.Errorf("%s %s %s: got %s, added %s", tc.engine, tc.dialect, tc.body, out, added)
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
		if _, added := AddRequestFields(EngineVLLM, "chat", body); added == nil {
			b.Fatal("nothing added")
		}
	}
}
