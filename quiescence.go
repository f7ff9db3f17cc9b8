package modelcalls

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/modelcalls/modelcalls/capture"
)

// AwaitQuiescence ports await_model_call_capture_quiescence: it waits until no live claim (an
// outstanding capture write) of rollout id exists in any of dirs, checking every poll, for at
// most timeout. It returns true as soon as there is none (at once when there never was) and false on
// timeout; a merge turns the latter into a model_call_capture_pending gap rather than a silent
// omission. Stale claims (their process is gone, or the claim cannot be read) do not hold the wait,
// nor do claims a clear listed as in flight (their lines go to the orphan file, not to this capture). Dirs that do not exist hold
// no claims. When ctx ends first it returns false and ctx's error; a claims directory that cannot be
// listed is returned as an error too. timeout <= 0 checks once; poll <= 0 means CaptureDrainPoll.
func AwaitQuiescence(ctx context.Context, id string, dirs []string, timeout, poll time.Duration) (bool, error) {
	stores, err := existingStores(dirs)
	if err != nil {
		return false, err
	}
	_, quiet, err := AwaitStores(ctx, stores, id, timeout, poll)
	return quiet, err
}

// AwaitStores is AwaitQuiescence over stores already open (the merge's, `modelcalls clear`'s): it
// also returns the claim count of the last check, whose Live is above 0 when the wait timed out or
// ctx ended. timeout <= 0 checks once; poll <= 0 means CaptureDrainPoll.
func AwaitStores(ctx context.Context, stores []*capture.Store, id string, timeout, poll time.Duration) (capture.ClaimCount, bool, error) {
	if poll <= 0 {
		poll = CaptureDrainPoll
	}
	deadline := time.Now().Add(max(timeout, 0))
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var total capture.ClaimCount
		for _, s := range stores {
			c, err := s.Claims(id)
			if err != nil {
				return total, false, err
			}
			total.Add(c)
		}
		if total.Live == 0 {
			return total, true, nil
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return total, false, nil
		}
		wait := min(poll, remaining)
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return total, false, ctx.Err()
		case <-timer.C:
		}
	}
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
