// Package modelcalls turns captured model calls into per-call evidence on rollout records. It is the
// Go port of NeMo Gym's nemo_gym.observability.model_calls module (the seed) and its public face:
//
//   - ModelCallRecord and building it from one capture line (BuildRecord), reading records from a
//     capture.Store strictly or tolerantly (ReadRecords, ReadAvailableRecords): aliases of and
//     wrappers around package record, which owns the record model (token, cache, tool-call,
//     reasoning, finish-reason, provenance and client-id extraction);
//   - per-rollout aggregation (AggregateRecords, AggregateMetrics);
//   - merging the evidence into rollout records (Merger, MergeRecord): quiescence wait, gaps, the
//     ownership join of ng_agent_observations, and a byte-preserving splice of ng_model_call_capture
//     into the record;
//   - clearing stale captures before dispatch (ClearCaptures, ClearRollout) and waiting for calls
//     in flight (AwaitQuiescence, AwaitStores): the one implementation `modelcalls clear` and
//     `modelcalls merge` use too;
//   - the run-wide config helpers (ObservabilityEnabled, CaptureDirsFromConfig).
//
// JSON is handled by a small strict scanner over byte offsets (internal/jsonscan): payloads are never
// decoded into maps, and every byte of a rollout record outside the spliced fields is kept as it was.
// docs/architecture.md draws the packages and which may import which.
// Every place where the port differs from NeMo Gym, and every decision NeMo Gym leaves open, is in
// docs/records-and-merge.md.
package modelcalls
