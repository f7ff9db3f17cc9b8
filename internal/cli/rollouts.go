package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/editdist"
	"github.com/modelcalls/modelcalls/internal/ordered"
)

// rolloutSummary is one line of the rollout list `calls DIR` and `show DIR` print when no rollout
// id is given.
type rolloutSummary struct {
	ID           string   `json:"rollout_id"`
	Calls        int      `json:"calls"`
	Errors       int      `json:"errors"`        // calls with an error_category
	LastActivity *float64 `json:"last_activity"` // latest completed_at (else started_at), seconds since the Unix epoch; null when no call has one
	Damaged      int      `json:"damaged_lines"` // capture lines that could not be read
	Incomplete   bool     `json:"incomplete"`    // a capture write failed (marker present)
	Dir          string   `json:"capture_dir"`   // the dir it is read from (the first that holds it)
	err          error    `json:"-"`             // the rollout could not be read
}

// rolloutIDs lists the rollouts of dirs, each from the first dir that holds it (as merge reads
// them), sorted by id; from maps an id to the store it is read from.
func rolloutIDs(dirs []string) (ids []string, from map[string]*capture.Store, err error) {
	from = map[string]*capture.Store{}
	for _, dir := range dirs {
		store, err := openCaptureDir(dir)
		if err != nil {
			return nil, nil, err
		}
		dirIDs, err := store.Rollouts()
		if err != nil {
			return nil, nil, withExit(ExitFailure, err)
		}
		for _, id := range dirIDs {
			if _, ok := from[id]; !ok {
				from[id] = store
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids, from, nil
}

// readRollout reads the records of rollout id that can be read (damaged counts the lines that
// cannot) and whether its capture has an incomplete marker, as the rollout list and stats report
// them.
func readRollout(store *capture.Store, id string) (records []modelcalls.ModelCallRecord, damaged int, incomplete bool, err error) {
	_, incomplete, err = store.Stat(id)
	if err != nil {
		return nil, 0, false, err
	}
	records, damaged, err = modelcalls.ReadAvailableRecords(store, id)
	return records, damaged, incomplete, err
}

// summarizeRollout reads rollout id from store for the rollout list.
func summarizeRollout(store *capture.Store, id string) rolloutSummary {
	rs := rolloutSummary{ID: id, Dir: store.Dir()}
	records, damaged, incomplete, err := readRollout(store, id)
	rs.Incomplete = incomplete
	if err != nil {
		rs.err = err
		return rs
	}
	rs.Calls, rs.Damaged = len(records), damaged
	for i := range records {
		r := &records[i]
		if r.ErrorCategory != nil {
			rs.Errors++
		}
		at := r.CompletedAt
		if at == nil {
			at = r.StartedAt
		}
		if at != nil && (rs.LastActivity == nil || *at > *rs.LastActivity) {
			rs.LastActivity = at
		}
	}
	return rs
}

// listRollouts prints the rollouts of dirs, one line each (id, calls, errors, last activity), for
// cmd (calls or show) given a capture dir but no rollout id. format is table, tsv or json (one
// object per line). Rollouts that cannot be read are named on stderr and the exit is 1.
func listRollouts(ctx context.Context, s *Streams, cmd string, dirs []string, format string) error {
	if err := checkCaptureDirs(dirs); err != nil {
		return err
	}
	ids, from, err := rolloutIDs(dirs)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		fmt.Fprintf(s.ErrOut, "modelcalls %s: no rollouts in %s yet (no <rollout_id>%s files): the gateway writes one per rollout once a call comes with the /ng-rollout/<rollout_id>/ prefix\n",
			cmd, strings.Join(dirs, ", "), capture.CaptureSuffix)
		return nil
	}
	var list []rolloutSummary
	workers := max(2, runtime.GOMAXPROCS(0))
	failed := 0
	err = ordered.Each(ctx, workers, ids,
		func(_ context.Context, id string) rolloutSummary { return summarizeRollout(from[id], id) },
		func(rs rolloutSummary) error {
			if rs.err != nil {
				failed++
				fmt.Fprintf(s.ErrOut, "modelcalls %s: rollout %s not listed: %v\n", cmd, rs.ID, rs.err)
				return nil
			}
			list = append(list, rs)
			return nil
		})
	if err != nil {
		return withExit(ExitFailure, err)
	}
	w := bufio.NewWriter(s.Out)
	switch format {
	case formatJSON:
		enc := json.NewEncoder(w)
		for _, rs := range list {
			enc.Encode(rs)
		}
	case formatTSV:
		rows := make([][]string, len(list))
		for i, rs := range list {
			last := ""
			if rs.LastActivity != nil {
				last = strconv.FormatFloat(*rs.LastActivity, 'f', 3, 64)
			}
			rows[i] = []string{rs.ID, strconv.Itoa(rs.Calls), strconv.Itoa(rs.Errors), last,
				strconv.Itoa(rs.Damaged), strconv.FormatBool(rs.Incomplete), rs.Dir}
		}
		writeTSV(w, []string{"rollout_id", "calls", "errors", "last_activity", "damaged_lines", "incomplete", "capture_dir"}, rows)
	default:
		rows := make([][]string, len(list))
		for i, rs := range list {
			note := ""
			if rs.Damaged > 0 {
				note = plural(rs.Damaged, "damaged line", "damaged lines")
			}
			if rs.Incomplete {
				note = strings.TrimPrefix(note+", incomplete", ", ")
			}
			rows[i] = []string{rs.ID, strconv.Itoa(rs.Calls), strconv.Itoa(rs.Errors), activityCell(rs.LastActivity), note}
		}
		if err := renderTable(w, []string{"rollout", "calls", "errors", "last activity", "note"},
			[]bool{false, true, true, false, false}, rows, outputWidth(s.Out), []int{0, 4}); err != nil {
			return withExit(ExitFailure, err)
		}
		fmt.Fprintf(w, "%s in %s; modelcalls %s %s ROLLOUT_ID shows one\n", plural(len(list), "rollout", "rollouts"),
			strings.Join(dirs, ", "), cmd, dirs[0])
	}
	if err := w.Flush(); err != nil {
		return withExit(ExitFailure, fmt.Errorf("write output: %w", err))
	}
	if failed > 0 {
		return withExit(ExitFailure, fmt.Errorf("%s could not be read", plural(failed, "rollout", "rollouts")))
	}
	return nil
}

// activityCell shows a wall-clock time in seconds since the Unix epoch as local date and time.
func activityCell(at *float64) string {
	if at == nil {
		return unknownCell
	}
	sec, frac := math.Modf(*at)
	return time.Unix(int64(sec), int64(frac*1e9)).Local().Format("2006-01-02 15:04:05")
}

// noRolloutArg reports whether calls or show were given a capture dir but no rollout id:
// --capture-dir and no argument, or one argument that is a directory without --capture-dir (one
// that is not stays the usage error of a missing capture dir: `show r1`). It returns the dirs to
// list.
func noRolloutArg(flagDirs, args []string) ([]string, bool) {
	switch {
	case len(flagDirs) > 0 && len(args) == 0:
		return flagDirs, true
	case len(flagDirs) == 0 && len(args) == 1:
		if isDir(args[0]) {
			return args, true
		}
	}
	return nil, false
}

// maxSuggestions is how many rollout ids "did you mean" offers.
const maxSuggestions = 3

// similarRollouts returns up to maxSuggestions ids of dirs like id (editdist.Nearest: a typo away,
// or one contains the other), closest first; total is how many rollouts dirs hold.
func similarRollouts(dirs []string, id string) (like []string, total int) {
	ids, _, err := rolloutIDs(dirs)
	if err != nil {
		return nil, 0
	}
	return editdist.Nearest(id, ids, maxSuggestions), len(ids)
}

// unknownRolloutHint is what the "no capture" error of a rollout adds: the ids like it, or how to
// list the rollouts there are.
func unknownRolloutHint(cmd string, dirs []string, id string) string {
	like, total := similarRollouts(dirs, id)
	switch {
	case len(like) > 0:
		return didYouMean(like)
	case total > 0:
		return fmt.Sprintf("; %s holds %s (modelcalls %s %s lists them)", strings.Join(dirs, ", "),
			plural(total, "rollout", "rollouts"), cmd, dirs[0])
	}
	return ""
}
