package modelcalls

import (
	"fmt"

	"github.com/modelcalls/modelcalls/capture"
)

// ClearCaptures ports clear_model_call_captures_for_rollouts: before dispatch, it removes the stale
// capture of every record's rollout id (capture file, incomplete marker and dead processes' claims)
// in every dir, so a fresh run or a retry never appends to an earlier attempt's capture. It does not
// wait for calls still in flight: their lines go to <id>.capture.orphaned.jsonl (capture.Store.
// ClearRollout), never to the next attempt's capture; `modelcalls clear` waits first. records are
// rollout records, one JSON object each. No dirs is a no-op; records without a derivable id are
// skipped; dirs are created when missing (capture.Open). Every error propagates, the first one
// stopping the clear: a record that is not a JSON object, an unusable or invalid id, a dir that
// cannot be created, a file that cannot be removed.
func ClearCaptures(records [][]byte, dirs []string) error {
	if len(dirs) == 0 {
		return nil
	}
	stores := make([]*capture.Store, 0, len(dirs))
	for _, d := range dirs {
		s, err := capture.Open(d)
		if err != nil {
			return err
		}
		stores = append(stores, s)
	}
	for i, rec := range records {
		id, ok, err := RolloutID(rec)
		if err != nil {
			return fmt.Errorf("record %d: %w", i+1, err)
		}
		if !ok {
			continue
		}
		for _, s := range stores {
			if err := s.Clear(id); err != nil {
				return fmt.Errorf("record %d (rollout %s): %w", i+1, id, err)
			}
		}
	}
	return nil
}
