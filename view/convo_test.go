package view

import (
	"reflect"
	"testing"
)

func kinds(msgs []Message) []string {
	var out []string
	for _, m := range msgs {
		s := m.Role + ":"
		for i, p := range m.Parts {
			if i > 0 {
				s += ","
			}
			s += p.Kind
			if p.Name != "" {
				s += "(" + p.Name + ")"
			}
		}
		out = append(out, s)
	}
	return out
}

func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		name, req string
		want      []string
		tools     []string
	}{
		{"chat", `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"x"}}]},
			{"role":"assistant","content":null,"reasoning_content":"think","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"42"}],"tools":[{"type":"function","function":{"name":"f"}}]}`,
			[]string{"system:text", "user:text,image(image_url)", "assistant:reasoning,tool_call(f)", "tool:tool_result"}, []string{"f"}},
		{"responses", `{"instructions":"sys","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"reasoning","summary":[{"type":"summary_text","text":"s"}]},
			{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"},{"type":"web_search_call","id":"w"}],
			"tools":[{"type":"function","name":"f"},{"type":"web_search"}]}`,
			[]string{"system:text", "user:text", "assistant:reasoning", "assistant:tool_call(f)", "tool:tool_result", "assistant:other(web_search_call)"}, []string{"f", "web_search"}},
		{"responses string input", `{"input":"hello"}`, []string{"user:text"}, nil},
		{"messages", `{"system":[{"type":"text","text":"sys"}],"messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"t1","name":"g","input":{"q":1}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r"}]}]}],"tools":[{"name":"g","input_schema":{}}]}`,
			[]string{"system:text", "user:text", "assistant:reasoning,tool_call(g)", "user:tool_result"}, []string{"g"}},
		{"not an object", `[1,2]`, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, tools := ParseRequest([]byte(tc.req))
			if got := kinds(msgs); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("messages %v, want %v", got, tc.want)
			}
			if !reflect.DeepEqual(tools, tc.tools) {
				t.Errorf("tools %v, want %v", tools, tc.tools)
			}
		})
	}
}

func TestParseResponse(t *testing.T) {
	for _, tc := range []struct {
		name, resp, wantErr string
		want                []string
	}{
		{"chat", `{"choices":[{"message":{"role":"assistant","content":"hi","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}`, "", []string{"assistant:text,tool_call(f)"}},
		{"responses", `{"output":[{"type":"reasoning","summary":[]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x"}]}]}`, "", []string{"assistant:reasoning", "assistant:text"}},
		{"messages", `{"type":"message","role":"assistant","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"t","name":"g","input":{}}]}`, "", []string{"assistant:text,tool_call(g)"}},
		{"openai error", `{"error":{"message":"slow down","type":"rate_limit"}}`, "slow down", nil},
		{"anthropic error", `{"type":"error","error":{"type":"rate_limit_error","message":"busy"}}`, "busy", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, errMsg := ParseResponse([]byte(tc.resp))
			if got := kinds(msgs); !reflect.DeepEqual(got, tc.want) || errMsg != tc.wantErr {
				t.Errorf("got %v %q, want %v %q", got, errMsg, tc.want, tc.wantErr)
			}
		})
	}
}

func TestMarkNew(t *testing.T) {
	// Call 2 resends call 1's user message and its tool call (arguments re-encoded with other
	// spacing and key order), then adds the tool result.
	c1 := &Conversation{}
	c1.Input, _ = ParseRequest([]byte(`{"messages":[{"role":"user","content":"q"}]}`))
	c1.Output, _ = ParseResponse([]byte(`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":1,\"b\":2}"}}]}}]}`))
	c2 := &Conversation{}
	c2.Input, _ = ParseRequest([]byte(`{"messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"b\": 2, \"a\": 1}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}]}`))
	markNew([]*Conversation{c1, c2})
	var got []bool
	for _, m := range c2.Input {
		got = append(got, m.New)
	}
	if !reflect.DeepEqual(got, []bool{false, false, true}) || !c1.Input[0].New {
		t.Errorf("new flags %v (first call %v), want [false false true] (true)", got, c1.Input[0].New)
	}
}
