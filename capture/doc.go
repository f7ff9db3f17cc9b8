// Package capture owns the capture store: a directory of per-rollout, append-only JSONL files, one
// exchange (a captured model call) per line, file-compatible with NeMo Gym's CaptureStore
// (reference §3, SPEC §4).
//
// For a rollout id R the directory holds:
//
//	R.capture.jsonl       one exchange per line, appended under an exclusive flock, then fsynced
//	R.capture.incomplete  empty marker: at least one capture write for R failed
//	R.capture.claims/     one file per model call whose capture write is still outstanding
//
// Appends repair a torn tail (a last line left without its newline by a crash) before writing, so a
// torn line damages only itself. Reads take a shared flock, so they never see half an append; the
// strict read fails on the first damaged line, the tolerant read counts damaged lines and keeps going.
package capture
