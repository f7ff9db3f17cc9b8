// Package dialect owns what modelcalls knows about the three observed wire APIs: OpenAI
// Responses (POST /v1/responses), OpenAI Chat Completions (POST /v1/chat/completions) and
// Anthropic Messages (POST /v1/messages).
//
// For each dialect it provides
//   - the observed path (ForPath: the exact paths NeMo Gym's capture middleware observes);
//   - terminal-event detection on a decoded SSE event (Dialect.TerminalOf: NeMo Gym's event
//     names per dialect, plus terminal types carried only in the data JSON, which many servers
//     send without an event line, and data lines joined before decoding);
//   - incremental stream reassembly (Stream: the response NeMo Gym's stream reconstruction
//     builds for each dialect, with the differences listed on Stream): a Stream is fed the body
//     chunk by chunk, tells the gateway which chunk completed the first terminal event, and keeps
//     only the state the reconstructed response needs, never the body;
//   - dialect-shaped local error bodies (ErrorBody). The HTTP status to error-category table is
//     capture.StatusCategory, beside the other error categories of a capture line.
//
// Reconstructed responses are compact JSON objects whose untouched values keep the server's
// literal text (10 stays 10, 10.0 stays 10.0) and whose keys follow the order NeMo Gym builds
// them in. The decisions NeMo Gym's behaviour does not settle are written down in
// docs/sse-and-streams.md.
package dialect
