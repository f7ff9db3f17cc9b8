package rollout

import "testing"

func TestFromLine(t *testing.T) {
	for _, c := range []struct {
		in, id  string
		ok, err bool
	}{
		{`{"_ng_task_index": 3, "_ng_rollout_index": 1, "_ng_attempt_index": 2}`, "3-1-a2", true, false},
		{` {"_ng_rollout_id": "abc", "_ng_task_index": 3, "_ng_rollout_index": 1} ` + "\n", "abc", true, false},
		{`{"_ng_rollout_id": "old", "_ng_rollout_id": "new"}`, "new", true, false}, // the last value wins
		{`{"_ng_rollout_\u0069d": "esc"}`, "esc", true, false},                     // key names compare decoded
		{`{"other": 1, "nested": {"_ng_rollout_id": "x"}}`, "", false, false},
		{`{"_ng_task_index": 3}`, "", false, false},
		{`{"_ng_rollout_id": ""}`, "", false, true},
		{`{"_ng_rollout_id": "../x"}`, "", false, true},
		{`[{"_ng_rollout_id": "a"}]`, "", false, true},
		{`{"_ng_rollout_id": "a", "n": NaN}`, "", false, true},
		{`not json`, "", false, true},
	} {
		id, ok, err := FromLine([]byte(c.in))
		if id != c.id || ok != c.ok || (err != nil) != c.err {
			t.Errorf("FromLine(%s) = %q %v %v, want %q %v err=%v", c.in, id, ok, err, c.id, c.ok, c.err)
		}
	}
}
