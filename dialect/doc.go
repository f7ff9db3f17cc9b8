// Package dialect owns what modelcalls knows about the observed wire APIs: OpenAI Responses (POST
// /v1/responses), OpenAI Chat Completions (POST /v1/chat/completions), Anthropic Messages (POST
// /v1/messages) and Google's Gemini API (POST /{version}/models/{model}:generateContent and
// :streamGenerateContent).
//
// A dialect is one value, Dialect (its string is the capture line's "dialect"), and one registry
// entry (registry.go; the entries live in openai.go, anthropic.go and gemini.go). Through it the
// package provides, for each dialect,
//   - the observed paths (ForPath: the exact paths NeMo Gym's capture middleware observes, and
//     Gemini's, whose model is in the path: ModelOfPath; StreamOnPath for a dialect that asks for
//     a stream in the URL);
//   - terminal-event detection on a decoded SSE event (Dialect.TerminalOf: NeMo Gym's event
//     names per dialect, plus terminal types carried only in the data JSON, which many servers
//     send without an event line, and data lines joined before decoding; Gemini's last answer
//     event, since its stream has no terminal event);
//   - incremental stream reassembly (Stream: the response NeMo Gym's stream reconstruction
//     builds for each dialect, with the differences listed on Stream): a Stream is fed the body
//     chunk by chunk, tells the gateway which chunk completed the first terminal event, and keeps
//     only the state the reconstructed response needs, never the body;
//   - dialect-shaped local error bodies (ErrorBody). The HTTP status to error-category table is
//     capture.StatusCategory, beside the other error categories of a capture line;
//   - the conversation a person reads (ParseRequest, ParseResponse: messages, parts, tool names),
//     used by modelcalls show, the viewer and OpenTelemetry content;
//   - the provider name of OpenTelemetry's conventions (Dialect.Provider) and the environment
//     variables that point each dialect's SDKs and agents at a gateway (ClientEnv).
//
// Reconstructed responses are compact JSON objects whose untouched values keep the server's
// literal text (10 stays 10, 10.0 stays 10.0) and whose keys follow the order NeMo Gym builds
// them in. The decisions NeMo Gym's behaviour does not settle are written down in
// docs/sse-and-streams.md.
package dialect
