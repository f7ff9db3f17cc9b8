// Package gateway owns the capture proxy: an http.Handler, built on
// net/http/httputil.ReverseProxy, that sits in front of one upstream model server, strips the
// /ng-rollout/<rollout_id> prefix from each request, forwards the bytes unchanged in both
// directions (flushing every chunk), and, for the observed model-call paths of each dialect
// (dialect.ForPath: /v1/responses, /v1/chat/completions, /v1/messages, Gemini's
// /v1beta/models/{model}:generateContent and :streamGenerateContent), writes one exchange line per
// call to a capture.Store.
//
// What it owns: prefix routing and rollout-id validation, the tee of request and response
// (incremental SSE reassembly via dialect.Stream, decoding of compressed bodies for the capture copy
// only, bodies spooled to a temp file past a threshold), the terminal-event hold (the chunk that
// completes the terminal event, or the last chunk of the body, reaches the client only after the
// line is durable or the incomplete marker is written), claims around each capture write, the error
// ladder (NeMo Gym's status categories and stream outcomes, plus our cancelled and
// capture_too_large) and local error responses, provenance and client-id fields, cancelled calls,
// health and Prometheus endpoints, and graceful drain. It behaves as NeMo Gym's capture middleware
// does, as a reverse proxy in front of one upstream; docs/gateway.md gives every rule and where it
// differs, docs/format.md the line it writes.
package gateway
