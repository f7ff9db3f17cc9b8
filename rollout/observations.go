package rollout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Agent observations: what an agent harness reports about one rollout in the rollout record's
// ng_agent_observations field (NeMo Gym's AgentObservationBundle, reference §10-11). The merge joins
// the model-call references in here to the captured calls. Field names, defaults, required fields and
// allowed values are NeMo Gym's; ParseObservationBundle enforces them, and the MarshalJSON methods
// write every field (null when unknown) in NeMo Gym's field order, as its model_dump does.

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
	InvocationID        string
	ParentInvocationID  *string
	SpawnedByToolCallID *string
	Status              string
	DurationMS          *float64
	ErrorType           *string
	ModelCalls          []ModelCallRef
	Conversation        []json.RawMessage
}

// ToolCallObservation is the timing of one tool call at an agent-owned boundary. StartedAt and
// CompletedAt are seconds since the Unix epoch (completed must not precede started); DurationMS is
// milliseconds (>= 0). TimingSource is executor, artifact or harness; Status one of completed,
// failed, timeout, cancelled, incomplete, unknown (default unknown).
type ToolCallObservation struct {
	InvocationID string
	ToolCallID   string
	SandboxID    *string
	ToolName     *string
	StartedAt    *float64
	CompletedAt  *float64
	DurationMS   *float64
	TimingSource *string
	Status       string
	ErrorType    *string
}

// SandboxObservation is the outcome and lifetime resource usage of a sandbox. Role is agent,
// verifier or environment (required); Outcome one of completed, failed, timeout, oom, sandbox_error,
// cancelled, unknown (default unknown). WallTimeS and CPUTimeS are seconds, PeakMemoryMiB mebibytes
// (all >= 0).
type SandboxObservation struct {
	Role                string
	Provider            *string
	SandboxID           *string
	Outcome             string
	ExitCode            *int64
	WallTimeS           *float64
	CPUTimeS            *float64
	PeakMemoryMiB       *float64
	ResourceUsageSource *string
	ErrorType           *string
}

// ContextCompactionObservation is an explicit context compaction reported by the harness.
// ObservedAt is seconds since the Unix epoch; TokensBefore/TokensAfter are token counts (>= 0);
// Outcome one of completed, failed, aborted, unknown (default unknown). BeforeModelCall is the last
// model call of the invocation before the compaction, ModelCalls the calls that did the compaction,
// AfterModelCall the first call after it.
type ContextCompactionObservation struct {
	InvocationID    string
	ObservedAt      *float64
	Trigger         *string
	TokensBefore    *int64
	TokensAfter     *int64
	Outcome         string
	Summary         *string
	FirstKeptItemID *string
	BeforeModelCall *ModelCallRef
	ModelCalls      []ModelCallRef
	AfterModelCall  *ModelCallRef
}

// ObservationBundle is everything one agent server reported for one rollout. Records are unordered
// (position does not imply execution order); invocation ids are unique and parent links never form
// a cycle (missing parents are allowed: a producer may see only part of the tree).
type ObservationBundle struct {
	Source  string
	Records []ObservationRecord
	Gaps    []Gap
}

// ObservationKind returns "agent_invocation".
func (*AgentInvocation) ObservationKind() string { return KindAgentInvocation }

// ObservationKind returns "tool_call".
func (*ToolCallObservation) ObservationKind() string { return KindToolCall }

// ObservationKind returns "sandbox".
func (*SandboxObservation) ObservationKind() string { return KindSandbox }

// ObservationKind returns "context_compaction".
func (*ContextCompactionObservation) ObservationKind() string { return KindContextCompaction }

// ParseObservationBundle decodes and validates an ng_agent_observations value with NeMo Gym's rules
// (reference §11 item 48-49): unknown fields are rejected everywhere except inside model_ref;
// required fields must be present and non-null; enumerations must hold an allowed value; a
// ModelCallRef needs model_call_id or both model_ref and response_id; invocation ids are unique and
// parent_invocation_id never forms a cycle; a tool call's completed_at does not precede its
// started_at; durations, times and token counts are >= 0. JSON types are strict: a number field
// takes a JSON number (an integer field an integral one), a string field a JSON string. Errors wrap
// ErrInvalidObservations and say where the rule failed.
func ParseObservationBundle(raw []byte) (*ObservationBundle, error) {
	var b ObservationBundle
	if err := b.parse(raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidObservations, err)
	}
	return &b, nil
}

func (b *ObservationBundle) parse(raw []byte) error {
	o, err := decodeFields(raw, "bundle", "source", "records", "gaps")
	if err != nil {
		return err
	}
	if b.Source, err = o.str("source"); err != nil {
		return err
	}
	records, err := o.list("records")
	if err != nil {
		return err
	}
	b.Records = make([]ObservationRecord, 0, len(records))
	for i, r := range records {
		rec, err := parseRecord(r)
		if err != nil {
			return fmt.Errorf("records[%d]: %w", i, err)
		}
		b.Records = append(b.Records, rec)
	}
	gaps, err := o.list("gaps")
	if err != nil {
		return err
	}
	b.Gaps = make([]Gap, 0, len(gaps))
	for i, g := range gaps {
		gap, err := parseGap(g)
		if err != nil {
			return fmt.Errorf("gaps[%d]: %w", i, err)
		}
		b.Gaps = append(b.Gaps, gap)
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

func parseInvocation(raw json.RawMessage) (*AgentInvocation, error) {
	o, err := decodeFields(raw, KindAgentInvocation, "kind", "invocation_id", "parent_invocation_id",
		"spawned_by_tool_call_id", "status", "duration_ms", "error_type", "model_calls", "conversation")
	if err != nil {
		return nil, err
	}
	var r AgentInvocation
	var refs []json.RawMessage
	errs := []error{
		o.strTo(&r.InvocationID, "invocation_id"),
		o.optStr(&r.ParentInvocationID, "parent_invocation_id"),
		o.optStr(&r.SpawnedByToolCallID, "spawned_by_tool_call_id"),
		o.enum(&r.Status, "status", "unknown", "completed", "failed", "incomplete", "unknown"),
		o.optFloat(&r.DurationMS, "duration_ms", true),
		o.optStr(&r.ErrorType, "error_type"),
		o.listTo(&refs, "model_calls"),
		o.listTo(&r.Conversation, "conversation"),
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", KindAgentInvocation, err)
	}
	if r.ModelCalls, err = parseRefs(refs, "model_calls"); err != nil {
		return nil, fmt.Errorf("%s %q: %w", KindAgentInvocation, r.InvocationID, err)
	}
	return &r, nil
}

func parseToolCall(raw json.RawMessage) (*ToolCallObservation, error) {
	o, err := decodeFields(raw, KindToolCall, "kind", "invocation_id", "tool_call_id", "sandbox_id",
		"tool_name", "started_at", "completed_at", "duration_ms", "timing_source", "status", "error_type")
	if err != nil {
		return nil, err
	}
	var r ToolCallObservation
	errs := []error{
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
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", KindToolCall, err)
	}
	if r.StartedAt != nil && r.CompletedAt != nil && *r.CompletedAt < *r.StartedAt {
		return nil, fmt.Errorf("%s %q: completed_at must not precede started_at", KindToolCall, r.ToolCallID)
	}
	return &r, nil
}

func parseSandbox(raw json.RawMessage) (*SandboxObservation, error) {
	o, err := decodeFields(raw, KindSandbox, "kind", "role", "provider", "sandbox_id", "outcome", "exit_code",
		"wall_time_s", "cpu_time_s", "peak_memory_mib", "resource_usage_source", "error_type")
	if err != nil {
		return nil, err
	}
	var r SandboxObservation
	errs := []error{
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
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", KindSandbox, err)
	}
	return &r, nil
}

func parseCompaction(raw json.RawMessage) (*ContextCompactionObservation, error) {
	o, err := decodeFields(raw, KindContextCompaction, "kind", "invocation_id", "observed_at", "trigger",
		"tokens_before", "tokens_after", "outcome", "summary", "first_kept_item_id", "before_model_call",
		"model_calls", "after_model_call")
	if err != nil {
		return nil, err
	}
	var r ContextCompactionObservation
	var refs []json.RawMessage
	errs := []error{
		o.strTo(&r.InvocationID, "invocation_id"),
		o.optFloat(&r.ObservedAt, "observed_at", false),
		o.optStr(&r.Trigger, "trigger"),
		o.optInt(&r.TokensBefore, "tokens_before", true),
		o.optInt(&r.TokensAfter, "tokens_after", true),
		o.enum(&r.Outcome, "outcome", "unknown", "completed", "failed", "aborted", "unknown"),
		o.optStr(&r.Summary, "summary"),
		o.optStr(&r.FirstKeptItemID, "first_kept_item_id"),
		o.listTo(&refs, "model_calls"),
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", KindContextCompaction, err)
	}
	if r.ModelCalls, err = parseRefs(refs, "model_calls"); err != nil {
		return nil, fmt.Errorf("%s: %w", KindContextCompaction, err)
	}
	for _, f := range []struct {
		key string
		dst **ModelCallRef
	}{{"before_model_call", &r.BeforeModelCall}, {"after_model_call", &r.AfterModelCall}} {
		v, ok := o[f.key]
		if !ok || isNull(v) {
			continue
		}
		ref, err := parseRef(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", KindContextCompaction, f.key, err)
		}
		*f.dst = &ref
	}
	return &r, nil
}

func parseRefs(raws []json.RawMessage, field string) ([]ModelCallRef, error) {
	refs := make([]ModelCallRef, 0, len(raws))
	for i, raw := range raws {
		ref, err := parseRef(raw)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		refs = append(refs, ref)
	}
	return refs, nil
}

func parseRef(raw json.RawMessage) (ModelCallRef, error) {
	var r ModelCallRef
	o, err := decodeFields(raw, "model call reference", "model_call_id", "model_ref", "response_id")
	if err != nil {
		return r, err
	}
	if err := errors.Join(o.optStr(&r.ModelCallID, "model_call_id"), o.optStr(&r.ResponseID, "response_id")); err != nil {
		return r, err
	}
	if v, ok := o["model_ref"]; ok && !isNull(v) {
		ref, err := parseModelServerRef(v)
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

// HasJoinKey reports whether the reference can be joined: a non-empty model_call_id, or a model_ref
// together with a non-empty response_id.
func (r *ModelCallRef) HasJoinKey() bool {
	return (r.ModelCallID != nil && *r.ModelCallID != "") ||
		(r.ModelRef != nil && r.ResponseID != nil && *r.ResponseID != "")
}

func parseModelServerRef(raw json.RawMessage) (ModelServerRef, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return ModelServerRef{}, errors.New("model_ref must be an object")
	}
	o := fieldSet(fields)
	var ref ModelServerRef
	if err := errors.Join(o.enum(&ref.Type, "type", "", ModelServerRefType), o.strTo(&ref.Name, "name")); err != nil {
		return ModelServerRef{}, fmt.Errorf("model_ref: %w", err)
	}
	return ref, nil
}

func parseGap(raw json.RawMessage) (Gap, error) {
	var g Gap
	o, err := decodeFields(raw, "gap", "code", "invocation_id", "detail")
	if err != nil {
		return g, err
	}
	var inv, detail *string
	if err := errors.Join(o.strTo(&g.Code, "code"), o.optStr(&inv, "invocation_id"), o.optStr(&detail, "detail")); err != nil {
		return g, err
	}
	if inv != nil {
		g.InvocationID = *inv
	}
	if detail != nil {
		g.Detail = *detail
	}
	return g, nil
}

// fieldSet is an object's members by name (a repeated key's last value wins).
type fieldSet map[string]json.RawMessage

// decodeFields decodes raw as a JSON object and rejects keys not in allowed.
func decodeFields(raw []byte, what string, allowed ...string) (fieldSet, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("%s must be a JSON object", what)
	}
	var unknown []string
	for k := range fields {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("%s: unknown field(s) %s", what, strings.Join(unknown, ", "))
	}
	return fieldSet(fields), nil
}

func (o fieldSet) str(key string) (string, error) {
	var s string
	err := o.strTo(&s, key)
	return s, err
}

// strTo decodes a required, non-null string.
func (o fieldSet) strTo(dst *string, key string) error {
	v, ok := o[key]
	if !ok || isNull(v) {
		return fmt.Errorf("%s is required", key)
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("%s must be a string", key)
	}
	return nil
}

func (o fieldSet) optStr(dst **string, key string) error {
	v, ok := o[key]
	if !ok || isNull(v) {
		*dst = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return fmt.Errorf("%s must be a string or null", key)
	}
	*dst = &s
	return nil
}

// enum decodes a string that must be one of allowed; an absent key gives def ("" = required).
func (o fieldSet) enum(dst *string, key, def string, allowed ...string) error {
	v, ok := o[key]
	if !ok {
		if def == "" {
			return fmt.Errorf("%s is required", key)
		}
		*dst = def
		return nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil || isNull(v) || !slices.Contains(allowed, s) {
		return fmt.Errorf("%s must be one of %s", key, strings.Join(allowed, ", "))
	}
	*dst = s
	return nil
}

func (o fieldSet) optEnum(dst **string, key string, allowed ...string) error {
	v, ok := o[key]
	if !ok || isNull(v) {
		*dst = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil || !slices.Contains(allowed, s) {
		return fmt.Errorf("%s must be null or one of %s", key, strings.Join(allowed, ", "))
	}
	*dst = &s
	return nil
}

func (o fieldSet) optFloat(dst **float64, key string, nonNegative bool) error {
	v, ok := o[key]
	if !ok || isNull(v) {
		*dst = nil
		return nil
	}
	var f float64
	if !isJSONNumber(v) || json.Unmarshal(v, &f) != nil || math.IsInf(f, 0) {
		return fmt.Errorf("%s must be a number or null", key)
	}
	if nonNegative && f < 0 {
		return fmt.Errorf("%s must be >= 0", key)
	}
	*dst = &f
	return nil
}

func (o fieldSet) optInt(dst **int64, key string, nonNegative bool) error {
	v, ok := o[key]
	if !ok || isNull(v) {
		*dst = nil
		return nil
	}
	var f float64
	if !isJSONNumber(v) || json.Unmarshal(v, &f) != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return fmt.Errorf("%s must be an integer or null", key)
	}
	if nonNegative && f < 0 {
		return fmt.Errorf("%s must be >= 0", key)
	}
	n := int64(f)
	*dst = &n
	return nil
}

func (o fieldSet) list(key string) ([]json.RawMessage, error) {
	var l []json.RawMessage
	err := o.listTo(&l, key)
	return l, err
}

// listTo decodes an array that defaults to empty when absent (null is not allowed).
func (o fieldSet) listTo(dst *[]json.RawMessage, key string) error {
	v, ok := o[key]
	if !ok {
		*dst = []json.RawMessage{}
		return nil
	}
	if isNull(v) || json.Unmarshal(v, dst) != nil {
		return fmt.Errorf("%s must be a list", key)
	}
	if *dst == nil {
		*dst = []json.RawMessage{}
	}
	return nil
}

func isJSONNumber(v []byte) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}

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
