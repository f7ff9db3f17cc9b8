package cli

import (
	"fmt"
	"slices"
	"strings"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
)

// unknownErrorValues returns the --error values that are neither "any", "none" nor a known
// category, each once, in the order given.
func (f *callFilter) unknownErrorValues() []string {
	var unknown []string
	for _, e := range f.errors {
		if e == "any" || e == "none" || capture.IsCategory(e) || slices.Contains(unknown, e) {
			continue
		}
		unknown = append(unknown, e)
	}
	return unknown
}

// checkErrorValues validates --error for calls and stats. "any", "none" and the known categories
// are accepted without reading anything. Another value is accepted only when some call of the
// capture dir carries it (a producer other than modelcalls may write categories of its own): the
// calls already read (have) are looked at first, then every rollout of each of dirs, until each unknown
// value is found. A value no call carries is almost always a typo, which would otherwise give an
// empty result and exit 0: it is a usage error listing the known categories and those the dir's
// calls carry. Lines and rollouts that cannot be read are passed over here; the command reports
// them when it reads them itself.
func (f *callFilter) checkErrorValues(dirs []string, have []modelcalls.ModelCallRecord) error {
	unknown := f.unknownErrorValues()
	if len(unknown) == 0 {
		return nil
	}
	seen := map[string]bool{}
	missing := func() []string {
		var m []string
		for _, u := range unknown {
			if !seen[u] {
				m = append(m, u)
			}
		}
		return m
	}
	note := func(records []modelcalls.ModelCallRecord) {
		for i := range records {
			if c := records[i].ErrorCategory; c != nil {
				seen[*c] = true
			}
		}
	}
	note(have)
	if len(missing()) == 0 {
		return nil
	}
	for _, dir := range dirs {
		store, err := openCaptureDir(dir)
		if err != nil {
			return err
		}
		ids, err := store.Rollouts()
		if err != nil {
			return withExit(ExitFailure, err)
		}
		for _, id := range ids {
			records, _, err := modelcalls.ReadAvailableRecords(store, id)
			if err != nil {
				continue
			}
			note(records)
			if len(missing()) == 0 {
				return nil
			}
		}
	}
	dir := strings.Join(dirs, ", ")
	quoted := make([]string, 0, len(unknown))
	for _, m := range missing() {
		quoted = append(quoted, fmt.Sprintf("%q", m))
	}
	inDir := "no call in " + dir + " has an error category"
	if len(seen) > 0 {
		cats := make([]string, 0, len(seen))
		for c := range seen {
			cats = append(cats, c)
		}
		slices.Sort(cats)
		inDir = "categories the calls in " + dir + " have: " + strings.Join(cats, ", ")
	}
	return usageErrorf("--error %s: not a known error category, nor one a call in %s has; want any, none or one of: %s; %s",
		strings.Join(quoted, ", "), dir, strings.Join(capture.Categories(), ", "), inDir)
}
