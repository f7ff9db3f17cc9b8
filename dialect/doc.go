// Package dialect owns what modelcalls knows about the three observed wire APIs: OpenAI
// Responses (POST /v1/responses), OpenAI Chat Completions (POST /v1/chat/completions) and
// Anthropic Messages (POST /v1/messages).
//
// For each dialect it provides
//   - the observed path (ForPath, reference §6.1);
//   - terminal-event detection on a decoded SSE event (Dialect.TerminalOf, reference §7.1 with
//     the SPEC §7 additions: terminal types carried only in the data JSON, data lines joined
//     before decoding);
//   - incremental stream reassembly (Stream, reference §7.3–§7.5 with the SPEC §7 differences):
//     a Stream is fed the body chunk by chunk, tells the gateway which chunk completed the first
//     terminal event, and keeps only the state the reconstructed response needs, never the body;
//   - dialect-shaped local error bodies (ErrorBody). The HTTP status to error-category table is
//     capture.StatusCategory, beside the other error categories of a capture line.
//
// Reconstructed responses are compact JSON objects whose untouched values keep the server's
// literal text (10 stays 10, 10.0 stays 10.0) and whose keys follow the order NeMo Gym builds
// them in. Decisions where SPEC and the reference are silent are written down in
// docs/sse-and-streams.md.
package dialect
