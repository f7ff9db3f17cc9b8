package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRolloutList: calls and show given a capture dir but no rollout id list its rollouts (id,
// calls, errors, last activity), in every form of the command line.
func TestRolloutList(t *testing.T) {
	for _, args := range [][]string{
		{"calls", gymCapture},
		{"calls", "--capture-dir", gymCapture},
		{"show", gymCapture},
		{"show", "--capture-dir", gymCapture},
	} {
		out, errOut, code := runCLI(t, "", args...)
		if code != ExitOK {
			t.Fatalf("%q: exit %d, stderr %s", args, code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if lines[0] != "rollout_id\tcalls\terrors\tlast_activity\tdamaged_lines\tincomplete\tcapture_dir" {
			t.Errorf("%q: header %q", args, lines[0])
		}
		if len(lines) != 40 {
			t.Errorf("%q: %d lines, want the header and 39 rollouts", args, len(lines))
		}
		for _, l := range lines[1:] {
			f := strings.Split(l, "\t")
			if len(f) != 7 {
				t.Fatalf("%q: line %q", args, l)
			}
			switch f[0] {
			case "3-0":
				if f[4] != "1" {
					t.Errorf("3-0 damaged lines %s, want 1", f[4])
				}
			case "4-0":
				if f[5] != "true" {
					t.Errorf("4-0 incomplete %s, want true", f[5])
				}
			}
		}
	}
	out, _, code := runCLI(t, "", "calls", gymCapture, "--format", "json")
	var first rolloutSummary
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &first); code != ExitOK || err != nil {
		t.Fatalf("json: exit %d, %v: %s", code, err, out)
	}
	if first.ID != "0-0" || first.Calls == 0 || first.LastActivity == nil {
		t.Errorf("first rollout %+v", first)
	}
	_, errOut, code := runCLI(t, "", "calls", t.TempDir())
	if code != ExitOK || !strings.Contains(errOut, "no rollouts in") {
		t.Errorf("empty dir: exit %d, stderr %q", code, errOut)
	}
}

// TestSimilarRollouts: a typo of a rollout id is offered, closest first; an id like none is not.
func TestSimilarRollouts(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"0-9", "0-0 0-1 0-2"},
		{"4-4-a2", "4-4-a1"},
		{"4-4", "4-4-a1 0-4 1-4"},
		{"zzzzzz", ""},
	} {
		like, total := similarRollouts([]string{gymCapture}, tc.id)
		if got := strings.Join(like, " "); got != tc.want || total != 39 {
			t.Errorf("%s: %q of %d, want %q of 39", tc.id, got, total, tc.want)
		}
	}
}
