//go:build e2e && unix

package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// compactionCase is one harness's compacted conversation against the scripted upstream: its runs
// in order, all under one rollout, each continuing the harness's session, and the lineage the
// calls must get.
type compactionCase struct {
	harness string
	// runs are the harness arguments of each run (the first one's command also writes the
	// harness's config), and what each must print ("" for nothing, else the answer).
	runs   [][]string
	prints []bool
	// want is each call's relation, parent (index of an earlier call, -1 for none) and whether it
	// is on the main chain.
	want []compactionCall
}

type compactionCall struct {
	relation string
	parent   int
	main     bool
}

// compactionCases: Claude Code compacts with /compact (print mode, continuing the session) and
// keeps the latest answer out of the summary request, so that request is a fork of the first call;
// Codex compacts on its own after a turn whose usage passes the post-turn threshold of the context
// window given on the command line (the scripted upstream reports about 10,300 tokens for the
// first turn's last call, over 20% of 40,000), with a summary request extending the turn's last
// call, and the resumed run's first call keeps the user's messages before the summary. The main
// chain crosses the compaction and ends in the last call; for Claude Code it runs through the
// summary request, so the first prompt's answer is off it.
func compactionCases() []compactionCase {
	return []compactionCase{
		{
			harness: "claude-code",
			runs:    [][]string{{"-p", harnessPrompt}, {"-p", "-c", "/compact"}, {"-p", "-c", harnessPrompt}},
			prints:  []bool{true, false, true},
			want: []compactionCall{
				{"root", -1, true}, {"extends", 0, false}, {"fork", 0, true},
				{"compaction", 2, true}, {"extends", 3, true},
			},
		},
		{
			harness: "codex",
			runs: [][]string{
				{"exec", "--skip-git-repo-check", "-c", "model_context_window=40000",
					"-c", "model_post_turn_compact_threshold_percent=20", harnessPrompt},
				{"exec", "--skip-git-repo-check", "resume", "--last", harnessPrompt},
			},
			prints: []bool{true, true},
			want: []compactionCall{
				{"root", -1, true}, {"extends", 0, true}, {"extends", 1, true},
				{"compaction", 2, true}, {"extends", 3, true},
			},
		},
	}
}

// runScriptedCompact runs each compaction case whose harness is selected against the scripted
// upstream (behind a Tap), every run under `modelcalls run --upstream`. Each run must exit 0 and
// print the answer (or nothing, for /compact); the calls the upstream saw must be the capture's
// lines, the summary request answered with SummaryAnswer; and `modelcalls lineage --format json`
// must give the relations, parents and main chain of the case.
func (s *suite) runScriptedCompact(t *testing.T) {
	const name = "scripted-compact"
	dir := filepath.Join(s.work, name)
	project := filepath.Join(dir, "project")
	nonce := newNonce(t)
	writeFile(t, filepath.Join(project, "hello.txt"), nonce+"\n")
	sc := &Scripted{FilePath: filepath.Join(project, "hello.txt")}
	up := capturetest.NewServer(t, sc.ServeHTTP)
	tap, front := tapIn(t, up.URL)
	capDir := filepath.Join(dir, "capture")
	runs := map[string]harnessRun{}
	for _, r := range harnessRuns() {
		runs[r.name] = r
	}
	for _, tc := range compactionCases() {
		exe, ok := s.harnesses[tc.harness]
		if !ok {
			continue
		}
		t.Run(tc.harness, func(t *testing.T) {
			run := runs[tc.harness]
			id := "e2e-" + name + "-" + tc.harness
			home := filepath.Join(dir, "runs", tc.harness, "home")
			res := &runResult{run: tc.harness + "-compact", dialect: run.dialect, rolloutID: id}
			_, env := run.command(t, home, run.baseURL(front.URL), harnessPrompt) // writes the config
			var served []Served
			for k, harnessArgs := range tc.runs {
				args := append([]string{"run", "--rollout", id, "--upstream", front.URL, "--capture-dir", capDir,
					"--name", proxyName, "--", exe}, harnessArgs...)
				started := time.Now()
				stdout, stderr, err := runProcess(s.bin, args, env, home, project, harnessTimeout)
				res.wall += time.Since(started)
				writeFile(t, filepath.Join(dir, "runs", tc.harness, fmt.Sprintf("stdout.%d", k)), stdout)
				writeFile(t, filepath.Join(dir, "runs", tc.harness, fmt.Sprintf("stderr.%d", k)), stderr)
				if err != nil {
					t.Fatalf("run %d: %s: %v\nstdout:\n%s\nstderr (tail):\n%s", k, strings.Join(args, " "), err, stdout, tail(stderr, 40))
				}
				want := ""
				if tc.prints[k] {
					want = AnswerForNonce(nonce)
				}
				if got := strings.TrimRight(stdout, "\r\n"); got != want {
					t.Errorf("run %d printed %q, want %q", k, got, want)
				}
				for _, e := range tap.Take() {
					if e.Dialect() != "" {
						res.calls = append(res.calls, e)
					}
				}
				served = append(served, sc.Take()...)
			}
			checkNoGapFiles(t, capDir, id)
			if n := captureLines(t, capDir, id); n != len(res.calls) || n != len(tc.want) {
				t.Fatalf("capture has %d lines, the upstream saw %d model calls, want %d", n, len(res.calls), len(tc.want))
			}
			var summaries int
			for _, sv := range served {
				if sv.Text == SummaryAnswer(nonce) {
					summaries++
				}
			}
			if summaries != 1 {
				t.Errorf("the upstream answered %d summary requests, want 1", summaries)
			}
			res.records = readRecords(t, s.bin, capDir, id)
			got := lineageOf(t, s.bin, capDir, id)
			if !slices.Equal(got, tc.want) {
				t.Errorf("lineage %v, want %v", got, tc.want)
			}
			s.report.note(fmt.Sprintf("%s: %s lineage %v", name, tc.harness, got))
			s.report.add(name, res)
		})
	}
}

// lineageOf runs `modelcalls lineage --format json` and gives each call's relation, parent index
// and main-chain flag.
func lineageOf(t *testing.T, bin, capDir, id string) []compactionCall {
	t.Helper()
	out, err := exec.Command(bin, "lineage", "--capture-dir", capDir, id, "--format", "json").Output()
	if err != nil {
		t.Fatalf("modelcalls lineage: %v", err)
	}
	var l struct {
		Calls []struct {
			ID        string  `json:"model_call_id"`
			Parent    *string `json:"parent_call_id"`
			Relation  string  `json:"relation"`
			MainChain bool    `json:"main_chain"`
		} `json:"calls"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		t.Fatalf("lineage JSON: %v", err)
	}
	var calls []compactionCall
	for _, c := range l.Calls {
		parent := -1
		for j, p := range l.Calls {
			if c.Parent != nil && p.ID == *c.Parent {
				parent = j
			}
		}
		calls = append(calls, compactionCall{c.Relation, parent, c.MainChain})
	}
	return calls
}
