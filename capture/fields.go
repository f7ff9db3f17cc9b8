package capture

import (
	"encoding/json"

	"github.com/modelcalls/modelcalls/rollout"
)

// LineFields is one capture line decoded with encoding/json, for readers that want the line's
// values rather than its bytes: NeMo Gym's CaptureStore fields (model_call_id through response,
// request_raw and response_raw) and modelcalls' provenance and client fields (see Exchange), with
// null decoded as a nil pointer and the raw JSON of request and response as written ("null"
// included). Members it does not name are ignored.
type LineFields struct {
	ModelCallID              string                  `json:"model_call_id"`
	Dialect                  string                  `json:"dialect"`
	ModelRef                 *rollout.ModelServerRef `json:"model_ref"`
	StartedAt                float64                 `json:"started_at"`
	CompletedAt              float64                 `json:"completed_at"`
	LatencyMS                float64                 `json:"latency_ms"`
	LatencyTTFTMS            *float64                `json:"latency_ttft_ms"`
	StatusCode               *int                    `json:"status_code"`
	ErrorCategory            *string                 `json:"error_category"`
	Request                  json.RawMessage         `json:"request"`
	Response                 json.RawMessage         `json:"response"`
	RequestRaw               *string                 `json:"request_raw"`
	ResponseRaw              *string                 `json:"response_raw"`
	ResponseSource           *string                 `json:"response_source"`
	UpstreamAttempted        *bool                   `json:"upstream_attempted"`
	UpstreamStatusCode       *int                    `json:"upstream_status_code"`
	LocalResponseReason      *string                 `json:"local_response_reason"`
	ClientSessionID          *string                 `json:"client_session_id"`
	ClientAssistantMessageID *string                 `json:"client_assistant_message_id"`
}
