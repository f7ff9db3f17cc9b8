package rollout

import (
	"bytes"
	"encoding/json"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// JSON output: every field, null when unknown, lists never null, no HTML escaping, float fields in
// the form they were parsed from.

// numberTokens maps a record's float fields (JSON names) to their number tokens as parsed. A
// float64 keeps a number's value but not its form: encoded again, 1.0 would come back as 1 and 1e16
// as 10000000000000000, and a reader in a language with separate integer and float types (Python,
// which NeMo Gym is written in) would then read an int where the producer wrote a float. So a
// float field whose value is still the parsed one is written as its token; a field set since is
// written as Go encodes it.
type numberTokens map[string][]byte

// restore rewrites the members of the encoded object obj that have a token of the same value.
func (n numberTokens) restore(obj []byte) []byte {
	if len(n) == 0 {
		return obj
	}
	out := make([]byte, 0, len(obj)+16)
	out = append(out, '{')
	jsonscan.EachMember(obj, func(key, val []byte) bool {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, key...)
		out = append(out, ':')
		if tok, ok := n[string(jsonscan.KeyName(key))]; ok && sameNumber(tok, val) {
			val = tok
		}
		out = append(out, val...)
		return true
	})
	return append(out, '}')
}

// sameNumber reports whether two number tokens have the same value as float64.
func sameNumber(a, b []byte) bool {
	fa, okA := jsonscan.Float(a)
	fb, okB := jsonscan.Float(b)
	return okA && okB && fa == fb
}

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
	return marshalKind(KindAgentInvocation, p, r.numbers)
}

// MarshalJSON writes the tool call with "kind": "tool_call" first.
func (r *ToolCallObservation) MarshalJSON() ([]byte, error) {
	type plain ToolCallObservation
	p := plain(*r)
	p.Status = orDefault(p.Status)
	return marshalKind(KindToolCall, p, r.numbers)
}

// MarshalJSON writes the sandbox with "kind": "sandbox" first.
func (r *SandboxObservation) MarshalJSON() ([]byte, error) {
	type plain SandboxObservation
	p := plain(*r)
	p.Outcome = orDefault(p.Outcome)
	return marshalKind(KindSandbox, p, r.numbers)
}

// MarshalJSON writes the compaction with "kind": "context_compaction" first.
func (r *ContextCompactionObservation) MarshalJSON() ([]byte, error) {
	type plain ContextCompactionObservation
	p := plain(*r)
	p.Outcome, p.ModelCalls = orDefault(p.Outcome), nonNil(p.ModelCalls)
	return marshalKind(KindContextCompaction, p, r.numbers)
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
// "kind": kind as its first member, float fields with a token in nums written as that token. kind
// is one of the Kind constants (plain ASCII, nothing to escape).
func marshalKind(kind string, v any, nums numberTokens) ([]byte, error) {
	obj, err := marshalPlain(v)
	if err != nil {
		return nil, err
	}
	obj = nums.restore(obj)
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
