package modelcalls

import (
	"context"
	"fmt"
	"time"

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
		if _, err := ClearRollout(context.Background(), stores, id, 0, true); err != nil {
			return fmt.Errorf("record %d (rollout %s): %w", i+1, id, err)
		}
	}
	return nil
}

// RolloutClear is what ClearRollout did for one rollout.
type RolloutClear struct {
	// Live is the number of the rollout's capture writes (live claims) still in flight when the
	// wait ended: 0 when there were none or they finished in time.
	Live int
	// Cleared is false when Live is above 0 and force was not set: then nothing was removed.
	Cleared bool
	// Reports holds what each store's clear found, in the order of the stores (nil when not
	// Cleared): capture.ClearReport.InFlight calls whose lines go to the orphan file, and whether
	// there was anything to remove.
	Reports []capture.ClearReport
}

// Removed reports whether any store had a capture file, marker or claim of the rollout to remove.
func (c RolloutClear) Removed() bool {
	for _, r := range c.Reports {
		if r.Removed {
			return true
		}
	}
	return false
}

// ClearRollout is the clear of one rollout, used by ClearCaptures and by `modelcalls clear`: it
// waits up to wait for rollout id's capture writes in flight in any of stores (AwaitStores, polling
// every CaptureDrainPoll; wait <= 0 looks once), then removes its capture from every store
// (capture.Store.ClearRollout). When writes are still in flight after the wait, the rollout is
// cleared only with force, and the lines of those writes go to <id>.capture.orphaned.jsonl instead
// of the next attempt's capture; force with wait <= 0 clears without looking at the claims. The
// first error (ctx's, a store's) stops it, with what was done until then.
func ClearRollout(ctx context.Context, stores []*capture.Store, id string, wait time.Duration, force bool) (RolloutClear, error) {
	var c RolloutClear
	if !force || wait > 0 {
		claims, _, err := AwaitStores(ctx, stores, id, wait, CaptureDrainPoll)
		if err != nil {
			return c, err
		}
		c.Live = claims.Live
		if c.Live > 0 && !force {
			return c, nil
		}
	}
	c.Cleared = true
	c.Reports = make([]capture.ClearReport, 0, len(stores))
	for _, s := range stores {
		rep, err := s.ClearRollout(id)
		if err != nil {
			return c, err
		}
		c.Reports = append(c.Reports, rep)
	}
	return c, nil
}
