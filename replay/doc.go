// Package replay serves a captured run back: a model call made under /ng-rollout/<rollout_id>/
// is answered from that rollout's capture file with the recorded status and body bytes, streams
// event by event on the recorded schedule, so an agent harness re-runs deterministically without a
// model. Server is the http.Handler (matching, timing, misses, metrics); Recapture puts the
// capture gateway in front of it to capture the re-run. docs/replay.md has the decisions.
package replay
