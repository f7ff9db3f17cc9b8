// Package modelcalls turns captured model calls into per-call evidence on rollout records. It is the
// Go port of NeMo Gym's nemo_gym.observability.model_calls module (the seed) and owns:
//
//   - ModelCallRecord and building it from one capture line (BuildRecord): token, cache, tool-call,
//     reasoning, finish-reason, provenance and client-id extraction across the Responses, Chat
//     Completions and Anthropic Messages shapes;
//   - reading records from a capture.Store, strictly or tolerantly (ReadRecords, ReadAvailableRecords);
//   - per-rollout aggregation (AggregateRecords, AggregateMetrics);
//   - merging the evidence into rollout records (Merger, MergeRecord): quiescence wait, gaps, the
//     ownership join of ng_agent_observations, and a byte-preserving splice of ng_model_call_capture
//     into the record;
//   - clearing stale captures before dispatch (ClearCaptures) and the run-wide config helpers
//     (ObservabilityEnabled, CaptureDirsFromConfig).
//
// JSON is handled by a small strict scanner over byte offsets (scan.go): payloads are never decoded
// into maps, and every byte of a rollout record outside the spliced fields is kept as it was.
// Every place where the port differs from NeMo Gym, and every decision NeMo Gym leaves open, is in
// docs/records-and-merge.md.
package modelcalls
