// Package jsonmember finds the top-level members of a JSON object with encoding/json, independently
// of the product's own scanner, for tests that check which bytes of a line were kept in place. It
// imports nothing of the module, so the root package's own tests can use it (internal/capturetest
// imports the root package).
package jsonmember

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Member is the byte span of one top-level member of a JSON object: Start is the end of the previous
// member's value (or just past the '{'), so obj[Start:ValueEnd] is the member with the white space
// and comma before it; obj[ValueStart:ValueEnd] is its value.
type Member struct {
	Key                         string
	Start, ValueStart, ValueEnd int
}

// Members returns the top-level members of the JSON object obj, in order (a repeated key once per
// occurrence); the test fails when obj is not one.
func Members(t testing.TB, obj []byte) []Member {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", clip(obj))
	}
	var ms []Member
	prevEnd := int(d.InputOffset())
	for d.More() {
		k, err := d.Token()
		if err != nil {
			t.Fatalf("%v in %s", err, clip(obj))
		}
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			t.Fatalf("%v in %s", err, clip(obj))
		}
		end := int(d.InputOffset())
		ms = append(ms, Member{k.(string), prevEnd, end - len(raw), end})
		prevEnd = end
	}
	return ms
}

// Last returns the last member named key (the one a JSON reader that keeps the last duplicate
// sees), and whether there is one.
func Last(ms []Member, key string) (Member, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Key == key {
			return ms[i], true
		}
	}
	return Member{}, false
}

// Keys returns the members' keys, in order.
func Keys(ms []Member) []string {
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = m.Key
	}
	return keys
}

// clip shortens obj for a failure message.
func clip(obj []byte) []byte {
	if len(obj) > 300 {
		return append(obj[:300:300], "..."...)
	}
	return obj
}
