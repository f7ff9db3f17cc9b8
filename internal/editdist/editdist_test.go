package editdist

import "testing"

func TestLevenshtein(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"abc", "abc", 0},
		{"kitten", "sitting", 3},
		{"0-1", "0-2", 1},        // substitution
		{"reward", "rewrd", 1},   // deletion
		{"status", "statuss", 1}, // insertion
		{"ab", "ba", 2},          // a swap is two edits
		{"é", "e", 2},            // bytes, not runes
	} {
		if got := Levenshtein(c.a, c.b); got != c.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Levenshtein(c.b, c.a); got != c.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d (symmetric)", c.b, c.a, got, c.want)
		}
	}
}
