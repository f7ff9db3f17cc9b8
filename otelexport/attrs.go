package otelexport

import (
	"github.com/modelcalls/modelcalls/dialect"
	"go.opentelemetry.io/otel/attribute"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/record"
)

// Attribute names of a call span. The gen_ai.*, error.type, http.* and server.* names are the
// OpenTelemetry GenAI and HTTP semantic conventions; modelcalls.* are the capture's own fields
// (docs/otel.md has the table).
const (
	AttrOperationName       = "gen_ai.operation.name"
	AttrProviderName        = "gen_ai.provider.name"
	AttrRequestModel        = "gen_ai.request.model"
	AttrResponseModel       = "gen_ai.response.model"
	AttrResponseID          = "gen_ai.response.id"
	AttrFinishReasons       = "gen_ai.response.finish_reasons"
	AttrInputTokens         = "gen_ai.usage.input_tokens"
	AttrOutputTokens        = "gen_ai.usage.output_tokens"
	AttrCacheReadTokens     = "gen_ai.usage.cache_read.input_tokens"
	AttrCacheCreationTokens = "gen_ai.usage.cache_creation.input_tokens"
	AttrReasoningTokens     = "gen_ai.usage.reasoning.output_tokens"
	AttrTimeToFirstChunk    = "gen_ai.response.time_to_first_chunk"
	AttrConversationID      = "gen_ai.conversation.id"
	AttrInputMessages       = "gen_ai.input.messages"
	AttrOutputMessages      = "gen_ai.output.messages"
	AttrSystemInstructions  = "gen_ai.system_instructions"
	AttrTokenType           = "gen_ai.token.type"
	AttrErrorType           = "error.type"
	AttrHTTPStatusCode      = "http.response.status_code"
	AttrServerAddress       = "server.address"
	AttrServerPort          = "server.port"

	AttrRolloutID                = "modelcalls.rollout_id"
	AttrModelCallID              = "modelcalls.model_call_id"
	AttrDialect                  = "modelcalls.dialect"
	AttrModelServer              = "modelcalls.model_server"
	AttrStream                   = "modelcalls.stream"
	AttrResponseStatus           = "modelcalls.response_status"
	AttrResponseSource           = "modelcalls.response_source"
	AttrUpstreamAttempted        = "modelcalls.upstream_attempted"
	AttrUpstreamStatusCode       = "modelcalls.upstream_status_code"
	AttrLocalResponseReason      = "modelcalls.local_response_reason"
	AttrClientAssistantMessageID = "modelcalls.client_assistant_message_id"
	AttrToolCalls                = "modelcalls.tool_calls"
	AttrLatencyTTFTMS            = "modelcalls.latency_ttft_ms"
	AttrContentTruncated         = "modelcalls.content_truncated"

	// Rollout root span (export otlp --in).
	AttrRolloutCalls        = "modelcalls.rollout.calls"
	AttrRolloutErrors       = "modelcalls.rollout.errors"
	AttrRolloutInputTokens  = "modelcalls.rollout.input_tokens"
	AttrRolloutOutputTokens = "modelcalls.rollout.output_tokens"
	AttrRolloutCachedTokens = "modelcalls.rollout.cache_read.input_tokens"
	AttrRolloutReward       = "modelcalls.rollout.reward"
	AttrRolloutTaskIndex    = "modelcalls.rollout.task_index"
)

// OperationChat is gen_ai.operation.name of every call: every dialect is a chat-style generation
// API (Chat Completions, Responses, Messages, Gemini's generateContent).
const OperationChat = "chat"

// requestInfo is what a span reads from the request and response payloads beyond the record.
type requestInfo struct {
	requestModel  *string
	responseModel *string
	stream        bool
}

// scanPayloads reads request.model, request.stream and the model the response names in its
// dialect's members (dialect.ResponseModelUsage; a model that is not a non-empty string is none).
func scanPayloads(rec *record.ModelCallRecord) requestInfo {
	ri := scanRequest(rec.Request)
	if m, _ := dialect.ResponseModelUsage(rec.Response); m != "" {
		ri.responseModel = &m
	}
	return ri
}

// scanRequest reads request.model and request.stream (top-level members only; the last of a
// repeated member wins).
func scanRequest(req []byte) requestInfo {
	var ri requestInfo
	jsonscan.EachMember(req, func(key, v []byte) bool {
		switch {
		case jsonscan.KeyIs(key, "model"):
			ri.requestModel = nil
			if s, ok := jsonscan.String(v); ok {
				ri.requestModel = &s
			}
		case jsonscan.KeyIs(key, "stream"):
			ri.stream = string(v) == "true"
		}
		return true
	})
	return ri
}

// spanName is "{gen_ai.operation.name} {gen_ai.request.model}", or the operation alone when the
// request named no model.
func spanName(ri requestInfo) string {
	if ri.requestModel != nil && *ri.requestModel != "" {
		return OperationChat + " " + *ri.requestModel
	}
	return OperationChat
}

// maxCallAttrs is the most attributes a call span has: callAttributes' 30 and the 3 of content.
const maxCallAttrs = 33

// callAttributes appends the attributes of one call span (content excluded) to a. Unknown (null) fields are
// absent, never 0 or "".
func callAttributes(a []attribute.KeyValue, rolloutID string, rec *record.ModelCallRecord, ri requestInfo, srv server) []attribute.KeyValue {
	a = append(a, attribute.String(AttrOperationName, OperationChat))
	if rec.Dialect != nil {
		// gen_ai.provider.name is the dialect's owner (dialect.Dialect.Provider): the upstream may
		// be any server speaking that API, which the capture cannot tell.
		if p := dialect.Dialect(*rec.Dialect).Provider(); p != "" {
			a = append(a, attribute.String(AttrProviderName, p))
		}
		a = append(a, attribute.String(AttrDialect, *rec.Dialect))
	}
	a = optString(a, AttrRequestModel, ri.requestModel)
	a = optString(a, AttrResponseModel, ri.responseModel)
	a = optString(a, AttrResponseID, rec.ResponseID)
	if rec.FinishReason != nil {
		a = append(a, attribute.StringSlice(AttrFinishReasons, []string{*rec.FinishReason}))
	}
	a = optInt64(a, AttrInputTokens, rec.TokensIn)
	a = optInt64(a, AttrOutputTokens, rec.TokensOut)
	a = optInt64(a, AttrCacheReadTokens, rec.CachedTokens)
	a = optInt64(a, AttrCacheCreationTokens, rec.CacheCreationTokens)
	a = optInt64(a, AttrReasoningTokens, rec.TokensReasoning)
	if rec.LatencyTTFTMS != nil {
		if ri.stream {
			a = append(a, attribute.Float64(AttrTimeToFirstChunk, *rec.LatencyTTFTMS/1000))
		}
		a = append(a, attribute.Float64(AttrLatencyTTFTMS, *rec.LatencyTTFTMS))
	}
	a = optString(a, AttrConversationID, rec.ClientSessionID)
	a = optString(a, AttrErrorType, rec.ErrorCategory)
	if rec.StatusCode != nil {
		a = append(a, attribute.Int(AttrHTTPStatusCode, *rec.StatusCode))
	}
	if srv.address != "" {
		a = append(a, attribute.String(AttrServerAddress, srv.address))
		if srv.port > 0 {
			a = append(a, attribute.Int(AttrServerPort, srv.port))
		}
	}
	a = append(a, attribute.String(AttrRolloutID, rolloutID))
	a = optString(a, AttrModelCallID, rec.ModelCallID)
	if rec.ModelRef != nil {
		a = append(a, attribute.String(AttrModelServer, rec.ModelRef.Name))
	}
	if rec.Request != nil {
		a = append(a, attribute.Bool(AttrStream, ri.stream))
	}
	a = optString(a, AttrResponseStatus, rec.ResponseStatus)
	a = optString(a, AttrResponseSource, rec.ResponseSource)
	if rec.UpstreamAttempted != nil {
		a = append(a, attribute.Bool(AttrUpstreamAttempted, *rec.UpstreamAttempted))
	}
	if rec.UpstreamStatusCode != nil {
		a = append(a, attribute.Int(AttrUpstreamStatusCode, *rec.UpstreamStatusCode))
	}
	a = optString(a, AttrLocalResponseReason, rec.LocalResponseReason)
	a = optString(a, AttrClientAssistantMessageID, rec.ClientAssistantMessageID)
	if rec.Response != nil {
		a = append(a, attribute.Int(AttrToolCalls, len(rec.ToolCalls)))
	}
	return a
}

func optString(a []attribute.KeyValue, k string, v *string) []attribute.KeyValue {
	if v == nil {
		return a
	}
	return append(a, attribute.String(k, *v))
}

func optInt64(a []attribute.KeyValue, k string, v *int64) []attribute.KeyValue {
	if v == nil {
		return a
	}
	return append(a, attribute.Int64(k, *v))
}

// server is the upstream's server.address and server.port (port 0: absent).
type server struct {
	address string
	port    int
}
