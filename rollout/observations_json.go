package rollout

import (
	"bytes"
	"encoding/json"
)

// JSON output: every field, null when unknown, lists never null, no HTML escaping.

// MarshalJSON writes {"model_call_id", "model_ref", "response_id"} with nulls.
func (r ModelCallRef) MarshalJSON() ([]byte, error) {
	type plain ModelCallRef
	return marshalPlain(plain(r))
}

// Each record type marshals as a copy of itself (a defined type without the MarshalJSON method)
// behind its "kind", so the field names and order are the struct tags' in observations.go.

// MarshalJSON writes the invocation with "kind": "agent_invocation" first.
func (r *AgentInvocation) MarshalJSON() ([]byte, error) {
	type plain AgentInvocation
	p := plain(*r)
	p.Status, p.ModelCalls, p.Conversation = orDefault(p.Status), nonNil(p.ModelCalls), nonNil(p.Conversation)
	return marshalKind(KindAgentInvocation, p)
}

// MarshalJSON writes the tool call with "kind": "tool_call" first.
func (r *ToolCallObservation) MarshalJSON() ([]byte, error) {
	type plain ToolCallObservation
	p := plain(*r)
	p.Status = orDefault(p.Status)
	return marshalKind(KindToolCall, p)
}

// MarshalJSON writes the sandbox with "kind": "sandbox" first.
func (r *SandboxObservation) MarshalJSON() ([]byte, error) {
	type plain SandboxObservation
	p := plain(*r)
	p.Outcome = orDefault(p.Outcome)
	return marshalKind(KindSandbox, p)
}

// MarshalJSON writes the compaction with "kind": "context_compaction" first.
func (r *ContextCompactionObservation) MarshalJSON() ([]byte, error) {
	type plain ContextCompactionObservation
	p := plain(*r)
	p.Outcome, p.ModelCalls = orDefault(p.Outcome), nonNil(p.ModelCalls)
	return marshalKind(KindContextCompaction, p)
}

// MarshalJSON writes {"source", "records", "gaps"}; gaps omit empty invocation_id and detail.
func (b *ObservationBundle) MarshalJSON() ([]byte, error) {
	type plain ObservationBundle
	p := plain(*b)
	p.Records, p.Gaps = nonNil(p.Records), nonNil(p.Gaps)
	return marshalPlain(p)
}

func orDefault(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// marshalKind encodes the record fields v (a struct with at least one field) as an object with
// "kind": kind as its first member. kind is one of the Kind constants (plain ASCII, nothing to escape).
func marshalKind(kind string, v any) ([]byte, error) {
	obj, err := marshalPlain(v)
	if err != nil {
		return nil, err
	}
	return append([]byte(`{"kind":"`+kind+`",`), obj[1:]...), nil
}

// marshalPlain encodes v compactly without HTML escaping.
func marshalPlain(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
