package gateway

import (
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Response headers: the model call id the gateway adds, and the provenance a NeMo Gym model server
// behind the gateway may declare (it knows whether it answered itself), recorded instead of the
// gateway's own.
const (
	HeaderModelCallID         = "x-nemo-gym-model-call-id"         // added by the gateway to every captured response
	HeaderResponseSource      = "x-nemo-gym-response-source"       // "upstream" | "local"
	HeaderUpstreamAttempted   = "x-nemo-gym-upstream-attempted"    // "true" | "false"
	HeaderUpstreamStatusCode  = "x-nemo-gym-upstream-status-code"  // integer status
	HeaderLocalResponseReason = "x-nemo-gym-local-response-reason" // e.g. "upstream_unreachable"
)

// Response sources (the exchange's response_source values).
const (
	SourceUpstream = "upstream"
	SourceLocal    = "local"
)

// Local response reasons: the exchange's local_response_reason when the gateway answered itself.
const (
	ReasonUpstreamUnreachable = "upstream_unreachable" // 502, category connection
	ReasonUpstreamTimeout     = "upstream_timeout"     // 504, category timeout
	ReasonRequestTooLarge     = "request_too_large"    // 413, category client_error, upstream not attempted
	ReasonShuttingDown        = "shutting_down"        // 503, upstream not attempted
	ReasonInvalidRolloutID    = "invalid_rollout_id"   // 400, not captured
	// ReasonUpstreamBadStatus: 502, category upstream_error, upstream_status_code the upstream's
	// (101 Switching Protocols to a model call, which asked for no switch).
	ReasonUpstreamBadStatus = "upstream_bad_status"
)

// provenance is what the exchange says about who produced the response.
type provenance struct {
	source       *string
	attempted    *bool
	upstreamCode *int
	localReason  *string
}

// provenanceKeys are the provenance headers' canonical keys, in the order relayed reads them.
var provenanceKeys = canonicalKeys(HeaderResponseSource, HeaderUpstreamAttempted, HeaderUpstreamStatusCode, HeaderLocalResponseReason)

// modelCallIDKey is HeaderModelCallID's canonical key.
var modelCallIDKey = http.CanonicalHeaderKey(HeaderModelCallID)

// headerValue is h.Get for a canonical key.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// relayed is the provenance of a response the gateway relayed from the upstream with status code,
// unless the upstream declares its own provenance headers: then exactly the declared values are
// recorded (a header that is absent or unusable gives null), since a Gym model server knows whether
// it answered locally. Declared values are validated so the line stays readable by Gym: the source
// must be "upstream" or "local", attempted a boolean, the status code an integer 100..999, the
// reason valid UTF-8 of at most 200 bytes.
func relayed(h http.Header, code int) provenance {
	declared := false
	for _, k := range provenanceKeys {
		if _, ok := h[k]; ok {
			declared = true
			break
		}
	}
	if !declared {
		return provenance{source: ptr(SourceUpstream), attempted: ptr(true), upstreamCode: ptr(code)}
	}
	var p provenance
	switch v := strings.TrimSpace(headerValue(h, provenanceKeys[0])); v {
	case SourceUpstream, SourceLocal:
		p.source = ptr(v)
	}
	if b, err := strconv.ParseBool(strings.TrimSpace(headerValue(h, provenanceKeys[1]))); err == nil {
		p.attempted = ptr(b)
	}
	if n, err := strconv.Atoi(strings.TrimSpace(headerValue(h, provenanceKeys[2]))); err == nil && n >= 100 && n <= 999 {
		p.upstreamCode = ptr(n)
	}
	if v := strings.TrimSpace(headerValue(h, provenanceKeys[3])); v != "" && len(v) <= 200 && utf8.ValidString(v) {
		p.localReason = ptr(v)
	}
	return p
}

// local is the provenance of a response the gateway answered itself.
func local(reason string, attempted bool) provenance {
	return provenance{source: ptr(SourceLocal), attempted: ptr(attempted), localReason: ptr(reason)}
}

func ptr[T any](v T) *T { return &v }
