package record

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
)

func TestTokenCount(t *testing.T) {
	cases := []struct {
		in   string
		want string // "" = invalid
	}{
		{"10", "10"}, {"0", "0"}, {"-0", "0"}, {" 7 ", "7"}, {"9223372036854775807", "9223372036854775807"},
		{"10.0", ""}, {"1e3", ""}, {"1E3", ""}, {"true", ""}, {"false", ""}, {`"10"`, ""}, {"-1", ""},
		{"null", ""}, {"", ""}, {"[10]", ""}, {"9223372036854775808", ""}, {"NaN", ""},
	}
	for _, c := range cases {
		n, ok := tokenCountJSON(json.RawMessage(c.in))
		got := ""
		if ok {
			got = fmt.Sprint(n)
		}
		if got != c.want {
			t.Errorf("tokenCountJSON(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func statsString(s TokenStats) string {
	return fmt.Sprintf("in=%s out=%s reasoning=%s total=%s creation=%s", intOrNil(s.TokensIn), intOrNil(s.TokensOut),
		intOrNil(s.TokensReasoning), intOrNil(s.TokensTotal), intOrNil(s.CacheCreationTokens))
}

func TestExtractTokenStats(t *testing.T) {
	cases := []struct{ name, usage, want string }{
		{"not a mapping", `[1,2]`, "in=<nil> out=<nil> reasoning=<nil> total=<nil> creation=<nil>"},
		{"null", `null`, "in=<nil> out=<nil> reasoning=<nil> total=<nil> creation=<nil>"},
		{"invalid JSON", `{"input_tokens":1`, "in=<nil> out=<nil> reasoning=<nil> total=<nil> creation=<nil>"},
		{"responses", `{"input_tokens":10,"output_tokens":5,"total_tokens":15,"output_tokens_details":{"reasoning_tokens":2}}`,
			"in=10 out=5 reasoning=2 total=15 creation=<nil>"},
		{"chat fallbacks", `{"prompt_tokens":10,"completion_tokens":5,"completion_tokens_details":{"reasoning_tokens":3}}`,
			"in=10 out=5 reasoning=3 total=15 creation=<nil>"},
		{"input wins over prompt", `{"input_tokens":1,"prompt_tokens":2,"output_tokens":3,"completion_tokens":4}`,
			"in=1 out=3 reasoning=<nil> total=4 creation=<nil>"},
		{"invalid counts are absent", `{"input_tokens":10.0,"prompt_tokens":4,"output_tokens":"5","completion_tokens":true,"total_tokens":1e3}`,
			"in=4 out=<nil> reasoning=<nil> total=<nil> creation=<nil>"},
		{"total kept verbatim", `{"input_tokens":1,"output_tokens":1,"total_tokens":99}`, "in=1 out=1 reasoning=<nil> total=99 creation=<nil>"},
		{"zero is a value", `{"input_tokens":0,"output_tokens":0}`, "in=0 out=0 reasoning=<nil> total=0 creation=<nil>"},
		// Anthropic cache fold: top-level cache read + creation added into input_tokens.
		{"anthropic fold", `{"input_tokens":10,"cache_read_input_tokens":5,"cache_creation_input_tokens":2,"output_tokens":1}`,
			"in=17 out=1 reasoning=<nil> total=18 creation=2"},
		{"fully cached prompt, no input", `{"cache_read_input_tokens":100,"output_tokens":1}`,
			"in=100 out=1 reasoning=<nil> total=101 creation=<nil>"},
		{"zero-only cache fields invent nothing", `{"cache_read_input_tokens":0,"cache_creation_input_tokens":0,"output_tokens":1}`,
			"in=<nil> out=1 reasoning=<nil> total=<nil> creation=0"},
		{"zero cache fields keep input", `{"input_tokens":3,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}`,
			"in=3 out=<nil> reasoning=<nil> total=<nil> creation=0"},
		{"provided total not recomputed after fold", `{"input_tokens":3,"cache_read_input_tokens":7,"output_tokens":1,"total_tokens":4}`,
			"in=10 out=1 reasoning=<nil> total=4 creation=<nil>"},
		// Our difference: no fold for OpenAI-shaped usage, whose prompt count already includes the cache.
		{"litellm: prompt_tokens already include cache", `{"prompt_tokens":1000,"completion_tokens":5,"cache_read_input_tokens":800,"cache_creation_input_tokens":100}`,
			"in=1000 out=5 reasoning=<nil> total=1005 creation=100"},
		{"openai cached subset present", `{"input_tokens":1000,"input_tokens_details":{"cached_tokens":800},"cache_read_input_tokens":800,"output_tokens":5}`,
			"in=1000 out=5 reasoning=<nil> total=1005 creation=<nil>"},
		{"openai cached_input_tokens subset present", `{"input_tokens":1000,"prompt_tokens_details":{"cached_input_tokens":0},"cache_read_input_tokens":800}`,
			"in=1000 out=<nil> reasoning=<nil> total=<nil> creation=<nil>"},
		{"invalid subset count does not block the fold", `{"input_tokens":10,"input_tokens_details":{"cached_tokens":"800"},"cache_read_input_tokens":5}`,
			"in=15 out=<nil> reasoning=<nil> total=<nil> creation=<nil>"},
		{"openai cached tokens never folded", `{"prompt_tokens":100,"prompt_tokens_details":{"cached_tokens":80},"completion_tokens":1}`,
			"in=100 out=1 reasoning=<nil> total=101 creation=<nil>"},
		// Reasoning sources in order; thinking_tokens (ours) after NeMo Gym's.
		{"reasoning detail group-major", `{"output_tokens_details":{"reasoning_tokens":"x"},"completion_tokens_details":{"reasoning_tokens":4}}`,
			"in=<nil> out=<nil> reasoning=4 total=<nil> creation=<nil>"},
		{"reasoning_output_tokens alias", `{"reasoning_output_tokens":6}`, "in=<nil> out=<nil> reasoning=6 total=<nil> creation=<nil>"},
		{"detail before alias", `{"reasoning_output_tokens":6,"output_tokens_details":{"reasoning_tokens":1}}`,
			"in=<nil> out=<nil> reasoning=1 total=<nil> creation=<nil>"},
		{"anthropic thinking_tokens", `{"input_tokens":6,"output_tokens":198,"output_tokens_details":{"thinking_tokens":0}}`,
			"in=6 out=198 reasoning=0 total=204 creation=<nil>"},
		{"alias before thinking_tokens", `{"reasoning_output_tokens":6,"output_tokens_details":{"thinking_tokens":9}}`,
			"in=<nil> out=<nil> reasoning=6 total=<nil> creation=<nil>"},
		{"reasoning_tokens before thinking_tokens", `{"output_tokens_details":{"thinking_tokens":9,"reasoning_tokens":2}}`,
			"in=<nil> out=<nil> reasoning=2 total=<nil> creation=<nil>"},
		{"detail group not a mapping", `{"output_tokens_details":[{"reasoning_tokens":1}]}`, "in=<nil> out=<nil> reasoning=<nil> total=<nil> creation=<nil>"},
		// Provider shapes beyond the reference (docs/records-and-merge.md, provider usage table).
		{"deepseek hit without miss gives no prompt count", `{"prompt_cache_hit_tokens":5,"completion_tokens":1}`,
			"in=<nil> out=1 reasoning=<nil> total=<nil> creation=<nil>"},
		{"deepseek split is never folded with anthropic fields", `{"prompt_cache_hit_tokens":5,"prompt_cache_miss_tokens":5,"cache_read_input_tokens":5}`,
			"in=10 out=<nil> reasoning=<nil> total=<nil> creation=<nil>"},
		{"cache write subset blocks the anthropic fold", `{"input_tokens":100,"input_tokens_details":{"cache_write_tokens":60},"cache_creation_input_tokens":60,"output_tokens":1}`,
			"in=100 out=1 reasoning=<nil> total=101 creation=60"},
		{"cache_creation_input_tokens before details cache_write_tokens", `{"prompt_tokens":9,"prompt_tokens_details":{"cache_write_tokens":4},"cache_creation_input_tokens":7}`,
			"in=9 out=<nil> reasoning=<nil> total=<nil> creation=7"},
		{"details group order for cache writes", `{"input_tokens_details":{"cache_write_tokens":3},"prompt_tokens_details":{"cache_creation_tokens":2,"cache_write_tokens":"x"}}`,
			"in=<nil> out=<nil> reasoning=<nil> total=<nil> creation=2"},
		{"reasoning inside the completion is not added", `{"prompt_tokens":10,"completion_tokens":50,"total_tokens":60,"completion_tokens_details":{"reasoning_tokens":40}}`,
			"in=10 out=50 reasoning=40 total=60 creation=<nil>"},
		{"reasoning outside the completion is added", `{"prompt_tokens":10,"completion_tokens":10,"total_tokens":60,"completion_tokens_details":{"reasoning_tokens":40}}`,
			"in=10 out=50 reasoning=40 total=60 creation=<nil>"},
		{"no total: reasoning cannot be placed and is not added", `{"prompt_tokens":10,"completion_tokens":10,"reasoning_tokens":40}`,
			"in=10 out=10 reasoning=40 total=20 creation=<nil>"},
		{"zero reasoning never changes tokens_out", `{"prompt_tokens":10,"completion_tokens":10,"total_tokens":20,"reasoning_tokens":0}`,
			"in=10 out=10 reasoning=0 total=20 creation=<nil>"},
		{"exclusive check uses the prompt as reported, not the fold", `{"input_tokens":5,"cache_read_input_tokens":100,"output_tokens":10,"total_tokens":55,"reasoning_tokens":40}`,
			"in=105 out=50 reasoning=40 total=55 creation=<nil>"},
		{"thinking_tokens before top-level reasoning_tokens", `{"output_tokens_details":{"thinking_tokens":3},"reasoning_tokens":9}`,
			"in=<nil> out=<nil> reasoning=3 total=<nil> creation=<nil>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := statsString(ExtractTokenStats(json.RawMessage(c.usage))); got != c.want {
				t.Errorf("ExtractTokenStats(%s)\n got %s\nwant %s", c.usage, got, c.want)
			}
		})
	}
}

func TestCacheSignal(t *testing.T) {
	cases := []struct{ name, usage, want string }{
		{"none", `{"input_tokens":1}`, "<nil>/<nil>"},
		{"not a mapping", `"x"`, "<nil>/<nil>"},
		{"openai prompt details", `{"prompt_tokens_details":{"cached_tokens":5}}`, "true/5"},
		{"zero is a miss", `{"prompt_tokens_details":{"cached_tokens":0}}`, "false/0"},
		{"first match wins even if 0", `{"prompt_tokens_details":{"cached_tokens":0},"cache_read_input_tokens":9}`, "false/0"},
		{"group-major order", `{"prompt_tokens_details":{"cached_input_tokens":2},"input_tokens_details":{"cached_tokens":3}}`, "true/2"},
		{"within group field order", `{"input_tokens_details":{"cached_input_tokens":4,"cached_tokens":3}}`, "true/3"},
		{"anthropic read", `{"cache_read_input_tokens":1111,"cache_creation_input_tokens":418}`, "true/1111"},
		{"creation is not a hit", `{"cache_creation_input_tokens":418}`, "<nil>/<nil>"},
		{"top-level cached_input_tokens last", `{"cached_input_tokens":7}`, "true/7"},
		{"read before cached_input_tokens", `{"cached_input_tokens":7,"cache_read_input_tokens":1}`, "true/1"},
		{"invalid counts skipped", `{"prompt_tokens_details":{"cached_tokens":1.0},"cache_read_input_tokens":-2,"cached_input_tokens":3}`, "true/3"},
		{"group not a mapping skipped", `{"prompt_tokens_details":5,"input_tokens_details":{"cached_tokens":8}}`, "true/8"},
		{"deepseek hit last", `{"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":10}`, "true/64"},
		{"deepseek zero hit is a miss", `{"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":10}`, "false/0"},
		{"every other source before the deepseek hit", `{"cached_input_tokens":2,"prompt_cache_hit_tokens":64}`, "true/2"},
		{"cache writes are never a hit", `{"prompt_tokens_details":{"cache_write_tokens":100}}`, "<nil>/<nil>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hit, n := cacheSignalJSON(json.RawMessage(c.usage))
			got := "<nil>"
			if hit != nil {
				got = fmt.Sprint(*hit)
			}
			if got += "/" + intOrNil(n); got != c.want {
				t.Errorf("cacheSignalJSON(%s) = %s, want %s", c.usage, got, c.want)
			}
		})
	}
}

func TestUsageDetailToken(t *testing.T) {
	usage := json.RawMessage(`{"a":{"x":"1","y":2},"b":{"x":3}}`)
	if n, ok := usageDetailToken(usage, []string{"a", "b"}, []string{"x", "y"}); !ok || n != 2 {
		t.Errorf("group-major: got %d %v, want 2", n, ok)
	}
	if n, ok := usageDetailToken(usage, []string{"b", "a"}, []string{"x", "y"}); !ok || n != 3 {
		t.Errorf("got %d %v, want 3", n, ok)
	}
	if _, ok := usageDetailToken(usage, []string{"c"}, []string{"x"}); ok {
		t.Error("missing group found a count")
	}
}

func TestNormalizeArguments(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"object kept byte for byte", `{"city": "Tokyo"}`, `{"city": "Tokyo"}`},
		{"string holding an object", `"{\"city\": \"Tokyo\"}"`, `{"city": "Tokyo"}`},
		{"string with surrounding whitespace", `" {\"a\":1} "`, `{"a":1}`},
		{"string holding a list", `"[1,2]"`, `{"_raw":"[1,2]"}`},
		{"string holding a number", `"5"`, `{"_raw":"5"}`},
		{"string holding a string", `"\"x\""`, `{"_raw":"\"x\""}`},
		{"string holding null", `"null"`, `{"_raw":"null"}`},
		{"empty string", `""`, `{"_raw":""}`},
		{"invalid JSON string", `"{\"a\":"`, `{"_raw":"{\"a\":"}`},
		{"NaN is not JSON", `"{\"a\":NaN}"`, `{"_raw":"{\"a\":NaN}"}`},
		// Arguments whose decoded text NeMo Gym's reader would refuse stay text, so a record never
		// carries 1e400 or a lone surrogate escape.
		{"overflowing number stays text", `"{\"t\":1e400}"`, `{"_raw":"{\"t\":1e400}"}`},
		{"lone surrogate escape stays text", `"{\"s\":\"\\ud800\"}"`, `{"_raw":"{\"s\":\"\\ud800\"}"}`},
		{"paired surrogate escape is an object", `"{\"s\":\"\\ud83d\\ude00\"}"`, `{"s":"\ud83d\ude00"}`},
		{"null", `null`, `{}`},
		{"absent", ``, `{}`},
		{"number", `5`, `{}`},
		{"list", `[1]`, `{}`},
		{"bool", `true`, `{}`},
		{"multi-line object string is compacted", `"{\n \"a\": 1\n}"`, `{"a":1}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := string(normalizeArgumentsJSON(json.RawMessage(c.in))); got != c.want {
				t.Errorf("normalizeArgumentsJSON(%s) = %s, want %s", c.in, got, c.want)
			}
		})
	}
}

func TestToolCallsAndReasoning(t *testing.T) {
	cases := []struct {
		name, response string
		calls          string // toolCallsString form
		reasoning      *string
	}{
		{"none of the shapes", `{"output":{"x":1},"choices":"x"}`, "[]", nil},
		{"responses function_call and summary", `{"output":[
			{"type":"reasoning","summary":[{"type":"summary_text","text":"a"},{"text":""},{"text":5},"x",{"text":"b"}],"content":[{"type":"reasoning_text","text":"ignored"}]},
			{"type":"function_call","call_id":"","id":"fc_1","name":"f","arguments":"{\"x\":1}"},
			{"type":"function_call","call_id":"call_2","id":"fc_2","name":"g","arguments":{"y":2}},
			{"type":"custom_tool_call","call_id":"c3","name":"h","input":"x"},
			"junk"]}`,
			`[{"fc_1" "f" {"x":1}} {"call_2" "g" {"y":2}}]`, ptr("a\nb")},
		{"empty output stops the search", `{"output":[],"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"f"}}]}}]}`, "[]", nil},
		{"chat all choices", `{"choices":[
			{"message":{"tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{}"}},5,{"id":"c2","function":"bad"}],"reasoning_content":"r1"}},
			{"message":{"reasoning":"r2","tool_calls":{"a":1}}},
			{"message":{"reasoning_content":"","reasoning":"r3"}},
			{"message":{"reasoning_content":{"x":1},"reasoning":"blocked"}},
			{"message":null}]}`,
			`[{"c1" "f" {}} {"c2" <nil> {}}]`, ptr("r1\nr2\nr3")},
		{"anthropic", `{"content":[
			{"type":"thinking","thinking":""},{"type":"thinking","thinking":"x"},
			{"type":"redacted_thinking","data":"opaque"},
			{"type":"tool_use","id":"t1","name":"n","input":{"a":1}},
			{"type":"tool_use","id":"t2","name":"m","input":{}},
			{"type":"tool_use","id":"t3","name":"s","input":"{\"b\":2}"},
			{"type":"tool_use","id":5,"name":null},
			{"type":"server_tool_use","id":"s1","name":"web_search","input":{"q":1}},
			{"type":"text","text":"hi"}]}`,
			`[{"t1" "n" {"a":1}} {"t2" "m" {}} {"t3" "s" {"b":2}} {<nil> <nil> {}}]`, ptr("\nx")},
		{"anthropic redacted only", `{"content":[{"type":"redacted_thinking","data":"a"},{"type":"text","text":"b"}]}`, "[]", nil},
		{"anthropic empty thinking only", `{"content":[{"type":"thinking","thinking":""}]}`, "[]", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			calls, reasoning := toolCallsAndReasoningJSON(json.RawMessage(c.response))
			got := toolCallsString(calls)
			got = strings.ReplaceAll(got, "\"", "")
			want := strings.ReplaceAll(c.calls, "\"", "")
			if got != want {
				t.Errorf("tool calls\n got %s\nwant %s", got, want)
			}
			if capturefile.StrOrNil(reasoning) != capturefile.StrOrNil(c.reasoning) {
				t.Errorf("reasoning = %s, want %s", capturefile.StrOrNil(reasoning), capturefile.StrOrNil(c.reasoning))
			}
		})
	}
}
