package rollout

// Gap is an explicit statement that some evidence is missing, pending or unreadable (NeMo Gym's
// ObservationGap). It is serialised as {"code": ..., "invocation_id": ..., "detail": ...} with empty
// optional fields omitted.
type Gap struct {
	// Code is one of the Gap* constants (or a producer's own code, kept as given).
	Code string `json:"code"`
	// InvocationID names the agent invocation the gap concerns, if any.
	InvocationID string `json:"invocation_id,omitempty"`
	// Detail is free text such as "count=3" or "capture:<model_call_id>:call_index=2".
	Detail string `json:"detail,omitempty"`
}

// Gap codes, the values of Gap.Code that modelcalls writes or NeMo Gym defines. A merge writes the
// capture codes into ng_model_call_capture's gaps in this order: records_unreadable, incomplete,
// pending, no_records (unreadable instead of records_unreadable and no_records when the capture
// cannot be read at all), then agent_observation_join_failed when the observations do not parse.
// The join writes the reference and ownership codes into the gaps of ng_agent_observations.
const (
	// GapCaptureRecordsUnreadable: some capture lines were damaged; detail "count=<n>".
	GapCaptureRecordsUnreadable = "model_call_capture_records_unreadable"
	// GapCaptureIncomplete: the incomplete marker exists (a capture write failed) or a stale claim was found.
	GapCaptureIncomplete = "model_call_capture_incomplete"
	// GapCapturePending: capture writes were still outstanding after the quiescence wait; detail "count=<n>".
	GapCapturePending = "model_call_capture_pending"
	// GapCaptureNoRecords: no capture file, or one with no lines.
	GapCaptureNoRecords = "model_call_capture_no_records"
	// GapCaptureUnreadable: the capture file could not be read at all (I/O or permission error).
	GapCaptureUnreadable = "model_call_capture_unreadable"
	// GapAgentObservationJoinFailed: ng_agent_observations could not be joined to the captured calls.
	GapAgentObservationJoinFailed = "agent_observation_join_failed"
	// GapReferenceAmbiguous: an observation's model-call reference matches several calls.
	GapReferenceAmbiguous = "model_call_reference_ambiguous"
	// GapReferenceConflict: the referenced call is already owned by another invocation.
	GapReferenceConflict = "model_call_reference_conflict"
	// GapReferenceUnmatched: an observation's model-call reference matches no captured call.
	GapReferenceUnmatched = "model_call_reference_unmatched"
	// GapOwnershipUnavailable: a captured call is owned by no invocation.
	GapOwnershipUnavailable = "model_call_ownership_unavailable"
	// GapCompactionJoinFailed: a Claude Code compaction could not be associated with its model calls.
	// NeMo Gym writes it; modelcalls does not run that association and never writes it, but keeps
	// it when a producer did.
	GapCompactionJoinFailed = "compaction_model_call_join_failed"
)
