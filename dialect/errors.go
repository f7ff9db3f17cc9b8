package dialect

import "github.com/modelcalls/modelcalls/internal/jsonscan"

// ErrorBody returns the body of an error response the gateway answers itself (invalid rollout
// id, unreachable or timed-out upstream, request too large, shutting down), shaped as
// the dialect's own servers shape errors, as compact JSON without a trailing newline:
//
//	responses, chat (and any other value): {"error":{"message":M,"type":T,"param":null,"code":C}}
//	messages:                              {"type":"error","error":{"type":T,"message":M}}
//
// T is the provider's error type for status (see errorType); C is code, or null when code is "".
// The Anthropic shape has no code member, so a caller that needs the code seen by an Anthropic
// client must say it in message.
func ErrorBody(d Dialect, status int, code, message string) []byte {
	typ := errorType(d, status)
	var b []byte
	if d == Messages {
		b = append(b, `{"type":"error","error":{"type":`...)
		b = jsonscan.AppendString(b, typ)
		b = append(b, `,"message":`...)
		b = jsonscan.AppendString(b, message)
		return append(b, "}}"...)
	}
	b = append(b, `{"error":{"message":`...)
	b = jsonscan.AppendString(b, message)
	b = append(b, `,"type":`...)
	b = jsonscan.AppendString(b, typ)
	b = append(b, `,"param":null,"code":`...)
	if code == "" {
		b = append(b, "null"...)
	} else {
		b = jsonscan.AppendString(b, code)
	}
	return append(b, "}}"...)
}

// errorType is the error type a provider uses for an HTTP status.
//
// Anthropic (documented error types): 400 invalid_request_error, 401 authentication_error,
// 403 permission_error, 404 not_found_error, 413 request_too_large, 429 rate_limit_error,
// 504 timeout_error, 529 overloaded_error, 503 overloaded_error (the server is not taking work),
// other 5xx api_error, other 4xx invalid_request_error.
//
// OpenAI: 401 authentication_error, 403 permission_error, 404 not_found_error, 429
// rate_limit_error, other 4xx invalid_request_error, 5xx server_error.
func errorType(d Dialect, status int) string {
	switch status {
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 429:
		return "rate_limit_error"
	}
	if d == Messages {
		switch status {
		case 413:
			return "request_too_large"
		case 504:
			return "timeout_error"
		case 503, 529:
			return "overloaded_error"
		}
		if status >= 500 {
			return "api_error"
		}
		return "invalid_request_error"
	}
	if status >= 500 {
		return "server_error"
	}
	return "invalid_request_error"
}
