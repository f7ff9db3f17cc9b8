package rollout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// MaxIDLen is the longest valid rollout id, in bytes. An id is a file name component
// (<id>.capture.jsonl), and 200 bytes leaves room for the suffixes under the usual 255-byte limit.
const MaxIDLen = 200

// Field names of a rollout record that identify the rollout (NeMo Gym's reserved keys).
const (
	FieldRolloutID    = "_ng_rollout_id"
	FieldTaskIndex    = "_ng_task_index"
	FieldRolloutIndex = "_ng_rollout_index"
	FieldAttemptIndex = "_ng_attempt_index"
)

// ErrInvalidID is the errors.Is target of every invalid rollout id error.
var ErrInvalidID = errors.New("invalid rollout id")

// Validate reports whether id is a valid rollout id: it matches ^[A-Za-z0-9][A-Za-z0-9._-]*$ (ASCII
// only, no trailing newline) and is at most MaxIDLen bytes. The error wraps ErrInvalidID and names
// the rule that failed.
func Validate(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalidID)
	case len(id) > MaxIDLen:
		return fmt.Errorf("%w: %d bytes, at most %d allowed", ErrInvalidID, len(id), MaxIDLen)
	case !isAlnum(id[0]):
		return fmt.Errorf("%w %q: must start with an ASCII letter or digit", ErrInvalidID, id)
	}
	for i := 1; i < len(id); i++ {
		c := id[i]
		if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return fmt.Errorf("%w %q: byte %d is %q; only ASCII letters, digits, '.', '_' and '-' are allowed",
				ErrInvalidID, id, i, c)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// HasRolloutFields reports whether any of the four _ng_* identity fields is present (even if null).
// A record without any of them is not a rollout record, and merge passes it through silently.
func HasRolloutFields(fields map[string]json.RawMessage) bool {
	for _, k := range []string{FieldRolloutID, FieldTaskIndex, FieldRolloutIndex, FieldAttemptIndex} {
		if _, ok := fields[k]; ok {
			return true
		}
	}
	return false
}

// FromRecord derives the rollout id of a rollout record from its top-level fields, given as raw JSON
// values, with NeMo Gym's rule (maybe_rollout_id_from_run_body) made strict where NeMo Gym would
// write a file whose name is not a valid id:
//
//   - a non-null _ng_rollout_id must be a JSON string holding a valid id, and is the base id;
//   - otherwise _ng_task_index and _ng_rollout_index must both be non-null; the base id is
//     "<task>-<rollout>" with each value in its plain form (strings unquoted, numbers as written);
//   - a non-null _ng_attempt_index is converted to an integer (a JSON integer, a float truncated toward
//     zero, true/false, or a string holding an integer with optional surrounding spaces, as Python's
//     int() accepts); when it is > 0, "-a<n>" is appended.
//
// ok is false (and err nil) when no id can be derived. err is non-nil (wrapping ErrInvalidID) when an
// explicit id is unusable, the attempt index is not an integer, or the resulting id is not valid.
func FromRecord(fields map[string]json.RawMessage) (id string, ok bool, err error) {
	base, have, err := baseID(fields)
	if err != nil || !have {
		return "", false, err
	}
	if raw, present := fields[FieldAttemptIndex]; present && !isNull(raw) {
		n, err := attemptIndex(raw)
		if err != nil {
			return "", false, err
		}
		if n > 0 {
			base += "-a" + strconv.FormatInt(n, 10)
		}
	}
	if err := Validate(base); err != nil {
		return "", false, err
	}
	return base, true, nil
}

func baseID(fields map[string]json.RawMessage) (string, bool, error) {
	if raw, ok := fields[FieldRolloutID]; ok && !isNull(raw) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, fmt.Errorf("%w: %s must be a string, got %s", ErrInvalidID, FieldRolloutID, clip(raw))
		}
		if err := Validate(s); err != nil {
			return "", false, fmt.Errorf("%s: %w", FieldRolloutID, err)
		}
		return s, true, nil
	}
	task, okT := fields[FieldTaskIndex]
	roll, okR := fields[FieldRolloutIndex]
	if !okT || !okR || isNull(task) || isNull(roll) {
		return "", false, nil
	}
	t, err := plainForm(task)
	if err != nil {
		return "", false, fmt.Errorf("%w: %s: %v", ErrInvalidID, FieldTaskIndex, err)
	}
	r, err := plainForm(roll)
	if err != nil {
		return "", false, fmt.Errorf("%w: %s: %v", ErrInvalidID, FieldRolloutIndex, err)
	}
	return t + "-" + r, true, nil
}

// plainForm renders a scalar JSON value the way it reads in an id: strings unquoted, numbers and
// booleans as written. Objects and arrays are rejected (they never make a usable file name).
func plainForm(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", errors.New("empty value")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	case '{', '[':
		return "", fmt.Errorf("must be a string or number, got %s", clip(raw))
	}
	return string(raw), nil
}

// attemptIndex converts _ng_attempt_index the way Python's int() does for the JSON types.
func attemptIndex(raw json.RawMessage) (int64, error) {
	raw = bytes.TrimSpace(raw)
	bad := func() (int64, error) {
		return 0, fmt.Errorf("%w: %s must be an integer, got %s", ErrInvalidID, FieldAttemptIndex, clip(raw))
	}
	switch {
	case bytes.Equal(raw, []byte("true")):
		return 1, nil
	case bytes.Equal(raw, []byte("false")):
		return 0, nil
	case len(raw) > 0 && raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return bad()
		}
		s = strings.TrimFunc(s, unicode.IsSpace)
		s = strings.ReplaceAll(s, "_", "")
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad()
		}
		return n, nil
	case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
		if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || math.Abs(f) > 1<<62 {
			return bad()
		}
		return int64(math.Trunc(f)), nil
	}
	return bad()
}

func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func clip(raw []byte) string {
	const max = 60
	if len(raw) > max {
		return string(raw[:max]) + "..."
	}
	return string(raw)
}
