package capture

// Error categories: every value the error_category of a capture line (Exchange.ErrorCategory, and a
// record's error_category) can hold; null means the call succeeded. The first eleven are NeMo Gym's
// vocabulary; CategoryCancelled and CategoryCaptureTooLarge are ours. The gateway decides one per
// call, the first that applies of: the client went away (cancelled); the upstream failed mid-call
// (StatusCategory of its status when that is >= 400, else connection or timeout); an HTTP status >=
// 400 (StatusCategory); a stream's error or incomplete terminal event (upstream_error, incomplete);
// a body too large to keep or a stream too large to reassemble (capture_too_large); a body that could not be decoded
// (capture_parse_error); a stream without its terminal event (stream_truncated); a non-empty body
// that gave no response object (capture_parse_error). Lines written by NeMo Gym itself may carry
// exception, which modelcalls writes only when the proxy ends a call in an unforeseen way.
const (
	// CategoryTimeout: HTTP 408 or 504, or the upstream did not answer (headers or body) in time.
	CategoryTimeout = "timeout"
	// CategoryRateLimit: HTTP 429.
	CategoryRateLimit = "rate_limit"
	// CategoryAuth: HTTP 401 or 403.
	CategoryAuth = "auth"
	// CategoryNotFound: HTTP 404.
	CategoryNotFound = "not_found"
	// CategoryClientError: any other HTTP status from 400 to 499.
	CategoryClientError = "client_error"
	// CategoryUpstreamError: HTTP 500 and above (600 and above included), or a stream that ended
	// with the dialect's error event.
	CategoryUpstreamError = "upstream_error"
	// CategoryConnection: the upstream connection failed (refused, reset, closed mid-body).
	CategoryConnection = "connection"
	// CategoryException: the call ended some other way (NeMo Gym: any other exception).
	CategoryException = "exception"
	// CategoryIncomplete: a Responses stream ended with response.incomplete.
	CategoryIncomplete = "incomplete"
	// CategoryStreamTruncated: a stream ended without its terminal event.
	CategoryStreamTruncated = "stream_truncated"
	// CategoryCaptureParseError: the body could not be decoded (Content-Encoding) or a non-empty
	// body gave no response object.
	CategoryCaptureParseError = "capture_parse_error"
	// CategoryCancelled: the client went away before the terminal event or the end of the body.
	CategoryCancelled = "cancelled"
	// CategoryCaptureTooLarge: the body passed the gateway's capture limit (response_raw then holds
	// its first bytes), a stream event was too large to reassemble, or the stream passed the
	// reassembly's limits (more elements than it keeps, an index far beyond what arrived): the
	// response then rebuilds only part of the stream.
	CategoryCaptureTooLarge = "capture_too_large"
)

// categories is every Category* constant, in the order of docs/format.md (NeMo Gym's eleven, then
// ours).
var categories = [...]string{
	CategoryTimeout, CategoryRateLimit, CategoryAuth, CategoryNotFound, CategoryClientError,
	CategoryUpstreamError, CategoryConnection, CategoryException, CategoryIncomplete,
	CategoryStreamTruncated, CategoryCaptureParseError, CategoryCancelled, CategoryCaptureTooLarge,
}

// Categories returns every error category modelcalls or NeMo Gym writes, the Category* constants,
// in the order of docs/format.md: NeMo Gym's eleven, then ours. The slice is the caller's.
func Categories() []string { return append([]string(nil), categories[:]...) }

// IsCategory says whether c is one of Categories.
func IsCategory(c string) bool {
	for _, k := range categories {
		if k == c {
			return true
		}
	}
	return false
}

// StatusCategory is the error category of an HTTP status, NeMo Gym's classification: "" below 400;
// 408 and 504 CategoryTimeout; 429 CategoryRateLimit; 401 and 403 CategoryAuth; 404
// CategoryNotFound; any other status below 500 CategoryClientError; everything else, 600 and above
// included, CategoryUpstreamError.
func StatusCategory(status int) string {
	switch {
	case status < 400:
		return ""
	case status == 408 || status == 504:
		return CategoryTimeout
	case status == 429:
		return CategoryRateLimit
	case status == 401 || status == 403:
		return CategoryAuth
	case status == 404:
		return CategoryNotFound
	case status < 500:
		return CategoryClientError
	}
	return CategoryUpstreamError
}
