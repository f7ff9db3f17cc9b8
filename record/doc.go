// Package record is the record model: the observability record of one captured model call
// (ModelCallRecord, with its ToolCalls, TokenStats and RawText fields), built from one capture line
// (BuildRecord) or from an exchange before its line is read back (FromExchange), read from a capture
// store (ReadRecords, ReadAvailableRecords) and written as JSON (AppendJSON, WriteJSON,
// MarshalJSON) in NeMo Gym's key order. The keys of the line's envelope and of the record come from
// internal/schema, the one table of both.
//
// It owns what a record says about a call: the envelope decoder of a capture line, and the
// token, cache, tool-call, reasoning and finish-reason extraction across the Responses, Chat
// Completions and Anthropic Messages shapes (ExtractTokenStats normalizes a provider usage object
// on its own, as the gateway's access log uses it).
//
// It sits below everything that shows or ships records (gateway, view, otelexport) and below the
// root package, which merges records into rollout records; it imports only capture (the line
// format and the store), rollout, internal/schema and internal/jsonscan, so a program that only
// needs records does not link the merge. docs/architecture.md draws the layers.
//
// JSON is read with internal/jsonscan's strict scanner by byte offsets (see scan.go): payloads are
// never decoded into maps, and a record read from a line aliases it.
package record
