package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// The strict field decoder of the observation parser: a JSON object as its members, read one
// typed field at a time, with every JSON type checked; a member no reader asks for is an unknown
// field.

// fieldSet is an object's members by name (a repeated key's last value wins), with the keys its
// readers asked for: the fields the parser knows, so that what is not read is an unknown field.
type fieldSet struct {
	members map[string]json.RawMessage
	known   []string
	// floats holds the number tokens of the float fields read (optFloat), as written: see
	// numberTokens.
	floats numberTokens
}

// decodeFields decodes raw as a JSON object; what names it in the error when it is not one.
func decodeFields(raw []byte, what string) (*fieldSet, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		return nil, fmt.Errorf("%s must be a JSON object", what)
	}
	return &fieldSet{members: members}, nil
}

// get returns the member key (ok false when absent) and counts key as a known field.
func (o *fieldSet) get(key string) (v json.RawMessage, ok bool) {
	if !slices.Contains(o.known, key) {
		o.known = append(o.known, key)
	}
	v, ok = o.members[key]
	return v, ok
}

// unknown returns an error naming, sorted, the members no reader asked for (what names the
// object), or nil when every member was read.
func (o *fieldSet) unknown(what string) error {
	var unknown []string
	for k := range o.members {
		if !slices.Contains(o.known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return fmt.Errorf("%s: unknown field(s) %s", what, strings.Join(unknown, ", "))
}

// strTo decodes a required, non-null string.
func (o *fieldSet) strTo(dst *string, key string) error {
	v, ok := o.get(key)
	if !ok || isNull(v) {
		return fmt.Errorf("%s is required", key)
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("%s must be a string", key)
	}
	return nil
}

func (o *fieldSet) optStr(dst **string, key string) error {
	v, ok := o.get(key)
	if !ok || isNull(v) {
		*dst = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return fmt.Errorf("%s must be a string or null", key)
	}
	*dst = &s
	return nil
}

// strOrEmpty decodes an optional string, leaving dst "" when the key is absent or null.
func (o *fieldSet) strOrEmpty(dst *string, key string) error {
	var s *string
	err := o.optStr(&s, key)
	if s != nil {
		*dst = *s
	}
	return err
}

// enum decodes a string that must be one of allowed; an absent key gives def ("" = required).
func (o *fieldSet) enum(dst *string, key, def string, allowed ...string) error {
	v, ok := o.get(key)
	if !ok {
		if def == "" {
			return fmt.Errorf("%s is required", key)
		}
		*dst = def
		return nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil || isNull(v) || !slices.Contains(allowed, s) {
		return fmt.Errorf("%s must be one of %s", key, strings.Join(allowed, ", "))
	}
	*dst = s
	return nil
}

// optEnum decodes an optional string that must be one of allowed (nil when absent or null).
func (o *fieldSet) optEnum(dst **string, key string, allowed ...string) error {
	if err := o.optStr(dst, key); err != nil || *dst != nil && !slices.Contains(allowed, **dst) {
		*dst = nil
		return fmt.Errorf("%s must be null or one of %s", key, strings.Join(allowed, ", "))
	}
	return nil
}

// optFloat decodes an optional JSON number (nil when absent or null).
func (o *fieldSet) optFloat(dst **float64, key string, nonNegative bool) error {
	f, err := o.number(key, false, nonNegative)
	*dst = f
	if f != nil {
		if o.floats == nil {
			o.floats = numberTokens{}
		}
		o.floats[key] = bytes.TrimSpace(o.members[key])
	}
	return err
}

// optInt decodes an optional integral JSON number (nil when absent or null).
func (o *fieldSet) optInt(dst **int64, key string, nonNegative bool) error {
	f, err := o.number(key, true, nonNegative)
	*dst = nil
	if f != nil {
		n := int64(*f)
		*dst = &n
	}
	return err
}

// number decodes an optional JSON number: nil when absent or null, an error for any other JSON
// type, a negative value when nonNegative, or (integer) a fractional value or one beyond +-2^53,
// past which a float64 no longer holds every integer.
func (o *fieldSet) number(key string, integer, nonNegative bool) (*float64, error) {
	v, ok := o.get(key)
	if !ok || isNull(v) {
		return nil, nil
	}
	var f float64
	if !isJSONNumber(v) || json.Unmarshal(v, &f) != nil || math.IsInf(f, 0) ||
		integer && (f != math.Trunc(f) || math.Abs(f) > 1<<53) {
		if integer {
			return nil, fmt.Errorf("%s must be an integer or null", key)
		}
		return nil, fmt.Errorf("%s must be a number or null", key)
	}
	if nonNegative && f < 0 {
		return nil, fmt.Errorf("%s must be >= 0", key)
	}
	return &f, nil
}

// optRaw sets dst to the member key as written, nil when it is absent or null.
func (o *fieldSet) optRaw(dst *json.RawMessage, key string) error {
	v, ok := o.get(key)
	if !ok || isNull(v) {
		v = nil
	}
	*dst = v
	return nil
}

// listTo decodes an array that defaults to empty when absent (null is not allowed).
func (o *fieldSet) listTo(dst *[]json.RawMessage, key string) error {
	v, ok := o.get(key)
	if !ok {
		*dst = []json.RawMessage{}
		return nil
	}
	if isNull(v) || json.Unmarshal(v, dst) != nil {
		return fmt.Errorf("%s must be a list", key)
	}
	if *dst == nil {
		*dst = []json.RawMessage{}
	}
	return nil
}

func isJSONNumber(v []byte) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}
