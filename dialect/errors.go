package dialect

// ErrorBody returns the body of an error response the gateway answers itself (invalid rollout
// id, unreachable or timed-out upstream, request too large, shutting down), shaped as
// the dialect's own servers shape errors, as compact JSON without a trailing newline:
//
//	responses, chat (and any other value): {"error":{"message":M,"type":T,"param":null,"code":C}}
//	messages:                              {"type":"error","error":{"type":T,"message":M}}
//	gemini:                                {"error":{"code":S,"message":M,"status":G,"details":[...]}}
//
// T is the provider's error type for status, G Google's status name for it; C is code, or null
// when code is "" (Gemini carries code as the reason of an ErrorInfo detail). Each dialect's entry
// documents its table (openai.go, anthropic.go, gemini.go).
func ErrorBody(d Dialect, status int, code, message string) []byte {
	if b, ok := registry[d]; ok {
		return b.errorBody(status, code, message)
	}
	return openAIErrorBody(status, code, message)
}
