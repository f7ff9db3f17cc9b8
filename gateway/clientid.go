package gateway

import "net/http"

// sessionHeaders are the request headers that carry a harness's session id, in precedence order:
// opencode sends x-session-id, Claude Code x-claude-code-session-id, Codex session-id, pi's OpenAI
// client session_id (as their recorded requests show).
var sessionHeaders = []string{"x-session-id", "x-claude-code-session-id", "session-id", "session_id"}

// assistantMessageHeader carries the harness's id for the assistant message a call produces.
const assistantMessageHeader = "x-assistant-message-id"

// Lineage headers: NeMo Gym's logical request id (calls sharing one are attempts at one request)
// and our parent call id (the model_call_id of the call this one continues, as the gateway
// returned it in x-nemo-gym-model-call-id).
const (
	logicalRequestHeader = "x-nemo-gym-logical-request-id"
	parentCallHeader     = "x-modelcalls-parent-call-id"
)

// The same names in canonical form, the form http.Header keys are stored in: looked up directly,
// they are not canonicalized again (an allocation each) on every call.
var (
	sessionKeys         = canonicalKeys(sessionHeaders...)
	assistantMessageKey = http.CanonicalHeaderKey(assistantMessageHeader)
	logicalRequestKey   = http.CanonicalHeaderKey(logicalRequestHeader)
	parentCallKey       = http.CanonicalHeaderKey(parentCallHeader)
)

func canonicalKeys(names ...string) []string {
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = http.CanonicalHeaderKey(n)
	}
	return keys
}

// clientIDs returns client_session_id and client_assistant_message_id from request headers: the
// session id from the first of sessionHeaders that is present with a non-empty value, the message id
// from x-assistant-message-id. A header sent several times with different values gives nil (no
// guess); repeated equal values count once. These are correlation evidence, never authentication.
func clientIDs(h http.Header) (session, assistantMessage *string) {
	for _, key := range sessionKeys {
		if v, present := singleValue(h, key); present {
			session = v
			break
		}
	}
	assistantMessage, _ = singleValue(h, assistantMessageKey)
	return session, assistantMessage
}

// lineageIDs returns client_logical_request_id and client_parent_call_id from request headers, by
// the same rule as clientIDs (several different values give nil).
func lineageIDs(h http.Header) (logicalRequest, parentCall *string) {
	logicalRequest, _ = singleValue(h, logicalRequestKey)
	parentCall, _ = singleValue(h, parentCallKey)
	return logicalRequest, parentCall
}

// singleValue returns the one distinct non-empty value of the header with canonical key key;
// present is false when the header has no non-empty value, and v is nil when it has several
// different ones.
func singleValue(h http.Header, key string) (v *string, present bool) {
	var first string
	for _, x := range h[key] {
		if x == "" {
			continue
		}
		if !present {
			first, present = x, true
			continue
		}
		if x != first {
			return nil, true
		}
	}
	if !present {
		return nil, false
	}
	return &first, true
}
