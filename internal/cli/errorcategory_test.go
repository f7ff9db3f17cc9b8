package cli

import (
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestErrorFilterValues: --error accepts any, none and the known categories whatever the dir
// holds, a foreign category only when some call of the dir has it, and refuses anything else with
// a usage error naming the known categories and the dir's.
func TestErrorFilterValues(t *testing.T) {
	st := capturetest.NewStore(t)
	dir := st.Dir()
	rl, foreign := capture.CategoryRateLimit, "gym_tool_env_error" // a category another producer wrote
	for _, c := range []struct {
		id       string
		status   int
		category *string
	}{
		{"r1", 200, nil}, {"r1", 429, &rl}, {"r2", 500, &foreign}, {"r3", 200, nil},
	} {
		if err := st.AppendExchange(c.id, exchange("m", `{"prompt_tokens":3,"completion_tokens":1}`, 5, nil, c.status, c.category)); err != nil {
			t.Fatal(err)
		}
	}
	refused := []string{`not a known error category, nor one a call in ` + dir + ` has`,
		"want any, none or one of: timeout, rate_limit, auth,", "capture_too_large;",
		"categories the calls in " + dir + " have: " + foreign + ", rate_limit"}
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		out   string   // a piece of stdout
		errIn []string // pieces of stderr
	}{
		{"known, present", []string{"calls", dir, "r1", "--error", "rate_limit", "--format", "tsv"}, ExitOK, "\trate_limit\t", nil},
		{"known, absent from the dir", []string{"calls", dir, "r1", "--error", "auth", "--format", "json"}, ExitOK, "", nil},
		{"any and none", []string{"calls", dir, "r1", "--error", "any,none", "--format", "tsv"}, ExitOK, "\trate_limit\t", nil},
		{"foreign, in the rollout", []string{"calls", dir, "r2", "--error", foreign, "--format", "tsv"}, ExitOK, "\t" + foreign + "\t", nil},
		{"foreign, in another rollout of the dir", []string{"calls", dir, "r3", "--error", foreign, "--format", "json"}, ExitOK, "", nil},
		{"typo", []string{"calls", dir, "r1", "--error", "rate_limt"}, ExitUsage, "", append([]string{`--error "rate_limt": `}, refused...)},
		{"typo among good values", []string{"calls", dir, "r1", "--error", "rate_limit,Auth,rate_limt"}, ExitUsage, "", []string{`--error "Auth", "rate_limt": `}},
		{"typo, missing rollout first", []string{"calls", dir, "r9", "--error", "rate_limt"}, ExitNotFound, "", []string{"rollout r9 has no capture"}},
		{"stats: foreign, in the dir", []string{"stats", dir, "--error", foreign, "--format", "tsv"}, ExitOK, "(all)\t1\t1\t", nil},
		{"stats: known", []string{"stats", dir, "--error", "timeout", "--format", "tsv"}, ExitOK, "(all)\t0\t0\t", nil},
		{"stats: typo", []string{"stats", dir, "--error", "ratelimit"}, ExitUsage, "", append([]string{`--error "ratelimit": `}, refused...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, "", tc.args...)
			if code != tc.code || !strings.Contains(out, tc.out) {
				t.Errorf("%q: exit %d, stdout %q; want %d and %q (stderr %q)", tc.args, code, out, tc.code, tc.out, errOut)
			}
			for _, want := range tc.errIn {
				if !strings.Contains(errOut, want) {
					t.Errorf("%q: stderr %q lacks %q", tc.args, errOut, want)
				}
			}
			if tc.code == ExitUsage && out != "" {
				t.Errorf("%q: a refused filter printed %q", tc.args, out)
			}
		})
	}

	empty := t.TempDir()
	_, errOut, code := runCLI(t, "", "stats", empty, "--error", "rate_limt")
	if code != ExitUsage || !strings.Contains(errOut, "; no call in "+empty+" has an error category") {
		t.Errorf("empty dir: exit %d, stderr %q", code, errOut)
	}
}
