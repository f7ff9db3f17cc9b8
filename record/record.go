package record

import (
	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/internal/schema"
	"github.com/modelcalls/modelcalls/rollout"

	"encoding/json"
)

// ModelCallRecord is the observability record derived from one captured exchange: the seed's
// ModelCallRecord, with exactly its 33 fields and JSON names. Every optional field is nil
// when unknown; 0, false and "" are values. JSON output (AppendJSON, MarshalJSON) always carries
// every field, null when unknown, and tool_calls is [] when empty.
//
// JSON key order: the 27 fields of NeMo Gym's snapshot record in its order (what NeMo Gym's own
// merge writes: merged-by-gym.jsonl among the NeMo Gym fixtures), then the six seed additions (response_source, upstream_attempted,
// upstream_status_code, local_response_reason, client_session_id, client_assistant_message_id).
//
// Request and Response hold the exchange's payload objects as the original JSON bytes (they alias the
// line the record was built from); they are never decoded into maps or re-encoded. RequestRaw and
// ResponseRaw likewise hold their JSON string tokens as the line has them (RawText): reading a
// record does not decode its largest strings; RawText.Text does, when a caller wants the text.
type ModelCallRecord struct {
	ModelCallID *string                 // model_call_id: 32 lowercase hex chars from the capture line
	ResponseID  *string                 // response_id: response.id when a string ("" kept)
	CallIndex   int                     // call_index: capture index, durable append order (not causal order)
	ModelRef    *rollout.ModelServerRef // model_ref: {"type":"responses_api_models","name":...}
	Model       *string                 // model: the first truthy of response.model, request.model, when a string
	Dialect     *string                 // dialect: "responses", "chat", "messages" or "gemini"
	StatusCode  *int                    // status_code: HTTP status the server answered with

	ResponseStatus *string // response_status: response.status when a string (Responses API)
	FinishReason   *string // finish_reason: stop_reason | choices[0].finish_reason | incomplete_details.reason

	StartedAt   *float64 // started_at: wall clock, seconds since the Unix epoch
	CompletedAt *float64 // completed_at: wall clock, seconds since the Unix epoch

	TokensIn        *int64 // tokens_in: prompt size in tokens (ExtractTokenStats)
	TokensOut       *int64 // tokens_out: completion tokens
	TokensReasoning *int64 // tokens_reasoning: reasoning/thinking tokens, a subset of tokens_out
	TokensTotal     *int64 // tokens_total: total_tokens as reported, else in+out

	Request     json.RawMessage // request: the request object, or nil (null)
	Response    json.RawMessage // response: the parsed/reconstructed response object, or nil (null)
	RequestRaw  RawText         // request_raw: request body text when it was not a JSON object, or nil (null)
	ResponseRaw RawText         // response_raw: raw body text (SSE streams, unparseable bodies), or nil (null)

	ToolCalls        []ToolCall // tool_calls: client tool calls the model asked for; never null in JSON
	ReasoningContent *string    // reasoning_content: readable reasoning text, pieces joined with "\n"

	CacheHit            *bool  // cache_hit: cached_tokens > 0
	CachedTokens        *int64 // cached_tokens: prompt tokens read from the provider's cache
	CacheCreationTokens *int64 // cache_creation_tokens: prompt tokens written to the provider's cache (ExtractTokenStats)

	ErrorCategory  *string  // error_category: one of the capture.Category* values
	LatencyTotalMS *float64 // latency_total_ms: exchange latency_ms, milliseconds
	LatencyTTFTMS  *float64 // latency_ttft_ms: time to first body byte, milliseconds

	ResponseSource      *string // response_source: "upstream" or "local" (the gateway answered itself)
	UpstreamAttempted   *bool   // upstream_attempted: whether the upstream was called at all
	UpstreamStatusCode  *int    // upstream_status_code: the upstream's own HTTP status
	LocalResponseReason *string // local_response_reason: why the gateway answered itself
	ClientSessionID     *string // client_session_id: client-declared session id (evidence only)
	// ClientAssistantMessageID is client_assistant_message_id: the client-declared message id.
	ClientAssistantMessageID *string
}

// ToolCall is one tool call the model asked the client to run: {"call_id", "name", "arguments"},
// from a Responses function_call item, a Chat message's tool_calls or an Anthropic tool_use block.
type ToolCall struct {
	// CallID is the provider's call id (Responses call_id or id, Chat tool_calls[].id, Anthropic
	// tool_use id); nil when absent or not a string.
	CallID *string
	// Name is the function name; nil when absent or not a string.
	Name *string
	// Arguments is always a JSON object: an object as given; a string holding a JSON object, decoded;
	// any other string as {"_raw": <the string>}; anything else {}.
	Arguments json.RawMessage
}

// AppendJSON appends the record as one compact JSON object (no newline). With payloads false the
// four payload fields (request, response, request_raw, response_raw: schema.Record's Payload rows) are left out, as NeMo Gym's merge does unless include_payloads
// is set; with payloads true all 33 fields are written.
func (r *ModelCallRecord) AppendJSON(dst []byte, payloads bool) []byte {
	return r.appendJSON(dst, payloads, nil)
}

// appendJSON is AppendJSON for a record read from line (nil: any record): a string field whose
// bytes lie in line is the body of a string token without escapes in a line that passed the
// strict validation (ReadAvailableRecords' strings share the line only then, see text), so it
// holds no quote, backslash, control byte or invalid UTF-8 and AppendString would copy it
// unchanged: it is copied without the scan (the merge's attachment, whose records alias the
// capture file it read, spends a sixth of its writing on that scan otherwise).
func (r *ModelCallRecord) appendJSON(dst []byte, payloads bool, line []byte) []byte {
	// The keys are written with their separators as constants (the order is fixed).
	dst = append(dst, `{"`+schema.ModelCallID+`":`...)
	dst = appendOptText(dst, r.ModelCallID, line)
	dst = append(dst, `,"`+schema.ResponseID+`":`...)
	dst = appendOptText(dst, r.ResponseID, line)
	dst = append(dst, `,"`+schema.CallIndex+`":`...)
	dst = appendOptInt(dst, &r.CallIndex)
	dst = append(dst, `,"`+schema.ModelRef+`":`...)
	if r.ModelRef == nil {
		dst = append(dst, "null"...)
	} else {
		if r.ModelRef.Type == rollout.ModelServerRefType {
			dst = append(dst, `{"type":"`+rollout.ModelServerRefType+`"`...)
		} else {
			dst = append(dst, `{"type":`...)
			dst = jsonscan.AppendString(dst, r.ModelRef.Type)
		}
		dst = append(dst, `,"name":`...)
		dst = appendText(dst, r.ModelRef.Name, line)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"`+schema.Model+`":`...)
	dst = appendOptText(dst, r.Model, line)
	dst = append(dst, `,"`+schema.Dialect+`":`...)
	dst = appendOptText(dst, r.Dialect, line)
	dst = append(dst, `,"`+schema.StatusCode+`":`...)
	dst = appendOptInt(dst, r.StatusCode)
	dst = append(dst, `,"`+schema.ResponseStatus+`":`...)
	dst = appendOptText(dst, r.ResponseStatus, line)
	dst = append(dst, `,"`+schema.FinishReason+`":`...)
	dst = appendOptText(dst, r.FinishReason, line)
	dst = append(dst, `,"`+schema.StartedAt+`":`...)
	dst = appendOptFloat(dst, r.StartedAt)
	dst = append(dst, `,"`+schema.CompletedAt+`":`...)
	dst = appendOptFloat(dst, r.CompletedAt)
	dst = append(dst, `,"`+schema.TokensIn+`":`...)
	dst = appendOptInt64(dst, r.TokensIn)
	dst = append(dst, `,"`+schema.TokensOut+`":`...)
	dst = appendOptInt64(dst, r.TokensOut)
	dst = append(dst, `,"`+schema.TokensReasoning+`":`...)
	dst = appendOptInt64(dst, r.TokensReasoning)
	dst = append(dst, `,"`+schema.TokensTotal+`":`...)
	dst = appendOptInt64(dst, r.TokensTotal)
	if payloads {
		dst = r.appendPayloads(dst)
	}
	dst = append(dst, `,"`+schema.ToolCalls+`":`...)
	dst = append(dst, '[')
	for i := range r.ToolCalls {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = r.ToolCalls[i].appendJSONIn(dst, line)
	}
	dst = append(dst, ']')
	dst = append(dst, `,"`+schema.ReasoningContent+`":`...)
	dst = appendOptText(dst, r.ReasoningContent, line)
	dst = append(dst, `,"`+schema.CacheHit+`":`...)
	dst = appendOptBool(dst, r.CacheHit)
	dst = append(dst, `,"`+schema.CachedTokens+`":`...)
	dst = appendOptInt64(dst, r.CachedTokens)
	dst = append(dst, `,"`+schema.CacheCreationTokens+`":`...)
	dst = appendOptInt64(dst, r.CacheCreationTokens)
	dst = append(dst, `,"`+schema.ErrorCategory+`":`...)
	dst = appendOptText(dst, r.ErrorCategory, line)
	dst = append(dst, `,"`+schema.LatencyTotalMS+`":`...)
	dst = appendOptFloat(dst, r.LatencyTotalMS)
	dst = append(dst, `,"`+schema.LatencyTTFTMS+`":`...)
	dst = appendOptFloat(dst, r.LatencyTTFTMS)
	dst = append(dst, `,"`+schema.ResponseSource+`":`...)
	dst = appendOptText(dst, r.ResponseSource, line)
	dst = append(dst, `,"`+schema.UpstreamAttempted+`":`...)
	dst = appendOptBool(dst, r.UpstreamAttempted)
	dst = append(dst, `,"`+schema.UpstreamStatusCode+`":`...)
	dst = appendOptInt(dst, r.UpstreamStatusCode)
	dst = append(dst, `,"`+schema.LocalResponseReason+`":`...)
	dst = appendOptText(dst, r.LocalResponseReason, line)
	dst = append(dst, `,"`+schema.ClientSessionID+`":`...)
	dst = appendOptText(dst, r.ClientSessionID, line)
	dst = append(dst, `,"`+schema.ClientAssistantMessageID+`":`...)
	dst = appendOptText(dst, r.ClientAssistantMessageID, line)
	return append(dst, '}')
}

// MarshalJSON returns the record with all 33 fields (payloads included), as AppendJSON(nil, true).
// Its receiver is a value, so json.Marshal writes the same bytes for a record, a pointer to one and
// a record held in a struct field, slice or map.
func (r ModelCallRecord) MarshalJSON() ([]byte, error) {
	return r.AppendJSON(nil, true), nil
}

func (t *ToolCall) appendJSON(dst []byte) []byte { return t.appendJSONIn(dst, nil) }

// appendJSONIn is appendJSON for a call read from line (see ModelCallRecord.appendJSON).
func (t *ToolCall) appendJSONIn(dst, line []byte) []byte {
	dst = append(dst, `{"`+schema.ToolCallID+`":`...)
	dst = appendOptText(dst, t.CallID, line)
	dst = append(dst, `,"`+schema.ToolCallName+`":`...)
	dst = appendOptText(dst, t.Name, line)
	dst = append(dst, `,"`+schema.ToolCallArguments+`":`...)
	if len(t.Arguments) == 0 {
		dst = append(dst, "{}"...)
	} else {
		dst = appendRaw(dst, t.Arguments)
	}
	return append(dst, '}')
}

// MarshalJSON returns {"call_id":...,"name":...,"arguments":{...}}.
func (t ToolCall) MarshalJSON() ([]byte, error) {
	return t.appendJSON(nil), nil
}

// appendPayloads appends the four payload members, each with its leading comma: request and
// response as their JSON values (null when absent), request_raw and response_raw as their string
// tokens (null when absent).
func (r *ModelCallRecord) appendPayloads(dst []byte) []byte {
	dst = append(dst, `,"`+schema.Request+`":`...)
	dst = appendRaw(dst, r.Request)
	dst = append(dst, `,"`+schema.Response+`":`...)
	dst = appendRaw(dst, r.Response)
	dst = append(dst, `,"`+schema.RequestRaw+`":`...)
	dst = r.RequestRaw.appendJSON(dst)
	dst = append(dst, `,"`+schema.ResponseRaw+`":`...)
	return r.ResponseRaw.appendJSON(dst)
}

// RawText is a JSON string value as it stands in a capture line: the string token, quotes and
// escapes included (`"data: {\"id\"..."`), nil for null or absent. A record read from a capture
// line holds a token that passed the line's strict validation (valid UTF-8, every escape valid,
// surrogates paired); it aliases the line, so do not modify it. Code that fills a record itself
// makes a token with an encoder (encoding/json's Marshal of a string gives one).
//
// A record keeps the token instead of the decoded text because the raw texts are most of a capture
// line's bytes (a streamed response_raw is escape-dense SSE text) and a merge without payloads
// never reads them: decoding them on every read cost more than building the rest of the record.
// JSON output writes the text in the record's canonical string form (AppendJSON's, NeMo Gym's
// orjson's), the same bytes whatever escapes the token used.
type RawText []byte

// Text returns the decoded text: "" for nil and for a token that is not a valid JSON string.
func (t RawText) Text() string {
	s, _ := jsonscan.String(t)
	return s
}

// appendJSON appends the text as a JSON string in AppendString's form (null when nil), from the
// token without decoding it into a string first.
func (t RawText) appendJSON(dst []byte) []byte {
	if t == nil {
		return append(dst, "null"...)
	}
	return appendStringToken(dst, t)
}
