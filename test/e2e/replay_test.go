//go:build e2e && unix

package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// replayHarnesses are the harnesses whose runs are replayed after their upstream is stopped.
// Codex's exec tool output (sent back in the next call) carries a random chunk id and the wall
// time, so its second call matches strictly only with codexIgnore (docs/replay.md).
var replayHarnesses = []string{"pi", "claude-code", "codex", "gemini-cli"}

// codexIgnore is the replay rule that leaves Codex's chunk id and wall time out of strict matching.
const codexIgnore = `input.output~(Chunk ID|Wall time): [^\n]*`

var (
	replayAddrRE = regexp.MustCompile(`msg="modelcalls replay listening" addr=(127\.0\.0\.1:[0-9]+)`)
	adminAddrRE  = regexp.MustCompile(`admin_addr=(127\.0\.0\.1:[0-9]+)`)
)

// startReplay starts `modelcalls replay` on a free port with an admin listener and waits for its
// listening line; the admin address is logged on a line before it. The log is also written to
// logPath; stdout (the summary at exit) is kept apart in p.stdout.
func startReplay(t *testing.T, bin, logPath string, args ...string) *modelcallsProc {
	t.Helper()
	return startModelcalls(t, bin, modelcallsRun{
		args:        append([]string{"replay", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, args...),
		logPath:     logPath,
		stdoutApart: true,
		listening: func(line string) (base, admin string) {
			if m := adminAddrRE.FindStringSubmatch(line); m != nil {
				admin = "http://" + m[1]
			}
			if m := replayAddrRE.FindStringSubmatch(line); m != nil {
				base = "http://" + m[1]
			}
			return base, admin
		},
	})
}

// freshHome moves the directory home to home+suffix and creates an empty one in its place.
func freshHome(t *testing.T, home, suffix string) {
	t.Helper()
	if err := os.Rename(home, home+suffix); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
}

// checkReplay stops the rig's upstream, starts `modelcalls replay` on the rig's capture (with a
// re-capture), and re-runs every replayable harness run through a Tap in front of it: the
// harness must print what it printed against the model, receive exactly the recorded bytes, and
// the re-capture must compare with the original call for call. Then a changed prompt must get a
// miss naming the difference.
func (s *suite) checkReplay(t *testing.T, rig *upstreamRig, runs []*runResult) {
	var todo []*runResult
	for _, r := range runs {
		if r.harness != nil && slices.Contains(replayHarnesses, r.harness.harness) {
			todo = append(todo, r)
		}
	}
	if len(todo) == 0 {
		t.Skip("no replayable harness run")
	}
	if rig.stopUpstream != nil {
		rig.stopUpstream() // from here on no model answers: only the capture
	}
	dir := filepath.Join(filepath.Dir(rig.captureDir), "replay")
	outDir := filepath.Join(dir, "capture")
	started := time.Now()
	rp := startReplay(t, rig.bin, filepath.Join(dir, "replay.log"),
		"--capture-dir", rig.captureDir, "--capture-dir-out", outDir, "--name", proxyName, "--ignore", codexIgnore)
	tap, front := tapIn(t, rp.base)

	served, changedRuns := 0, 0
	for _, res := range todo {
		t.Run(res.run, func(t *testing.T) {
			run := *res.harness
			writeFile(t, filepath.Join(res.project, "hello.txt"), res.nonce+"\n")
			rollBase := front.URL + "/ng-rollout/" + res.rolloutID
			// The same HOME path as the recorded run, fresh: Claude Code writes its home's path
			// into the system prompt. The recorded run's home is kept beside it.
			home := res.home
			freshHome(t, home, "-recorded")
			args, env := run.command(t, home, run.baseURL(rollBase), harnessPrompt)
			exe, args := run.argv(res.exe, rig.bin, front.URL, res.rolloutID, args)
			tap.Take()
			t0 := time.Now()
			stdout, stderr, err := runProcess(exe, args, env, home, res.project, harnessTimeout)
			wall := time.Since(t0)
			entries := tap.Take()
			if err != nil {
				t.Fatalf("replayed %s: %v\nstdout:\n%s\nstderr (tail):\n%s\nreplay log (tail):\n%s", run.harness, err, stdout,
					tail(stderr, 30), tail(rp.log.String(), 20))
			}
			if stdout != res.output {
				t.Errorf("replayed run printed %q, against the model it printed %q", stdout, res.output)
			}
			t.Logf("replayed %s in %v (against the model: %v)", res.run, wall.Round(time.Millisecond), res.wall.Round(time.Millisecond))

			orig := capturetest.ReadDir(t, rig.captureDir, res.rolloutID)
			var calls []TapEntry
			for _, e := range entries {
				if DialectOfPath(strings.TrimPrefix(e.Path, "/ng-rollout/"+res.rolloutID)) != "" && e.Method == http.MethodPost {
					calls = append(calls, e)
				}
			}
			if len(calls) != len(orig) {
				t.Fatalf("the replayed harness made %d model calls, the capture has %d", len(calls), len(orig))
			}
			served += len(calls)
			for i, e := range calls {
				if orig[i].StatusCode == nil || e.Status != *orig[i].StatusCode {
					t.Errorf("call %d: status %d, recorded %v", i, e.Status, derefAny(orig[i].StatusCode))
				}
				if !bytes.Equal(e.RespBody, orig[i].Body()) {
					t.Errorf("call %d: the harness received %d bytes that differ from the %d recorded\n got: %.300q\nwant: %.300q",
						i, len(e.RespBody), len(orig[i].Body()), e.RespBody, orig[i].Body())
				}
				if id := e.RespHeader.Get("x-nemo-gym-model-call-id"); id == "" || id == orig[i].ModelCallID {
					t.Errorf("call %d: model call id header %q: want the re-capture's own id", i, id)
				}
			}

			// The re-capture: one line per call, the recorded bytes, provenance local / replay; and
			// its records compare with the original's call for call.
			re := capturetest.ReadDir(t, outDir, res.rolloutID)
			if len(re) != len(orig) {
				t.Fatalf("re-capture has %d lines, want %d", len(re), len(orig))
			}
			for i := range re {
				if !bytes.Equal(re[i].Body(), orig[i].Body()) {
					t.Errorf("re-captured call %d: body differs from the original capture", i)
				}
				if deref(re[i].ResponseSource) != "local" || deref(re[i].LocalResponseReason) != "replay" ||
					re[i].UpstreamAttempted == nil || *re[i].UpstreamAttempted {
					t.Errorf("re-captured call %d: provenance %v/%v/%v, want local/false/replay", i,
						deref(re[i].ResponseSource), derefAny(re[i].UpstreamAttempted), deref(re[i].LocalResponseReason))
				}
			}
			a, b := readRecords(t, rig.bin, rig.captureDir, res.rolloutID), readRecords(t, rig.bin, outDir, res.rolloutID)
			for i := range a {
				x, y := a[i], b[i]
				if !eqStr(x.ResponseID, y.ResponseID) || !eqInt(x.TokensIn, y.TokensIn) || !eqInt(x.TokensOut, y.TokensOut) ||
					!eqStr(x.FinishReason, y.FinishReason) || mustJSON(x.ToolCalls) != mustJSON(y.ToolCalls) ||
					!eqStr(x.ReasoningContent, y.ReasoningContent) || !eqStr(x.ErrorCategory, y.ErrorCategory) {
					t.Errorf("record %d: original %s\n re-captured %s", i, mustJSON(x), mustJSON(y))
				}
				// --timing recorded: the re-run's TTFT and latency are the recorded ones, never less
				// (a loaded machine may add some).
				if x.LatencyTTFTMS != nil && (y.LatencyTTFTMS == nil || *y.LatencyTTFTMS < *x.LatencyTTFTMS-1) ||
					x.LatencyTotalMS != nil && (y.LatencyTotalMS == nil || *y.LatencyTotalMS < *x.LatencyTotalMS-1) {
					t.Errorf("record %d: re-captured TTFT/latency %v/%v ms, recorded %v/%v ms: the replay answered early", i,
						derefAny(y.LatencyTTFTMS), derefAny(y.LatencyTotalMS), derefAny(x.LatencyTTFTMS), derefAny(x.LatencyTotalMS))
				}
				t.Logf("call %d: TTFT/latency recorded %v/%v ms, replayed %v/%v ms", i, derefAny(x.LatencyTTFTMS),
					derefAny(x.LatencyTotalMS), derefAny(y.LatencyTTFTMS), derefAny(y.LatencyTotalMS))
			}

			// A changed prompt: the replay has no answer and says where the request differs.
			home2 := res.home
			freshHome(t, home2, "-replayed")
			changed := harnessPrompt + " please"
			args, env = run.command(t, home2, run.baseURL(rollBase), changed)
			exe, args = run.argv(res.exe, rig.bin, front.URL, res.rolloutID, args)
			before := strings.Count(rp.log.String(), `msg="replay miss" rollout_id=`+res.rolloutID+" ")
			stdout, stderr, err = runProcess(exe, args, env, home2, res.project, harnessTimeout)
			if err == nil && strings.Contains(stdout, res.nonce) {
				t.Errorf("a changed prompt was answered: %q", stdout)
			}
			// The message as the harness shows it; an Anthropic-style client prints the JSON body.
			out := strings.ReplaceAll(stdout+stderr, `\"`, `"`)
			want := regexp.MustCompile(`replay_miss: no recorded \w+ call of rollout "` + regexp.QuoteMeta(res.rolloutID) +
				`" matches this request; nearest is call [0-9]+ .*first difference at \$\.\S+: recorded "` +
				regexp.QuoteMeta(harnessPrompt) + `", request "` + regexp.QuoteMeta(changed) + `"`)
			if !want.MatchString(out) {
				t.Errorf("the harness's output does not carry the miss message naming the difference:\nstdout:\n%s\nstderr (tail):\n%s",
					stdout, tail(stderr, 20))
			}
			// pi retries a failed call a few times by itself: every attempt is a miss, and logged.
			// The replay logs before it answers; its log reaches us through a pipe.
			n := 0
			for deadline := time.Now().Add(5 * time.Second); n < 1 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				n = strings.Count(rp.log.String(), `msg="replay miss" rollout_id=`+res.rolloutID+" ") - before
			}
			if n < 1 {
				t.Errorf("the replay did not log the miss")
			}
			t.Logf("changed prompt: %d misses logged so far (the harness's attempts), exit %v", n, err)
			changedRuns++
		})
	}

	// /metrics of the admin listener, then the summary at shutdown; misses are every attempt of
	// the changed-prompt runs, as many as the replay logged.
	var metricsText string
	if rp.admin != "" {
		_, metricsText = capturetest.Get(t, rp.admin+"/metrics")
	} else {
		t.Errorf("replay logged no admin address")
	}
	err := rp.stop()
	stdout := rp.stdout.String()
	if err != nil {
		t.Errorf("replay did not exit cleanly on SIGTERM: %v\n%s", err, tail(rp.log.String(), 20))
	}
	misses := strings.Count(rp.log.String(), `msg="replay miss"`)
	if misses < changedRuns {
		t.Errorf("%d misses logged for %d changed-prompt runs", misses, changedRuns)
	}
	for _, m := range []string{fmt.Sprintf("modelcalls_replay_served_total %d\n", served),
		fmt.Sprintf("modelcalls_replay_misses_total %d\n", misses), "modelcalls_replay_exhausted_total 0\n",
		"modelcalls_gateway_calls_total{"} {
		if !strings.Contains(metricsText, m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
	if want := fmt.Sprintf("replay: served %d, misses %d, exhausted 0,", served, misses); !strings.HasPrefix(stdout, want) {
		t.Errorf("summary %q, want it to start with %q", stdout, want)
	}
	t.Logf("%s", strings.TrimSpace(stdout))
	s.report.step(rig.name+": replay of "+fmt.Sprint(len(todo))+" runs", time.Since(started))
}
