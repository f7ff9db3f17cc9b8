// Package capture owns the capture store: a directory of per-rollout, append-only JSONL files, one
// exchange (a captured model call) per line, file-compatible with NeMo Gym's CaptureStore
// (docs/capture-store.md).
//
// For a rollout id R the directory holds:
//
//	R.capture.jsonl           one exchange per line, appended under an exclusive flock, then fdatasynced
//	R.capture.incomplete      empty marker: at least one capture write for R failed
//	R.capture.cleared         model calls that were in flight when R was last cleared (rare)
//	R.capture.orphaned.jsonl  the lines of those calls, kept apart from the next attempt's capture
//	.claim-slots/*.slots      one file per writing process: a 512-byte slot per outstanding write
//
// Capture files stay open across appends (bounded LRU) and concurrent appends to one file share one
// write and one sync (group commit). No symlink in the dir is ever followed. Appends repair a torn
// tail (a last line left without its newline by a crash) before writing, so a torn line damages only
// itself. Reads take a shared flock, so they never see half an append; the
// strict read fails on the first damaged line, the tolerant read counts damaged lines and keeps going.
package capture
