// Package schema is the one table of the keys of a capture line and of a record built from it:
// every key is typed here once, as a constant, and Line and Record list the keys in the order they
// are written, with when a line key is present and which line key a record field is copied from.
//
// The writers and readers stay hand-written straight-line code for speed (no reflection, no loop
// over this table on a hot path): capture's line writer, record's envelope decoder and record's
// JSON encoder use these constants (a key with its separator is a constant expression, `,"` + Dialect
// + `":`), and tests check each of them against the table: the line writer writes Line's keys in
// order, the encoder Record's, the decoder reads every line key a Record field is copied from, and
// docs/format.md (sections 3 and 7.2) lists the same keys in the same order.
//
// Adding a field: a constant and a row here (in Line, in Record, or both with From; a line key the
// record does not carry is marked LineOnly), then the value where it comes from: the
// capture.Exchange field the gateway sets and its line in the writer, the ModelCallRecord field and
// its line in the encoder (and in the decoder and record.FromExchange when it is copied from the
// line), and a row in docs/format.md. The schema tests name each place that does not follow the
// table yet.
package schema

// Keys of the capture line (docs/format.md, section 3). NeMo Gym's thirteen, then ours.
const (
	ModelCallID   = "model_call_id"
	Dialect       = "dialect"
	ModelRef      = "model_ref"
	StartedAt     = "started_at"
	CompletedAt   = "completed_at"
	LatencyMS     = "latency_ms"
	LatencyTTFTMS = "latency_ttft_ms"
	StatusCode    = "status_code"
	ErrorCategory = "error_category"
	Request       = "request"
	Response      = "response"
	RequestRaw    = "request_raw"
	ResponseRaw   = "response_raw"

	ResponseSource           = "response_source"
	UpstreamAttempted        = "upstream_attempted"
	UpstreamStatusCode       = "upstream_status_code"
	LocalResponseReason      = "local_response_reason"
	ClientSessionID          = "client_session_id"
	ClientAssistantMessageID = "client_assistant_message_id"
	TokenCapture             = "token_capture"
	ClientLogicalRequestID   = "client_logical_request_id"
	ClientParentCallID       = "client_parent_call_id"
	PathModel                = "path_model"
)

// Keys of the record that are not line keys (docs/format.md, section 7.2); the record's other keys
// are the line keys above.
const (
	ResponseID          = "response_id"
	CallIndex           = "call_index"
	Model               = "model"
	ResponseStatus      = "response_status"
	FinishReason        = "finish_reason"
	TokensIn            = "tokens_in"
	TokensOut           = "tokens_out"
	TokensReasoning     = "tokens_reasoning"
	TokensTotal         = "tokens_total"
	ToolCalls           = "tool_calls"
	ReasoningContent    = "reasoning_content"
	CacheHit            = "cache_hit"
	CachedTokens        = "cached_tokens"
	CacheCreationTokens = "cache_creation_tokens"
	LatencyTotalMS      = "latency_total_ms"
)

// Presence says when the line writer writes a key.
type Presence uint8

const (
	// Always: the key is in every line, null when unknown.
	Always Presence = iota
	// WhenSet: the key is left out when its value is unknown (request_raw, response_raw and our
	// provenance and client-id keys).
	WhenSet
)

// LineKey is one key of the capture line.
type LineKey struct {
	Key     string
	Present Presence
	// LineOnly marks a key the record does not carry (no Record field is copied from it): readers
	// that need it read it from the line. Every other line key is some Record field's From.
	LineOnly bool
}

// Line is the capture line's keys in the order capture's writer writes them.
var Line = [...]LineKey{
	{Key: ModelCallID, Present: Always},
	{Key: Dialect, Present: Always},
	{Key: ModelRef, Present: Always},
	{Key: StartedAt, Present: Always},
	{Key: CompletedAt, Present: Always},
	{Key: LatencyMS, Present: Always},
	{Key: LatencyTTFTMS, Present: Always},
	{Key: StatusCode, Present: Always},
	{Key: ErrorCategory, Present: Always},
	{Key: Request, Present: Always},
	{Key: Response, Present: Always},
	{Key: RequestRaw, Present: WhenSet},
	{Key: ResponseRaw, Present: WhenSet},
	{Key: ResponseSource, Present: WhenSet},
	{Key: UpstreamAttempted, Present: WhenSet},
	{Key: UpstreamStatusCode, Present: WhenSet},
	{Key: LocalResponseReason, Present: WhenSet},
	{Key: ClientSessionID, Present: WhenSet},
	{Key: ClientAssistantMessageID, Present: WhenSet},
	{Key: TokenCapture, Present: WhenSet, LineOnly: true},
	{Key: ClientLogicalRequestID, Present: WhenSet, LineOnly: true},
	{Key: ClientParentCallID, Present: WhenSet, LineOnly: true},
	// PathModel is not copied: the record's model falls back to it (a derived field).
	{Key: PathModel, Present: WhenSet, LineOnly: true},
}

// RecordField is one field of the record.
type RecordField struct {
	Key string
	// Go is the name of the record's Go struct field (record.ModelCallRecord).
	Go string
	// From is the line key whose value the field is copied from (checked, and null when it has the
	// wrong type), "" when the record derives the value (from the response, the capture index, ...).
	From string
	// Payload marks the four fields a record leaves out when written without payloads.
	Payload bool
}

// Record is the record's fields in the order record's encoder writes them: NeMo Gym's 27, then
// our six provenance and client-id fields.
var Record = [...]RecordField{
	{Key: ModelCallID, Go: "ModelCallID", From: ModelCallID},
	{Key: ResponseID, Go: "ResponseID"},
	{Key: CallIndex, Go: "CallIndex"},
	{Key: ModelRef, Go: "ModelRef", From: ModelRef},
	{Key: Model, Go: "Model"},
	{Key: Dialect, Go: "Dialect", From: Dialect},
	{Key: StatusCode, Go: "StatusCode", From: StatusCode},
	{Key: ResponseStatus, Go: "ResponseStatus"},
	{Key: FinishReason, Go: "FinishReason"},
	{Key: StartedAt, Go: "StartedAt", From: StartedAt},
	{Key: CompletedAt, Go: "CompletedAt", From: CompletedAt},
	{Key: TokensIn, Go: "TokensIn"},
	{Key: TokensOut, Go: "TokensOut"},
	{Key: TokensReasoning, Go: "TokensReasoning"},
	{Key: TokensTotal, Go: "TokensTotal"},
	{Key: Request, Go: "Request", From: Request, Payload: true},
	{Key: Response, Go: "Response", From: Response, Payload: true},
	{Key: RequestRaw, Go: "RequestRaw", From: RequestRaw, Payload: true},
	{Key: ResponseRaw, Go: "ResponseRaw", From: ResponseRaw, Payload: true},
	{Key: ToolCalls, Go: "ToolCalls"},
	{Key: ReasoningContent, Go: "ReasoningContent"},
	{Key: CacheHit, Go: "CacheHit"},
	{Key: CachedTokens, Go: "CachedTokens"},
	{Key: CacheCreationTokens, Go: "CacheCreationTokens"},
	{Key: ErrorCategory, Go: "ErrorCategory", From: ErrorCategory},
	{Key: LatencyTotalMS, Go: "LatencyTotalMS", From: LatencyMS},
	{Key: LatencyTTFTMS, Go: "LatencyTTFTMS", From: LatencyTTFTMS},
	{Key: ResponseSource, Go: "ResponseSource", From: ResponseSource},
	{Key: UpstreamAttempted, Go: "UpstreamAttempted", From: UpstreamAttempted},
	{Key: UpstreamStatusCode, Go: "UpstreamStatusCode", From: UpstreamStatusCode},
	{Key: LocalResponseReason, Go: "LocalResponseReason", From: LocalResponseReason},
	{Key: ClientSessionID, Go: "ClientSessionID", From: ClientSessionID},
	{Key: ClientAssistantMessageID, Go: "ClientAssistantMessageID", From: ClientAssistantMessageID},
}

// Keys of one entry of a record's tool_calls.
const (
	ToolCallID        = "call_id"
	ToolCallName      = "name"
	ToolCallArguments = "arguments"
)

// ToolCall is the keys of one entry of a record's tool_calls, in the order they are written.
var ToolCall = [...]string{ToolCallID, ToolCallName, ToolCallArguments}
