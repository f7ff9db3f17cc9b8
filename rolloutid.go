package modelcalls

import (
	"github.com/modelcalls/modelcalls/rollout"
)

// RolloutID derives the rollout id of a rollout record given as one JSON object, from its top-level
// _ng_* fields as NeMo Gym's maybe_rollout_id_from_run_body does (rollout.FromRecord has the rule:
// an explicit _ng_rollout_id wins, else "<_ng_task_index>-<_ng_rollout_index>", plus "-a<n>" when
// _ng_attempt_index is above 0). ok is false, with a nil error, when the record has no derivable
// id. A line that is not a JSON object, or an unusable or invalid id, is an error (wrapping
// rollout.ErrInvalidID for the latter): unlike NeMo Gym, an id that is not a valid file name is
// never used as one.
func RolloutID(record []byte) (id string, ok bool, err error) {
	return rollout.FromLine(record)
}
