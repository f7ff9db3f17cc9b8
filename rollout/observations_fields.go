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
// typed field at a time, with every JSON type checked.

// fieldSet is an object's members by name (a repeated key's last value wins).
type fieldSet map[string]json.RawMessage

// decodeFields decodes raw as a JSON object and rejects keys not in allowed.
func decodeFields(raw []byte, what string, allowed ...string) (fieldSet, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("%s must be a JSON object", what)
	}
	var unknown []string
	for k := range fields {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("%s: unknown field(s) %s", what, strings.Join(unknown, ", "))
	}
	return fieldSet(fields), nil
}

func (o fieldSet) str(key string) (string, error) {
	var s string
	err := o.strTo(&s, key)
	return s, err
}

// strTo decodes a required, non-null string.
func (o fieldSet) strTo(dst *string, key string) error {
	v, ok := o[key]
	if !ok || isNull(v) {
		return fmt.Errorf("%s is required", key)
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("%s must be a string", key)
	}
	return nil
}

func (o fieldSet) optStr(dst **string, key string) error {
	v, ok := o[key]
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
func (o fieldSet) strOrEmpty(dst *string, key string) error {
	var s *string
	err := o.optStr(&s, key)
	if s != nil {
		*dst = *s
	}
	return err
}

// enum decodes a string that must be one of allowed; an absent key gives def ("" = required).
func (o fieldSet) enum(dst *string, key, def string, allowed ...string) error {
	v, ok := o[key]
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
func (o fieldSet) optEnum(dst **string, key string, allowed ...string) error {
	if err := o.optStr(dst, key); err != nil || *dst != nil && !slices.Contains(allowed, **dst) {
		*dst = nil
		return fmt.Errorf("%s must be null or one of %s", key, strings.Join(allowed, ", "))
	}
	return nil
}

// optFloat decodes an optional JSON number (nil when absent or null).
func (o fieldSet) optFloat(dst **float64, key string, nonNegative bool) error {
	f, err := o.number(key, false, nonNegative)
	*dst = f
	return err
}

// optInt decodes an optional integral JSON number (nil when absent or null).
func (o fieldSet) optInt(dst **int64, key string, nonNegative bool) error {
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
func (o fieldSet) number(key string, integer, nonNegative bool) (*float64, error) {
	v, ok := o[key]
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

func (o fieldSet) list(key string) ([]json.RawMessage, error) {
	var l []json.RawMessage
	err := o.listTo(&l, key)
	return l, err
}

// listTo decodes an array that defaults to empty when absent (null is not allowed).
func (o fieldSet) listTo(dst *[]json.RawMessage, key string) error {
	v, ok := o[key]
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
