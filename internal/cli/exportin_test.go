package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestExportInRecords: --in records that cannot be used as they stand are named on stderr with
// their line and make the export exit 1; their rollouts are still exported. A reward of another
// type, or a second record of a rollout with another reward, used to pass without a word.
func TestExportInRecords(t *testing.T) {
	dir := tokenCaptureDir(t)
	for _, tc := range []struct {
		name, in string
		code     int
		stderr   string // "" for none
		rows     int
		reward   *float64
	}{
		{"a junk line, then a reward as a string", "not json\n" + `{"_ng_rollout_id":"r1","reward":"0.75"}` + "\n",
			ExitFailure, `stdin:2: reward "0.75" is not a number: rollout r1 exported without a reward`, 2, nil},
		{"a boolean reward", `{"_ng_rollout_id":"r1","reward":true}` + "\n", ExitFailure, "stdin:1: reward true is not a number", 2, nil},
		{"a null reward is no reward", `{"_ng_rollout_id":"r1","reward":null}` + "\n", ExitOK, "", 2, nil},
		{"a reward beyond float64", `{"_ng_rollout_id":"r1","reward":1e999}` + "\n", ExitFailure, "stdin:1: not exported: invalid JSON", 0, nil},
		{"a rollout listed twice with other rewards", `{"_ng_rollout_id":"r1","reward":0.5}` + "\n" + `{"_ng_rollout_id":"r1","reward":1}` + "\n",
			ExitFailure, "stdin:2: rollout r1 listed again with another reward: the first record's is used", 2, new(0.5)},
		{"a rollout listed twice alike", `{"_ng_rollout_id":"r1","reward":0.5}` + "\n" + `{"_ng_rollout_id":"r1","reward":0.5}` + "\n", ExitOK, "", 2, new(0.5)},
		{"an array and a cut line", "[1,2]\n" + `{"_ng_rollout_id":"r1"` + "\n", ExitFailure, "stdin:2: not exported: invalid JSON", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.jsonl")
			_, errOut, code := runCLI(t, tc.in, "export", "tokens", "--capture-dir", dir, "--in", "-", "--out", p)
			rows := readRows(t, p)
			if code != tc.code || tc.stderr == "" && errOut != "" || !strings.Contains(errOut, tc.stderr) || len(rows) != tc.rows {
				t.Fatalf("exit %d, stderr %q, %d rows", code, errOut, len(rows))
			}
			if len(rows) > 0 && !sameReward(rows[0].Reward, tc.reward) {
				t.Errorf("reward %v, want %v", rows[0].Reward, tc.reward)
			}
		})
	}
}
