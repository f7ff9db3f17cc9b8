package config

import (
	"errors"
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Op is what an override does, after Hydra's command-line grammar (which Gym uses).
type Op int

const (
	// OpSet ("key=value") replaces an existing key; it fails when the key is absent.
	OpSet Op = iota
	// OpAdd ("+key=value") adds a key; it fails when the key is already present.
	OpAdd
	// OpForce ("++key=value") adds or replaces a key.
	OpForce
	// OpDelete ("~key" or "~key=value") removes a key (when a value is given, only if it matches);
	// it fails when the key is absent.
	OpDelete
)

// Override is one parsed command-line override.
type Override struct {
	Op  Op
	Key []string // dotted path split on '.', e.g. "a.b" -> ["a", "b"]; never empty
	// Value is the decoded value (YAML scalar/flow rules: true, 3, 1.5, null, [a, b], {k: v}; anything
	// that does not parse is kept as the raw string; "key=" gives ""). HasValue is false for "~key".
	Value    any
	HasValue bool
}

// IsOverride reports whether a command-line argument is an override: it starts with "++", "+" or "~",
// or has the form key=value with a non-empty key.
func IsOverride(arg string) bool {
	if strings.HasPrefix(arg, "+") || strings.HasPrefix(arg, "~") {
		return true
	}
	i := strings.IndexByte(arg, '=')
	return i > 0
}

// ParseOverride parses one override argument: "++key=value", "+key=value", "key=value", "~key" or
// "~key=value", where key is a dotted path of non-empty names. Errors quote the argument and say
// which rule it breaks.
func ParseOverride(arg string) (Override, error) {
	var o Override
	s := arg
	switch {
	case strings.HasPrefix(s, "++"):
		o.Op, s = OpForce, s[2:]
	case strings.HasPrefix(s, "+"):
		o.Op, s = OpAdd, s[1:]
	case strings.HasPrefix(s, "~"):
		o.Op, s = OpDelete, s[1:]
	default:
		o.Op = OpSet
	}
	key, val, hasVal := strings.Cut(s, "=")
	if !hasVal && o.Op != OpDelete {
		return Override{}, fmt.Errorf("override %q: want key=value", arg)
	}
	key = strings.TrimSpace(key)
	if key == "" {
		return Override{}, fmt.Errorf("override %q: empty key", arg)
	}
	o.Key = strings.Split(key, ".")
	for _, part := range o.Key {
		if part == "" {
			return Override{}, fmt.Errorf("override %q: empty name in dotted key %q", arg, key)
		}
	}
	if hasVal {
		o.Value, o.HasValue = parseValue(val), true
	}
	return o, nil
}

// parseValue decodes an override value with YAML flow rules, falling back to the raw text.
func parseValue(s string) any {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	switch v.(type) {
	case map[string]any, []any, string, bool, int, float64, nil:
		return v
	default:
		// Timestamps, binary and other YAML-only types: keep the text as written.
		return s
	}
}

// Apply applies overrides in order to v (creating nested mappings for dotted keys as needed). It
// stops at the first argument that does not parse or cannot apply (OpSet on a missing key, OpAdd on
// a present one, a dotted path through a non-mapping) and returns an error naming it.
func (v Values) Apply(args ...string) error {
	for _, arg := range args {
		o, err := ParseOverride(arg)
		if err != nil {
			return err
		}
		if err := v.apply(o); err != nil {
			return fmt.Errorf("override %q: %w", arg, err)
		}
	}
	return nil
}

func (v Values) apply(o Override) error {
	m := map[string]any(v)
	for i, name := range o.Key[:len(o.Key)-1] {
		next, ok := m[name]
		if !ok || next == nil {
			if o.Op == OpSet || o.Op == OpDelete {
				return fmt.Errorf("key %s does not exist", strings.Join(o.Key[:i+1], "."))
			}
			child := map[string]any{}
			m[name] = child
			m = child
			continue
		}
		child, ok := next.(map[string]any)
		if !ok {
			return fmt.Errorf("%s is %s, not a mapping", strings.Join(o.Key[:i+1], "."), yamlKind(next))
		}
		m = child
	}
	last := o.Key[len(o.Key)-1]
	cur, present := m[last]
	switch o.Op {
	case OpSet:
		if !present {
			return errors.New("key does not exist (use ++key=value to add it)")
		}
		m[last] = o.Value
	case OpAdd:
		if present {
			return errors.New("key already exists (use ++key=value to replace it)")
		}
		m[last] = o.Value
	case OpForce:
		m[last] = o.Value
	case OpDelete:
		if !present {
			return errors.New("key does not exist")
		}
		if o.HasValue && fmt.Sprint(cur) != fmt.Sprint(o.Value) {
			return fmt.Errorf("key holds %v, not %v", cur, o.Value)
		}
		delete(m, last)
	}
	return nil
}
