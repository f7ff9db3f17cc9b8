package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ParseObservationBundle decodes and validates an ng_agent_observations value with the rules of
// NeMo Gym's pydantic models for it: unknown fields are rejected everywhere except inside
// model_ref; required fields must be present and non-null; enumerations must hold an allowed value;
// a ModelCallRef needs model_call_id or both model_ref and response_id; invocation ids are unique
// and parent_invocation_id never forms a cycle (a parent that is not in the bundle is allowed); a
// tool call's completed_at does not precede its started_at; durations, times and token counts are
// >= 0. JSON types are strict: a number field takes a JSON number (an integer field an integral
// one), a string field a JSON string. Errors wrap ErrInvalidObservations and say where the rule
// failed.
func ParseObservationBundle(raw []byte) (*ObservationBundle, error) {
	var b ObservationBundle
	if err := b.parse(raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidObservations, err)
	}
	return &b, nil
}

func (b *ObservationBundle) parse(raw []byte) error {
	o, err := decodeFields(raw, "bundle")
	if err != nil {
		return err
	}
	var records, gaps []json.RawMessage
	errs := errors.Join(o.strTo(&b.Source, "source"), o.listTo(&records, "records"), o.listTo(&gaps, "gaps"))
	if err := o.unknown("bundle"); err != nil {
		return err
	}
	if errs != nil {
		return errs
	}
	if b.Records, err = parseEach(records, "records", parseRecord); err != nil {
		return err
	}
	if b.Gaps, err = parseEach(gaps, "gaps", parseGap); err != nil {
		return err
	}
	return b.Validate()
}

// Validate checks the bundle-wide rules: invocation ids are unique, and following
// parent_invocation_id links never returns to an invocation already on the path.
func (b *ObservationBundle) Validate() error {
	parents := make(map[string]*string)
	for _, r := range b.Records {
		inv, ok := r.(*AgentInvocation)
		if !ok {
			continue
		}
		if _, dup := parents[inv.InvocationID]; dup {
			return fmt.Errorf("invocation_id %q is not unique within the bundle", inv.InvocationID)
		}
		parents[inv.InvocationID] = inv.ParentInvocationID
	}
	checked := make(map[string]bool, len(parents))
	for start := range parents {
		path := map[string]bool{}
		for cur := start; !checked[cur]; {
			parent, known := parents[cur]
			if !known {
				break // missing parents are allowed
			}
			if path[cur] {
				return fmt.Errorf("parent_invocation_id forms a cycle through %q", cur)
			}
			path[cur] = true
			if parent == nil {
				break
			}
			cur = *parent
		}
		for id := range path {
			checked[id] = true
		}
	}
	return nil
}

func parseRecord(raw json.RawMessage) (ObservationRecord, error) {
	var head struct {
		Kind *string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.Kind == nil {
		return nil, errors.New(`record must be an object with a string "kind"`)
	}
	switch *head.Kind {
	case KindAgentInvocation:
		return parseInvocation(raw)
	case KindToolCall:
		return parseToolCall(raw)
	case KindSandbox:
		return parseSandbox(raw)
	case KindContextCompaction:
		return parseCompaction(raw)
	}
	return nil, fmt.Errorf("unknown record kind %q (want %s, %s, %s or %s)", *head.Kind,
		KindAgentInvocation, KindToolCall, KindContextCompaction, KindSandbox)
}

// parseKind parses a record of kind: read decodes its fields into r and returns their errors. A
// member read does not ask for (other than "kind") is an unknown field, reported alone; read's
// errors are joined under the kind.
func parseKind[T any](raw json.RawMessage, kind string, read func(o *fieldSet, r *T) []error) (*T, error) {
	o, err := decodeFields(raw, kind)
	if err != nil {
		return nil, err
	}
	o.get("kind") // checked by parseRecord
	var r T
	errs := errors.Join(read(o, &r)...)
	if err := o.unknown(kind); err != nil {
		return nil, err
	}
	if errs != nil {
		return nil, fmt.Errorf("%s: %w", kind, errs)
	}
	if n, ok := any(&r).(interface{ keepNumbers(numberTokens) }); ok {
		n.keepNumbers(o.floats)
	}
	return &r, nil
}

func parseInvocation(raw json.RawMessage) (*AgentInvocation, error) {
	var refs []json.RawMessage
	r, err := parseKind(raw, KindAgentInvocation, func(o *fieldSet, r *AgentInvocation) []error {
		return []error{
			o.strTo(&r.InvocationID, "invocation_id"),
			o.optStr(&r.ParentInvocationID, "parent_invocation_id"),
			o.optStr(&r.SpawnedByToolCallID, "spawned_by_tool_call_id"),
			o.enum(&r.Status, "status", "unknown", "completed", "failed", "incomplete", "unknown"),
			o.optFloat(&r.DurationMS, "duration_ms", true),
			o.optStr(&r.ErrorType, "error_type"),
			o.listTo(&refs, "model_calls"),
			o.listTo(&r.Conversation, "conversation"),
		}
	})
	if err != nil {
		return nil, err
	}
	if r.ModelCalls, err = parseEach(refs, "model_calls", parseRef); err != nil {
		return nil, fmt.Errorf("%s %q: %w", KindAgentInvocation, r.InvocationID, err)
	}
	return r, nil
}

func parseToolCall(raw json.RawMessage) (*ToolCallObservation, error) {
	r, err := parseKind(raw, KindToolCall, func(o *fieldSet, r *ToolCallObservation) []error {
		return []error{
			o.strTo(&r.InvocationID, "invocation_id"),
			o.strTo(&r.ToolCallID, "tool_call_id"),
			o.optStr(&r.SandboxID, "sandbox_id"),
			o.optStr(&r.ToolName, "tool_name"),
			o.optFloat(&r.StartedAt, "started_at", false),
			o.optFloat(&r.CompletedAt, "completed_at", false),
			o.optFloat(&r.DurationMS, "duration_ms", true),
			o.optEnum(&r.TimingSource, "timing_source", "executor", "artifact", "harness"),
			o.enum(&r.Status, "status", "unknown", "completed", "failed", "timeout", "cancelled", "incomplete", "unknown"),
			o.optStr(&r.ErrorType, "error_type"),
		}
	})
	if err != nil {
		return nil, err
	}
	if r.StartedAt != nil && r.CompletedAt != nil && *r.CompletedAt < *r.StartedAt {
		return nil, fmt.Errorf("%s %q: completed_at must not precede started_at", KindToolCall, r.ToolCallID)
	}
	return r, nil
}

func parseSandbox(raw json.RawMessage) (*SandboxObservation, error) {
	return parseKind(raw, KindSandbox, func(o *fieldSet, r *SandboxObservation) []error {
		return []error{
			o.enum(&r.Role, "role", "", "agent", "verifier", "environment"),
			o.optStr(&r.Provider, "provider"),
			o.optStr(&r.SandboxID, "sandbox_id"),
			o.enum(&r.Outcome, "outcome", "unknown", "completed", "failed", "timeout", "oom", "sandbox_error", "cancelled", "unknown"),
			o.optInt(&r.ExitCode, "exit_code", false),
			o.optFloat(&r.WallTimeS, "wall_time_s", true),
			o.optFloat(&r.CPUTimeS, "cpu_time_s", true),
			o.optFloat(&r.PeakMemoryMiB, "peak_memory_mib", true),
			o.optStr(&r.ResourceUsageSource, "resource_usage_source"),
			o.optStr(&r.ErrorType, "error_type"),
		}
	})
}

func parseCompaction(raw json.RawMessage) (*ContextCompactionObservation, error) {
	var refs []json.RawMessage
	var before, after json.RawMessage
	r, err := parseKind(raw, KindContextCompaction, func(o *fieldSet, r *ContextCompactionObservation) []error {
		return []error{
			o.strTo(&r.InvocationID, "invocation_id"),
			o.optFloat(&r.ObservedAt, "observed_at", false),
			o.optStr(&r.Trigger, "trigger"),
			o.optInt(&r.TokensBefore, "tokens_before", true),
			o.optInt(&r.TokensAfter, "tokens_after", true),
			o.enum(&r.Outcome, "outcome", "unknown", "completed", "failed", "aborted", "unknown"),
			o.optStr(&r.Summary, "summary"),
			o.optStr(&r.FirstKeptItemID, "first_kept_item_id"),
			o.optRaw(&before, "before_model_call"),
			o.listTo(&refs, "model_calls"),
			o.optRaw(&after, "after_model_call"),
		}
	})
	if err != nil {
		return nil, err
	}
	if r.ModelCalls, err = parseEach(refs, "model_calls", parseRef); err != nil {
		return nil, fmt.Errorf("%s: %w", KindContextCompaction, err)
	}
	for _, f := range []struct {
		key string
		raw json.RawMessage
		dst **ModelCallRef
	}{{"before_model_call", before, &r.BeforeModelCall}, {"after_model_call", after, &r.AfterModelCall}} {
		if f.raw == nil {
			continue
		}
		ref, err := parseRef(f.raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", KindContextCompaction, f.key, err)
		}
		*f.dst = &ref
	}
	return r, nil
}

// parseEach parses every element of the list field with parse, in order; an error names the
// element as field[i]. The result is never nil.
func parseEach[T any](raws []json.RawMessage, field string, parse func(json.RawMessage) (T, error)) ([]T, error) {
	out := make([]T, 0, len(raws))
	for i, raw := range raws {
		v, err := parse(raw)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseRef(raw json.RawMessage) (ModelCallRef, error) {
	var r ModelCallRef
	o, err := decodeFields(raw, "model call reference")
	if err != nil {
		return r, err
	}
	var modelRef json.RawMessage
	errs := errors.Join(o.optStr(&r.ModelCallID, "model_call_id"), o.optRaw(&modelRef, "model_ref"),
		o.optStr(&r.ResponseID, "response_id"))
	if err := o.unknown("model call reference"); err != nil {
		return r, err
	}
	if errs != nil {
		return r, errs
	}
	if modelRef != nil {
		ref, err := parseModelServerRef(modelRef)
		if err != nil {
			return r, err
		}
		r.ModelRef = &ref
	}
	if !r.HasJoinKey() {
		return r, errors.New("model_call_id or both model_ref and response_id are required")
	}
	return r, nil
}

// parseModelServerRef parses a model_ref: type and name are checked, and other members are allowed
// (model_ref is the one object where unknown fields are not rejected, as in NeMo Gym's model).
func parseModelServerRef(raw json.RawMessage) (ModelServerRef, error) {
	o, err := decodeFields(raw, "model_ref")
	if err != nil {
		return ModelServerRef{}, errors.New("model_ref must be an object")
	}
	var ref ModelServerRef
	if err := errors.Join(o.enum(&ref.Type, "type", "", ModelServerRefType), o.strTo(&ref.Name, "name")); err != nil {
		return ModelServerRef{}, fmt.Errorf("model_ref: %w", err)
	}
	return ref, nil
}

func parseGap(raw json.RawMessage) (Gap, error) {
	o, err := decodeFields(raw, "gap")
	if err != nil {
		return Gap{}, err
	}
	var g Gap
	errs := errors.Join(o.strTo(&g.Code, "code"), o.strOrEmpty(&g.InvocationID, "invocation_id"), o.strOrEmpty(&g.Detail, "detail"))
	if err := o.unknown("gap"); err != nil {
		return Gap{}, err
	}
	return g, errs
}
