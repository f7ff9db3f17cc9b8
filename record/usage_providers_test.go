package record

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

// providerUsageCases has a case per row of the provider usage table in docs/records-and-merge.md
// (row = "provider | field", optionally followed by " (variant)" for a further case of the same
// row): a usage object in that provider's shape, with the record fields it must give.
// TestProviderUsageShapes fails when a row has no case or a case no row.
var providerUsageCases = []struct {
	row, usage, want string
}{
	{"OpenAI Chat | prompt_tokens",
		`{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`,
		"in=2006 out=300 reasoning=0 total=2306 creation=<nil> cached=1920 hit=true"},
	{"OpenAI Chat | prompt_tokens_details.cached_tokens",
		`{"prompt_tokens":1486,"completion_tokens":651,"total_tokens":2137,"prompt_tokens_details":{"cached_tokens":1408,"audio_tokens":0}}`,
		"in=1486 out=651 reasoning=<nil> total=2137 creation=<nil> cached=1408 hit=true"},
	{"OpenAI Chat | prompt_tokens_details.cache_write_tokens",
		`{"prompt_tokens":3000,"completion_tokens":10,"total_tokens":3010,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":2048}}`,
		"in=3000 out=10 reasoning=<nil> total=3010 creation=2048 cached=0 hit=false"},
	{"OpenAI Chat | completion_tokens_details.reasoning_tokens",
		`{"prompt_tokens":1486,"completion_tokens":651,"total_tokens":2137,"completion_tokens_details":{"reasoning_tokens":512,"audio_tokens":0}}`,
		"in=1486 out=651 reasoning=512 total=2137 creation=<nil> cached=<nil> hit=<nil>"},
	{"OpenAI Responses | input_tokens_details.cached_tokens",
		`{"input_tokens":366,"input_tokens_details":{"cached_tokens":256},"output_tokens":63,"output_tokens_details":{"reasoning_tokens":18},"total_tokens":429}`,
		"in=366 out=63 reasoning=18 total=429 creation=<nil> cached=256 hit=true"},
	{"OpenAI Responses | input_tokens_details.cache_write_tokens",
		`{"input_tokens":5000,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":4096},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":5020}`,
		"in=5000 out=20 reasoning=0 total=5020 creation=4096 cached=0 hit=false"},
	{"OpenAI Responses | output_tokens_details.reasoning_tokens",
		`{"input_tokens":53,"input_tokens_details":{"cached_tokens":0},"output_tokens":469,"output_tokens_details":{"reasoning_tokens":448},"total_tokens":522}`,
		"in=53 out=469 reasoning=448 total=522 creation=<nil> cached=0 hit=false"},
	{"Anthropic | input_tokens",
		`{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":29,"service_tier":"standard"}`,
		"in=12 out=29 reasoning=<nil> total=41 creation=0 cached=0 hit=false"},
	{"Anthropic | cache_read_input_tokens",
		`{"input_tokens":3,"cache_creation_input_tokens":418,"cache_read_input_tokens":1111,"output_tokens":33,"service_tier":"standard","server_tool_use":{"web_search_requests":1}}`,
		"in=1532 out=33 reasoning=<nil> total=1565 creation=418 cached=1111 hit=true"},
	{"Anthropic | cache_creation_input_tokens",
		`{"input_tokens":10,"cache_creation_input_tokens":2000,"cache_read_input_tokens":0,"output_tokens":5}`,
		"in=2010 out=5 reasoning=<nil> total=2015 creation=2000 cached=0 hit=false"},
	{"Anthropic | cache_creation.ephemeral_5m_input_tokens",
		`{"input_tokens":6,"cache_creation_input_tokens":3337,"cache_read_input_tokens":6289,"cache_creation":{"ephemeral_5m_input_tokens":3068,"ephemeral_1h_input_tokens":269},"output_tokens":198}`,
		"in=9632 out=198 reasoning=<nil> total=9830 creation=3337 cached=6289 hit=true"},
	{"Anthropic | output_tokens_details.thinking_tokens",
		`{"input_tokens":6,"cache_creation_input_tokens":3337,"cache_read_input_tokens":6289,"output_tokens":198,"output_tokens_details":{"thinking_tokens":120}}`,
		"in=9632 out=198 reasoning=120 total=9830 creation=3337 cached=6289 hit=true"},
	{"Bedrock (InvokeModel, Messages body) | cache_read_input_tokens",
		`{"input_tokens":4,"cache_creation_input_tokens":0,"cache_read_input_tokens":2900,"output_tokens":77}`,
		"in=2904 out=77 reasoning=<nil> total=2981 creation=0 cached=2900 hit=true"},
	// The usage of testdata/fixtures/openai_chat/compat_deepseek_json_reasoning_content_tool_call.json
	// (a real DeepSeek answer): the hit count is also sent as cached_tokens and counted once.
	{"DeepSeek | prompt_tokens",
		`{"prompt_tokens":339,"completion_tokens":92,"total_tokens":431,"prompt_tokens_details":{"cached_tokens":320},"completion_tokens_details":{"reasoning_tokens":48},"prompt_cache_hit_tokens":320,"prompt_cache_miss_tokens":19}`,
		"in=339 out=92 reasoning=48 total=431 creation=<nil> cached=320 hit=true"},
	{"DeepSeek | prompt_tokens (cache fields only at top level)",
		`{"prompt_tokens":1500,"completion_tokens":40,"total_tokens":1540,"prompt_cache_hit_tokens":1280,"prompt_cache_miss_tokens":220}`,
		"in=1500 out=40 reasoning=<nil> total=1540 creation=<nil> cached=1280 hit=true"},
	{"DeepSeek | prompt_cache_hit_tokens",
		`{"prompt_tokens":64,"completion_tokens":8,"total_tokens":72,"prompt_tokens_details":{"cached_tokens":0},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":64}`,
		"in=64 out=8 reasoning=<nil> total=72 creation=<nil> cached=0 hit=false"},
	{"DeepSeek | prompt_cache_miss_tokens",
		`{"completion_tokens":8,"prompt_cache_hit_tokens":128,"prompt_cache_miss_tokens":22}`,
		"in=150 out=8 reasoning=<nil> total=158 creation=<nil> cached=128 hit=true"},
	{"DeepSeek | completion_tokens_details.reasoning_tokens",
		`{"prompt_tokens":20,"completion_tokens":300,"total_tokens":320,"completion_tokens_details":{"reasoning_tokens":250},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":20}`,
		"in=20 out=300 reasoning=250 total=320 creation=<nil> cached=0 hit=false"},
	{"OpenRouter | prompt_tokens_details.cached_tokens",
		`{"prompt_tokens":163,"completion_tokens":241,"total_tokens":404,"prompt_tokens_details":{"audio_tokens":0,"cache_write_tokens":0,"cached_tokens":162,"video_tokens":0},"cost":0.000129,"is_byok":false}`,
		"in=163 out=241 reasoning=<nil> total=404 creation=0 cached=162 hit=true"},
	{"OpenRouter | prompt_tokens_details.cache_write_tokens",
		`{"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":0},"cost":0.95,"cost_details":{"upstream_inference_cost":19},"prompt_tokens":194,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":100,"audio_tokens":0},"total_tokens":196}`,
		"in=194 out=2 reasoning=0 total=196 creation=100 cached=0 hit=false"},
	{"OpenRouter | completion_tokens_details.reasoning_tokens",
		`{"completion_tokens":241,"completion_tokens_details":{"audio_tokens":0,"image_tokens":0,"reasoning_tokens":204},"prompt_tokens":163,"prompt_tokens_details":{"cached_tokens":162},"total_tokens":404}`,
		"in=163 out=241 reasoning=204 total=404 creation=<nil> cached=162 hit=true"},
	// The last usageMetadata of testdata/fixtures/google_gemini/stream_function_call_thought_signature.sse.
	{"Gemini (native) | promptTokenCount",
		`{"promptTokenCount":83,"candidatesTokenCount":14,"totalTokenCount":201,"promptTokensDetails":[{"modality":"TEXT","tokenCount":83}],"thoughtsTokenCount":104}`,
		"in=83 out=118 reasoning=104 total=201 creation=<nil> cached=<nil> hit=<nil>"},
	{"Gemini (native) | promptTokenCount (tool use prompt)",
		`{"promptTokenCount":100,"toolUsePromptTokenCount":50,"candidatesTokenCount":20,"totalTokenCount":170}`,
		"in=150 out=20 reasoning=<nil> total=170 creation=<nil> cached=<nil> hit=<nil>"},
	{"Gemini (native) | candidatesTokenCount",
		`{"promptTokenCount":138,"candidatesTokenCount":15,"totalTokenCount":153,"promptTokensDetails":[{"modality":"TEXT","tokenCount":138}]}`,
		"in=138 out=15 reasoning=<nil> total=153 creation=<nil> cached=<nil> hit=<nil>"},
	{"Gemini (native) | thoughtsTokenCount",
		`{"promptTokenCount":9,"candidatesTokenCount":29,"totalTokenCount":294,"thoughtsTokenCount":256}`,
		"in=9 out=285 reasoning=256 total=294 creation=<nil> cached=<nil> hit=<nil>"},
	{"Gemini (native) | cachedContentTokenCount",
		`{"promptTokenCount":2000,"cachedContentTokenCount":1500,"candidatesTokenCount":10,"totalTokenCount":2010}`,
		"in=2000 out=10 reasoning=<nil> total=2010 creation=<nil> cached=1500 hit=true"},
	{"Gemini (OpenAI-compatible) | completion_tokens",
		`{"completion_tokens":102,"prompt_tokens":758,"total_tokens":1725}`,
		"in=758 out=102 reasoning=<nil> total=1725 creation=<nil> cached=<nil> hit=<nil>"},
	{"Gemini (OpenAI-compatible) | reasoning_tokens",
		`{"completion_tokens":57,"prompt_tokens":2181,"total_tokens":2518,"completion_tokens_details":null,"prompt_tokens_details":null,"reasoning_tokens":280}`,
		"in=2181 out=337 reasoning=280 total=2518 creation=<nil> cached=<nil> hit=<nil>"},
	{"xAI | prompt_tokens_details.cached_tokens",
		`{"prompt_tokens":686,"completion_tokens":123,"total_tokens":809,"prompt_tokens_details":{"cached_tokens":679,"text_tokens":686,"audio_tokens":0,"image_tokens":0},"completion_tokens_details":{"text_tokens":11,"audio_tokens":0,"reasoning_tokens":112}}`,
		"in=686 out=123 reasoning=112 total=809 creation=<nil> cached=679 hit=true"},
	{"xAI | completion_tokens_details.reasoning_tokens",
		`{"prompt_tokens":12,"completion_tokens":10,"total_tokens":322,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":300}}`,
		"in=12 out=310 reasoning=300 total=322 creation=<nil> cached=0 hit=false"},
	{"Mistral | prompt_audio_seconds",
		`{"prompt_tokens":9,"completion_tokens":17,"total_tokens":26,"prompt_audio_seconds":{}}`,
		"in=9 out=17 reasoning=<nil> total=26 creation=<nil> cached=<nil> hit=<nil>"},
	{"vLLM | prompt_tokens_details.cached_tokens",
		`{"prompt_tokens":1024,"total_tokens":1040,"completion_tokens":16,"prompt_tokens_details":{"cached_tokens":1008}}`,
		"in=1024 out=16 reasoning=<nil> total=1040 creation=<nil> cached=1008 hit=true"},
	{"vLLM | input_tokens_details.cached_tokens",
		`{"input_tokens":80,"input_tokens_details":{"cached_tokens":64},"output_tokens":12,"output_tokens_details":{"reasoning_tokens":7},"total_tokens":92}`,
		"in=80 out=12 reasoning=7 total=92 creation=<nil> cached=64 hit=true"},
	{"SGLang | prompt_tokens_details.cached_tokens",
		`{"prompt_tokens":300,"total_tokens":350,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":256},"reasoning_tokens":0}`,
		"in=300 out=50 reasoning=0 total=350 creation=<nil> cached=256 hit=true"},
	{"llama.cpp server | prompt_tokens_details.cached_tokens",
		`{"completion_tokens":5,"prompt_tokens":40,"total_tokens":45,"prompt_tokens_details":{"cached_tokens":32}}`,
		"in=40 out=5 reasoning=<nil> total=45 creation=<nil> cached=32 hit=true"},
	{"llama.cpp server | prompt_tokens_details.cache_write_tokens",
		`{"completion_tokens":5,"prompt_tokens":40,"total_tokens":45,"prompt_tokens_details":{"cached_tokens":32,"cache_write_tokens":8}}`,
		"in=40 out=5 reasoning=<nil> total=45 creation=8 cached=32 hit=true"},
	{"Ollama (OpenAI-compatible) | prompt_tokens",
		`{"prompt_tokens":26,"completion_tokens":140,"total_tokens":166}`,
		"in=26 out=140 reasoning=<nil> total=166 creation=<nil> cached=<nil> hit=<nil>"},
	{"LiteLLM | prompt_tokens",
		`{"prompt_tokens":1000,"completion_tokens":5,"total_tokens":1005,"prompt_tokens_details":{"cached_tokens":800},"cache_read_input_tokens":800,"cache_creation_input_tokens":100}`,
		"in=1000 out=5 reasoning=<nil> total=1005 creation=100 cached=800 hit=true"},
	{"LiteLLM | prompt_tokens_details.cache_creation_tokens",
		`{"prompt_tokens":1117,"completion_tokens":46,"total_tokens":1163,"prompt_tokens_details":{"audio_tokens":null,"cached_tokens":3,"text_tokens":null,"image_tokens":null,"cache_creation_tokens":0,"cache_creation_token_details":{"ephemeral_5m_input_tokens":5,"ephemeral_1h_input_tokens":0}}}`,
		"in=1117 out=46 reasoning=<nil> total=1163 creation=0 cached=3 hit=true"},
	{"LiteLLM | cache_creation_input_tokens",
		`{"prompt_tokens":2100,"completion_tokens":9,"total_tokens":2109,"completion_tokens_details":{"reasoning_tokens":0},"cache_creation_input_tokens":2000,"cache_read_input_tokens":0}`,
		"in=2100 out=9 reasoning=0 total=2109 creation=2000 cached=0 hit=false"},
}

func usageString(u json.RawMessage) string {
	s := ExtractTokenStats(u)
	hit, cached := cacheSignalJSON(u)
	h := "<nil>"
	if hit != nil {
		h = fmt.Sprint(*hit)
	}
	return fmt.Sprintf("%s cached=%s hit=%s", statsString(s), intOrNil(cached), h)
}

func TestProviderUsageShapes(t *testing.T) {
	seen, names := map[string]bool{}, map[string]bool{}
	for _, c := range providerUsageCases {
		if names[c.row] {
			t.Errorf("two cases named %q", c.row)
		}
		names[c.row] = true
		provider, field, _ := strings.Cut(c.row, " | ")
		field, _, _ = strings.Cut(field, " (")
		seen[provider+" | "+field] = true
		t.Run(c.row, func(t *testing.T) {
			if got := usageString(json.RawMessage(c.usage)); got != c.want {
				t.Errorf("usage %s\n got %s\nwant %s", c.usage, got, c.want)
			}
			// The same usage inside a response gives the same record fields.
			rec, err := BuildRecord([]byte(`{"model_call_id":"x","dialect":"chat","response":{"usage":`+c.usage+`}}`), 0)
			if err != nil {
				t.Fatal(err)
			}
			h := "<nil>"
			if rec.CacheHit != nil {
				h = fmt.Sprint(*rec.CacheHit)
			}
			got := fmt.Sprintf("in=%s out=%s reasoning=%s total=%s creation=%s cached=%s hit=%s", intOrNil(rec.TokensIn), intOrNil(rec.TokensOut),
				intOrNil(rec.TokensReasoning), intOrNil(rec.TokensTotal), intOrNil(rec.CacheCreationTokens), intOrNil(rec.CachedTokens), h)
			if got != c.want {
				t.Errorf("record from usage %s\n got %s\nwant %s", c.usage, got, c.want)
			}
		})
	}
	rows := providerTableRows(t)
	for _, r := range rows {
		if !seen[r] {
			t.Errorf("docs/records-and-merge.md row %q has no case in providerUsageCases", r)
		}
		delete(seen, r)
	}
	var extra []string
	for r := range seen {
		extra = append(extra, r)
	}
	sort.Strings(extra)
	for _, r := range extra {
		t.Errorf("case %q has no row in the provider usage table of docs/records-and-merge.md", r)
	}
}

// providerTableRows returns "provider | field" of every row of the provider usage table.
func providerTableRows(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../docs/records-and-merge.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "<!-- provider usage table")
	end := strings.Index(text, "<!-- end of provider usage table -->")
	if start < 0 || end < start {
		t.Fatal("provider usage table markers not found in docs/records-and-merge.md")
	}
	var rows []string
	for _, line := range strings.Split(text[start:end], "\n") {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 4 || strings.TrimSpace(cells[1]) == "provider" || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		rows = append(rows, strings.TrimSpace(cells[1])+" | "+strings.Trim(strings.TrimSpace(cells[2]), "`"))
	}
	if len(rows) < 20 {
		t.Fatalf("only %d rows read from the provider usage table", len(rows))
	}
	return rows
}
