package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// goalViewFirstPage is the longest wait, in seconds, from starting the viewer over a
// 100,000-rollout capture dir to its first rollout-list page served.
const goalViewFirstPage = 2.0

// viewResult is the view row: view's BenchmarkRolloutListFirstPage (view/bench_test.go), which
// writes 100,000 rollouts of two calls each, starts the viewer on them and times the first page
// of the rollout list (/, app.js and a 50-row /api/rollouts) and the complete index.
type viewResult struct {
	firstPage, fullIndex float64 // seconds
}

func (r *runner) runViewRow() error {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", "^BenchmarkRolloutListFirstPage$", "-benchtime", "1x", "./view/")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("view benchmark: %w\n%s", err, tail(out.Bytes(), 2000))
	}
	v := &viewResult{firstPage: -1, fullIndex: -1}
	for line := range strings.SplitSeq(out.String(), "\n") {
		if !strings.HasPrefix(line, "BenchmarkRolloutListFirstPage") {
			continue
		}
		f := strings.Fields(line)
		for i := 1; i+1 < len(f); i++ {
			x, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "s-first-page":
				v.firstPage = x
			case "s-full-index":
				v.fullIndex = x
			}
		}
	}
	if v.firstPage < 0 {
		return fmt.Errorf("view benchmark: no s-first-page figure in its output:\n%s", tail(out.Bytes(), 2000))
	}
	r.view = v
	return nil
}

func (r *runner) viewChecks() []check {
	v := r.view
	if v == nil {
		return nil
	}
	return []check{{
		row: "8 view", figure: "first rollout-list page of a 100,000-rollout capture dir (viewer start to page served)",
		baseline: fmt.Sprintf("the whole index: %.1f s", v.fullIndex),
		result:   fmt.Sprintf("%.2f s", v.firstPage), goal: fmt.Sprintf("< %.0f s", goalViewFirstPage),
		ok: boolp(v.firstPage < goalViewFirstPage),
	}}
}
