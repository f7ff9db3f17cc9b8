package lineage

import (
	"strings"
	"testing"
)

// TestContainsAt: containsAt finds what bytes.Contains finds, wherever the token lies.
func TestContainsAt(t *testing.T) {
	const tok = `"previous_response_id"`
	for _, b := range []string{"", tok, tok[:len(tok)-1], "x" + tok, tok + "x", `{"a":"prev","previous_response_id":"r1"}`,
		`"previous_response_i"`, `""previous_response_id"`, `{"previous_response_idd":1}`, strings.Repeat(`"prev`, 40) + tok[1:]} {
		for k := range len(tok) {
			if got, want := containsAt([]byte(b), tok, k), strings.Contains(b, tok); got != want {
				t.Errorf("containsAt(%q, anchor %d) = %v, want %v", b, k, got, want)
			}
		}
	}
}
