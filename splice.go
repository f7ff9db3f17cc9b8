package modelcalls

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/rollout"
)

// The splice: rollout records are edited as bytes. Only the value of ng_model_call_capture (and of
// ng_agent_observations, when the join rewrote it) changes; every other byte of the record stays
// where it was.

// Top-level rollout record fields the merge reads or writes (package rollout names them).
const (
	FieldModelCallCapture  = rollout.FieldModelCallCapture
	FieldAgentObservations = rollout.FieldAgentObservations
)

// recordLayout is what one scan of a rollout record line finds.
type recordLayout struct {
	open         int                        // offset of the top-level '{'
	members      []jsonscan.Member          // top-level members in order
	idFields     map[string]json.RawMessage // the _ng_* identity fields present (last value wins)
	capture      int                        // index in members of the last ng_model_call_capture, -1 if none
	observations int                        // index in members of the last ng_agent_observations, -1 if none
}

// scanRecord validates line as one JSON object (surrounding whitespace allowed) and maps its
// top-level members, in one pass.
func scanRecord(line []byte) (*recordLayout, error) {
	members, err := jsonscan.ValidateMembers(line, nil)
	if err != nil {
		return nil, err
	}
	l := &recordLayout{open: jsonscan.SkipWS(line, 0), members: members, capture: -1, observations: -1}
	if line[l.open] != '{' {
		return nil, fmt.Errorf("not a JSON object but %s", jsonscan.KindName(line[l.open:]))
	}
	for i, m := range members {
		name := jsonscan.KeyName(line[m.KeyStart:m.KeyEnd])
		switch string(name) {
		case rollout.FieldRolloutID, rollout.FieldTaskIndex, rollout.FieldRolloutIndex, rollout.FieldAttemptIndex:
			if l.idFields == nil {
				l.idFields = make(map[string]json.RawMessage, 4)
			}
			l.idFields[string(name)] = line[m.ValStart:m.ValEnd]
		case FieldModelCallCapture:
			l.capture = i
		case FieldAgentObservations:
			l.observations = i
		}
	}
	return l, nil
}

// edit replaces line[start:end] with repl.
type edit struct {
	start, end int
	repl       []byte
}

// setFieldEdit returns the edit that makes the record's `name` field hold value: the value of the
// last existing member named name is replaced in place (a reader of a record with repeated keys sees
// the last one, in Python and Go alike); otherwise a new member is appended after the last one,
// written in the record's own separator style.
func (l *recordLayout) setFieldEdit(line []byte, existing int, name string, value []byte) edit {
	if existing >= 0 {
		m := l.members[existing]
		return edit{m.ValStart, m.ValEnd, value}
	}
	var b []byte
	if len(l.members) == 0 {
		b = jsonscan.AppendString(b, name)
		b = append(b, ':')
		b = append(b, value...)
		return edit{l.open + 1, l.open + 1, b}
	}
	last := l.members[len(l.members)-1]
	kvSep := line[last.KeyEnd:last.ValStart] // e.g. ":" or ": "
	var memberSep []byte                     // e.g. "," or ", "
	if len(l.members) > 1 {
		memberSep = line[l.members[len(l.members)-2].ValEnd:last.KeyStart]
	} else if bytes.IndexByte(kvSep, ' ') >= 0 {
		memberSep = []byte(", ")
	} else {
		memberSep = []byte(",")
	}
	b = append(b, memberSep...)
	b = jsonscan.AppendString(b, name)
	b = append(b, kvSep...)
	b = append(b, value...)
	return edit{last.ValEnd, last.ValEnd, b}
}
