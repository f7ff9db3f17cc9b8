// Package rollout owns rollout identity: deriving a rollout id from a rollout record
// (_ng_rollout_id, _ng_task_index, _ng_rollout_index, _ng_attempt_index), validating it, the
// /ng-rollout/<rollout_id> URL prefix that keys captured model calls, and the types a merged rollout
// record carries as evidence: gaps and agent observations.
//
// The rules follow NeMo Gym's rollout_correlation module with two differences of ours: a trailing
// newline is never accepted in an id (Python's "$" would match before one), and a derived id that is
// not valid is an error rather than a file name.
package rollout
