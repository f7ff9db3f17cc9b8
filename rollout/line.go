package rollout

import (
	"encoding/json"
	"fmt"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// Top-level fields of a rollout record that a merge writes: the captured evidence and the agent's
// observations joined to it.
const (
	FieldModelCallCapture  = "ng_model_call_capture"
	FieldAgentObservations = "ng_agent_observations"
)

// IsIDField reports whether name is one of the fields FromRecord reads (FieldRolloutID,
// FieldTaskIndex, FieldRolloutIndex, FieldAttemptIndex).
func IsIDField(name string) bool {
	switch name {
	case FieldRolloutID, FieldTaskIndex, FieldRolloutIndex, FieldAttemptIndex:
		return true
	}
	return false
}

// FromLine derives the rollout id of a rollout record given as one JSON object (a JSONL line,
// surrounding whitespace allowed), by FromRecord's rule over its top-level fields (a repeated
// field's last value wins). ok is false, with a nil error, when the record has no derivable id. A
// line that is not a strict JSON object (jsonscan's rules: valid UTF-8, finite numbers, paired
// surrogates) is an error, as are FromRecord's errors.
func FromLine(line []byte) (id string, ok bool, err error) {
	members, err := jsonscan.ValidateMembers(line, nil)
	if err != nil {
		return "", false, err
	}
	if v := line[jsonscan.SkipWS(line, 0):]; !jsonscan.IsObject(v) {
		return "", false, fmt.Errorf("not a JSON object but %s", jsonscan.KindName(v))
	}
	var fields map[string]json.RawMessage
	for _, m := range members {
		name := string(jsonscan.KeyName(line[m.KeyStart:m.KeyEnd]))
		if !IsIDField(name) {
			continue
		}
		if fields == nil {
			fields = make(map[string]json.RawMessage, 4)
		}
		fields[name] = line[m.ValStart:m.ValEnd]
	}
	return FromRecord(fields)
}
