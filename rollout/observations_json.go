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

// MarshalJSON writes the invocation with "kind": "agent_invocation" first.
func (r *AgentInvocation) MarshalJSON() ([]byte, error) {
	return marshalPlain(struct {
		Kind                string            `json:"kind"`
		InvocationID        string            `json:"invocation_id"`
		ParentInvocationID  *string           `json:"parent_invocation_id"`
		SpawnedByToolCallID *string           `json:"spawned_by_tool_call_id"`
		Status              string            `json:"status"`
		DurationMS          *float64          `json:"duration_ms"`
		ErrorType           *string           `json:"error_type"`
		ModelCalls          []ModelCallRef    `json:"model_calls"`
		Conversation        []json.RawMessage `json:"conversation"`
	}{KindAgentInvocation, r.InvocationID, r.ParentInvocationID, r.SpawnedByToolCallID, orDefault(r.Status),
		r.DurationMS, r.ErrorType, nonNil(r.ModelCalls), nonNil(r.Conversation)})
}

// MarshalJSON writes the tool call with "kind": "tool_call" first.
func (r *ToolCallObservation) MarshalJSON() ([]byte, error) {
	return marshalPlain(struct {
		Kind         string   `json:"kind"`
		InvocationID string   `json:"invocation_id"`
		ToolCallID   string   `json:"tool_call_id"`
		SandboxID    *string  `json:"sandbox_id"`
		ToolName     *string  `json:"tool_name"`
		StartedAt    *float64 `json:"started_at"`
		CompletedAt  *float64 `json:"completed_at"`
		DurationMS   *float64 `json:"duration_ms"`
		TimingSource *string  `json:"timing_source"`
		Status       string   `json:"status"`
		ErrorType    *string  `json:"error_type"`
	}{KindToolCall, r.InvocationID, r.ToolCallID, r.SandboxID, r.ToolName, r.StartedAt, r.CompletedAt,
		r.DurationMS, r.TimingSource, orDefault(r.Status), r.ErrorType})
}

// MarshalJSON writes the sandbox with "kind": "sandbox" first.
func (r *SandboxObservation) MarshalJSON() ([]byte, error) {
	return marshalPlain(struct {
		Kind                string   `json:"kind"`
		Role                string   `json:"role"`
		Provider            *string  `json:"provider"`
		SandboxID           *string  `json:"sandbox_id"`
		Outcome             string   `json:"outcome"`
		ExitCode            *int64   `json:"exit_code"`
		WallTimeS           *float64 `json:"wall_time_s"`
		CPUTimeS            *float64 `json:"cpu_time_s"`
		PeakMemoryMiB       *float64 `json:"peak_memory_mib"`
		ResourceUsageSource *string  `json:"resource_usage_source"`
		ErrorType           *string  `json:"error_type"`
	}{KindSandbox, r.Role, r.Provider, r.SandboxID, orDefault(r.Outcome), r.ExitCode, r.WallTimeS, r.CPUTimeS,
		r.PeakMemoryMiB, r.ResourceUsageSource, r.ErrorType})
}

// MarshalJSON writes the compaction with "kind": "context_compaction" first.
func (r *ContextCompactionObservation) MarshalJSON() ([]byte, error) {
	return marshalPlain(struct {
		Kind            string         `json:"kind"`
		InvocationID    string         `json:"invocation_id"`
		ObservedAt      *float64       `json:"observed_at"`
		Trigger         *string        `json:"trigger"`
		TokensBefore    *int64         `json:"tokens_before"`
		TokensAfter     *int64         `json:"tokens_after"`
		Outcome         string         `json:"outcome"`
		Summary         *string        `json:"summary"`
		FirstKeptItemID *string        `json:"first_kept_item_id"`
		BeforeModelCall *ModelCallRef  `json:"before_model_call"`
		ModelCalls      []ModelCallRef `json:"model_calls"`
		AfterModelCall  *ModelCallRef  `json:"after_model_call"`
	}{KindContextCompaction, r.InvocationID, r.ObservedAt, r.Trigger, r.TokensBefore, r.TokensAfter,
		orDefault(r.Outcome), r.Summary, r.FirstKeptItemID, r.BeforeModelCall, nonNil(r.ModelCalls), r.AfterModelCall})
}

// MarshalJSON writes {"source", "records", "gaps"}; gaps omit empty invocation_id and detail.
func (b *ObservationBundle) MarshalJSON() ([]byte, error) {
	return marshalPlain(struct {
		Source  string              `json:"source"`
		Records []ObservationRecord `json:"records"`
		Gaps    []Gap               `json:"gaps"`
	}{b.Source, nonNil(b.Records), nonNil(b.Gaps)})
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
