package dialect

import (
	"reflect"
	"testing"
)

// found gathers what a Sink is handed.
type found struct {
	calls     []RawToolCall
	reasoning []string
}

func (f *found) sink() Sink {
	return Sink{
		Call:      func(c RawToolCall) { f.calls = append(f.calls, c) },
		Reasoning: func(v []byte) { f.reasoning = append(f.reasoning, string(v)) },
	}
}

// shapeMembers returns pointers to the members of m that d's shape reads for its tool calls and
// for its finish reason.
func shapeMembers(t *testing.T, d Dialect, m *ResponseMembers) (calls, finish *[]byte) {
	switch d {
	case Responses:
		return &m.Output, &m.IncompleteDetails
	case Chat:
		return &m.Choices, &m.Choices
	case Messages:
		return &m.Content, &m.StopReason
	case Gemini:
		return &m.Candidates, &m.Candidates
	case Completions:
		return nil, nil // its shape is Chat's choices, read by Chat's entry
	}
	t.Fatalf("dialect %s: add the members its shape reads to shapeMembers", d)
	return nil, nil
}

// everyShape is a response holding every dialect's shape at once.
var everyShape = ResponseMembers{
	Output:            []byte(`[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"reasoning","summary":[{"text":"r"}]}]`),
	Choices:           []byte(`[{"message":{"tool_calls":[{"id":"c2","function":{"name":"g","arguments":"{\"a\":1}"}}],"reasoning_content":"think"},"finish_reason":"tool_calls"}]`),
	Content:           []byte(`[{"type":"tool_use","id":"c3","name":"h","input":{"b":2}},{"type":"thinking","thinking":"hm"}]`),
	Candidates:        []byte(`[{"content":{"parts":[{"text":"t","thought":true},{"functionCall":{"name":"k","args":{}}}]},"finishReason":"STOP"}]`),
	StopReason:        []byte(`"tool_use"`),
	IncompleteDetails: []byte(`{"reason":"max_output_tokens"}`),
}

// TestShapeOrder holds ToolCalls and FinishReason, which call the entries' readers directly, to the
// registry: with the shapes of the entries before the k-th taken away, each reads what the k-th
// entry's own method reads, in the order of All for tool calls and of the entries' finish places for finish
// reasons.
func TestShapeOrder(t *testing.T) {
	for k, e := range entries {
		t.Run("tool calls "+string(e.d), func(t *testing.T) {
			m := everyShape
			if own, _ := shapeMembers(t, e.d, &m); own == nil {
				return // a dialect without a shape of its own
			}
			for _, before := range entries[:k] {
				if calls, _ := shapeMembers(t, before.d, &m); calls != nil {
					*calls = nil
				}
			}
			var want, got found
			if !e.b.toolCalls(&m, want.sink()) || len(want.calls) == 0 || len(want.reasoning) == 0 {
				t.Fatalf("the entry's toolCalls read nothing from everyShape: add its shape there")
			}
			if !ToolCalls(&m, got.sink()) || !reflect.DeepEqual(got, want) {
				t.Errorf("ToolCalls read %+v; the entry's toolCalls %+v: ToolCalls must try the entries in the registry's order", got, want)
			}
		})
	}
	byFinish := make([]Dialect, len(entries))
	for _, e := range entries {
		byFinish[e.finish] = e.d
	}
	for k, d := range byFinish {
		t.Run("finish reason "+string(d), func(t *testing.T) {
			m := everyShape
			if _, own := shapeMembers(t, d, &m); own == nil {
				return // a dialect without a shape of its own
			}
			for _, before := range byFinish[:k] {
				if _, finish := shapeMembers(t, before, &m); finish != nil {
					*finish = nil
				}
			}
			want, decided := registry[d].finishReason(&m)
			if !decided || want == nil {
				t.Fatalf("the entry's finishReason decided nothing from everyShape: add its shape there")
			}
			if got := FinishReason(&m); string(got) != string(want) {
				t.Errorf("FinishReason = %s; the entry's finishReason %s: FinishReason must try the entries in the order of their finish places", got, want)
			}
		})
	}
}

// counter counts what a Sink is handed, keeping nothing.
type counter struct{ calls, reasoning int }

func (c *counter) call(RawToolCall) { c.calls++ }
func (c *counter) reason(v []byte)  { c.reasoning++ }

// TestToolCallsAllocatesNothing: ToolCalls and FinishReason allocate nothing of their own, so a
// caller's sink state stays on its stack (what the record builder's speed rests on).
func TestToolCallsAllocatesNothing(t *testing.T) {
	m := ResponseMembers{
		Choices: []byte(`[{"message":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}},{"id":"b","function":{"name":"g","arguments":"{}"}}],"reasoning":"why"},"finish_reason":"tool_calls"}]`),
	}
	allocs := testing.AllocsPerRun(100, func() {
		var c counter
		ok := ToolCalls(&m, Sink{Call: c.call, Reasoning: c.reason})
		if !ok || c.calls != 2 || c.reasoning != 1 {
			t.Fatalf("ToolCalls = %v, %+v", ok, c)
		}
		if string(FinishReason(&m)) != `"tool_calls"` {
			t.Fatalf("FinishReason = %s", FinishReason(&m))
		}
	})
	if allocs != 0 {
		t.Errorf("ToolCalls and FinishReason allocated %v times per response; want 0", allocs)
	}
}
