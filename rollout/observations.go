package rollout

import (
	"encoding/json"
	"errors"
)

// Agent observations: what an agent harness reports about one rollout in the rollout record's
// ng_agent_observations field (NeMo Gym's AgentObservationBundle). The merge joins
// the model-call references in here to the captured calls. Field names, defaults, required fields and
// allowed values are NeMo Gym's; ParseObservationBundle enforces them, and the MarshalJSON methods
// write every field (null when unknown) in NeMo Gym's field order, as its model_dump does.
//
// The types are here; the parser is in observations_parse.go (with the strict field decoder in
// observations_fields.go) and the JSON output in observations_json.go.

// Observation record kinds (the "kind" discriminator of a bundle record).
const (
	KindAgentInvocation   = "agent_invocation"
	KindToolCall          = "tool_call"
	KindContextCompaction = "context_compaction"
	KindSandbox           = "sandbox"
)

// ErrInvalidObservations is the errors.Is target of every ParseObservationBundle error.
var ErrInvalidObservations = errors.New("invalid agent observations")

// ModelCallRef is how an observation points at one model call: by model_call_id (the capture's own
// id) or by both model_ref and response_id (the provider's response id). Parsing rejects a ref with
// neither (an empty id counts as missing).
type ModelCallRef struct {
	ModelCallID *string         `json:"model_call_id"`
	ModelRef    *ModelServerRef `json:"model_ref"`
	ResponseID  *string         `json:"response_id"`
}

// ObservationRecord is one record of a bundle: *AgentInvocation, *ToolCallObservation,
// *ContextCompactionObservation or *SandboxObservation.
type ObservationRecord interface {
	// ObservationKind returns the record's "kind".
	ObservationKind() string
}

// AgentInvocation is one root agent or subagent conversation observed by a harness. Status is one of
// completed, failed, incomplete, unknown (default unknown). DurationMS is milliseconds (>= 0).
// Conversation items are kept as the producer wrote them (not validated).
type AgentInvocation struct {
	InvocationID        string            `json:"invocation_id"`
	ParentInvocationID  *string           `json:"parent_invocation_id"`
	SpawnedByToolCallID *string           `json:"spawned_by_tool_call_id"`
	Status              string            `json:"status"`
	DurationMS          *float64          `json:"duration_ms"`
	ErrorType           *string           `json:"error_type"`
	ModelCalls          []ModelCallRef    `json:"model_calls"`
	Conversation        []json.RawMessage `json:"conversation"`

	// numbers are the float fields' tokens as parsed, written back unchanged (numberTokens).
	numbers numberTokens
}

// ToolCallObservation is the timing of one tool call at an agent-owned boundary. StartedAt and
// CompletedAt are seconds since the Unix epoch (completed must not precede started); DurationMS is
// milliseconds (>= 0). TimingSource is executor, artifact or harness; Status one of completed,
// failed, timeout, cancelled, incomplete, unknown (default unknown).
type ToolCallObservation struct {
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

	// numbers are the float fields' tokens as parsed, written back unchanged (numberTokens).
	numbers numberTokens
}

// SandboxObservation is the outcome and lifetime resource usage of a sandbox. Role is agent,
// verifier or environment (required); Outcome one of completed, failed, timeout, oom, sandbox_error,
// cancelled, unknown (default unknown). WallTimeS and CPUTimeS are seconds, PeakMemoryMiB mebibytes
// (all >= 0).
type SandboxObservation struct {
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

	// numbers are the float fields' tokens as parsed, written back unchanged (numberTokens).
	numbers numberTokens
}

// ContextCompactionObservation is an explicit context compaction reported by the harness.
// ObservedAt is seconds since the Unix epoch; TokensBefore/TokensAfter are token counts (>= 0);
// Outcome one of completed, failed, aborted, unknown (default unknown). BeforeModelCall is the last
// model call of the invocation before the compaction, ModelCalls the calls that did the compaction,
// AfterModelCall the first call after it.
type ContextCompactionObservation struct {
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

	// numbers are the float fields' tokens as parsed, written back unchanged (numberTokens).
	numbers numberTokens
}

// ObservationBundle is everything one agent server reported for one rollout. Records are unordered
// (position does not imply execution order); invocation ids are unique and parent links never form
// a cycle (missing parents are allowed: a producer may see only part of the tree).
type ObservationBundle struct {
	Source  string              `json:"source"`
	Records []ObservationRecord `json:"records"`
	Gaps    []Gap               `json:"gaps"`
}

func (r *AgentInvocation) keepNumbers(n numberTokens)              { r.numbers = n }
func (r *ToolCallObservation) keepNumbers(n numberTokens)          { r.numbers = n }
func (r *SandboxObservation) keepNumbers(n numberTokens)           { r.numbers = n }
func (r *ContextCompactionObservation) keepNumbers(n numberTokens) { r.numbers = n }

// ObservationKind returns "agent_invocation".
func (*AgentInvocation) ObservationKind() string { return KindAgentInvocation }

// ObservationKind returns "tool_call".
func (*ToolCallObservation) ObservationKind() string { return KindToolCall }

// ObservationKind returns "sandbox".
func (*SandboxObservation) ObservationKind() string { return KindSandbox }

// ObservationKind returns "context_compaction".
func (*ContextCompactionObservation) ObservationKind() string { return KindContextCompaction }

// HasJoinKey reports whether the reference can be joined: a non-empty model_call_id, or a model_ref
// together with a non-empty response_id.
func (r *ModelCallRef) HasJoinKey() bool {
	return (r.ModelCallID != nil && *r.ModelCallID != "") ||
		(r.ModelRef != nil && r.ResponseID != nil && *r.ResponseID != "")
}
