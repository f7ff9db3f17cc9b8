package rollout

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func fields(t *testing.T, js string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestValidate(t *testing.T) {
	for _, id := range []string{"a", "0", "task-1_a.2", "A.b-c_d", strings.Repeat("x", MaxIDLen)} {
		if err := Validate(id); err != nil {
			t.Errorf("Validate(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", ".a", "-a", "_a", "a/b", "../a", "a b", "röllout", "abc\n", "a\x00", "a%2Fb", "a:b", strings.Repeat("x", MaxIDLen+1)} {
		if err := Validate(id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Validate(%q) = %v, want ErrInvalidID", id, err)
		}
	}
}

func TestFromRecord(t *testing.T) {
	for _, tc := range []struct {
		name, record, want string
		ok, err            bool
	}{
		{"indices", `{"_ng_task_index":3,"_ng_rollout_index":7}`, "3-7", true, false},
		{"attempt 0 bare", `{"_ng_task_index":3,"_ng_rollout_index":7,"_ng_attempt_index":0}`, "3-7", true, false},
		{"attempt 1", `{"_ng_task_index":3,"_ng_rollout_index":7,"_ng_attempt_index":1}`, "3-7-a1", true, false},
		{"attempt string", `{"_ng_task_index":3,"_ng_rollout_index":7,"_ng_attempt_index":" 2 "}`, "3-7-a2", true, false},
		{"attempt float truncates", `{"_ng_task_index":3,"_ng_rollout_index":7,"_ng_attempt_index":2.9}`, "3-7-a2", true, false},
		{"attempt true", `{"_ng_task_index":3,"_ng_rollout_index":7,"_ng_attempt_index":true}`, "3-7-a1", true, false},
		{"attempt negative", `{"_ng_task_index":3,"_ng_rollout_index":7,"_ng_attempt_index":-1}`, "3-7", true, false},
		{"attempt null", `{"_ng_task_index":3,"_ng_rollout_index":7,"_ng_attempt_index":null}`, "3-7", true, false},
		{"attempt word", `{"_ng_task_index":3,"_ng_rollout_index":7,"_ng_attempt_index":"two"}`, "", false, true},
		{"attempt list", `{"_ng_task_index":3,"_ng_rollout_index":7,"_ng_attempt_index":[1]}`, "", false, true},
		{"string indices", `{"_ng_task_index":"t","_ng_rollout_index":"0"}`, "t-0", true, false},
		{"explicit wins", `{"_ng_rollout_id":"abc","_ng_task_index":3,"_ng_rollout_index":7}`, "abc", true, false},
		{"explicit with attempt", `{"_ng_rollout_id":"x-a1","_ng_attempt_index":2}`, "x-a1-a2", true, false},
		{"explicit null is absent", `{"_ng_rollout_id":null,"_ng_task_index":1,"_ng_rollout_index":2}`, "1-2", true, false},
		{"explicit invalid", `{"_ng_rollout_id":"../x"}`, "", false, true},
		{"explicit newline", `{"_ng_rollout_id":"abc\n"}`, "", false, true},
		{"explicit number", `{"_ng_rollout_id":5}`, "", false, true},
		{"explicit empty", `{"_ng_rollout_id":""}`, "", false, true},
		{"derived invalid", `{"_ng_task_index":"x/y","_ng_rollout_index":0}`, "", false, true},
		{"missing rollout index", `{"_ng_task_index":1}`, "", false, false},
		{"null task index", `{"_ng_task_index":null,"_ng_rollout_index":1}`, "", false, false},
		{"no fields", `{"reward":1}`, "", false, false},
		{"object index", `{"_ng_task_index":{},"_ng_rollout_index":1}`, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, ok, err := FromRecord(fields(t, tc.record))
			if id != tc.want || ok != tc.ok || (err != nil) != tc.err {
				t.Fatalf("FromRecord = %q, %v, %v; want %q, %v, err=%v", id, ok, err, tc.want, tc.ok, tc.err)
			}
			if err != nil && !errors.Is(err, ErrInvalidID) {
				t.Fatalf("err %v does not wrap ErrInvalidID", err)
			}
		})
	}
}

func TestHasRolloutFields(t *testing.T) {
	if HasRolloutFields(fields(t, `{"reward":1}`)) || !HasRolloutFields(fields(t, `{"_ng_attempt_index":null}`)) {
		t.Fatal("HasRolloutFields wrong")
	}
}

func TestPrefix(t *testing.T) {
	if got := PathPrefix("r1"); got != "/ng-rollout/r1" {
		t.Errorf("PathPrefix = %q", got)
	}
	if got := PathPrefix(""); got != "" {
		t.Errorf("PathPrefix empty = %q", got)
	}
	if got := ApplyPrefix("http://h:1/v1//", "r1"); got != "http://h:1/v1/ng-rollout/r1" {
		t.Errorf("ApplyPrefix = %q", got)
	}
	if got := ApplyPrefix("http://h:1/", ""); got != "http://h:1/" {
		t.Errorf("ApplyPrefix no id = %q", got)
	}
	for _, tc := range []struct {
		path, id, rest string
		ok             bool
	}{
		{"/ng-rollout/r1/v1/messages", "r1", "/v1/messages", true},
		{"/ng-rollout/r1/ng-rollout/r2/v1/x", "r1", "/ng-rollout/r2/v1/x", true},
		{"/ng-rollout/a%2Fb/v1/x", "a%2Fb", "/v1/x", true},
		{"/ng-rollout/r1/", "r1", "/", true},
		{"/ng-rollout/r1", "", "", false},
		{"/ng-rollout//v1/x", "", "", false},
		{"/v1/messages", "", "", false},
		{"/ng-rolloutx/r1/v1", "", "", false},
		// NeMo Gym's token-id capture segment goes with the prefix, once, only right after the id.
		{"/ng-rollout/r1/training-token-capture/v1/chat/completions", "r1", "/v1/chat/completions", true},
		{"/ng-rollout/r1/training-token-capture/", "r1", "/", true},
		{"/ng-rollout/r1/training-token-capture", "r1", "/training-token-capture", true},
		{"/ng-rollout/r1/training-token-capture/training-token-capture/v1/x", "r1", "/training-token-capture/v1/x", true},
		{"/ng-rollout/r1/v1/training-token-capture/x", "r1", "/v1/training-token-capture/x", true},
	} {
		id, rest, ok := SplitPath(tc.path)
		if id != tc.id || rest != tc.rest || ok != tc.ok {
			t.Errorf("SplitPath(%q) = %q, %q, %v", tc.path, id, rest, ok)
		}
	}
	// Producer and matcher round-trip.
	id, rest, ok := SplitPath(PathPrefix("task-1_a.2") + "/v1/responses")
	if !ok || id != "task-1_a.2" || rest != "/v1/responses" {
		t.Errorf("round trip = %q %q %v", id, rest, ok)
	}
}
