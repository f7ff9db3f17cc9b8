package editdist

import (
	"slices"
	"testing"
)

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

func TestNearest(t *testing.T) {
	tests := []struct {
		word  string
		names []string
		n     int
		want  []string
	}{
		{"rewrd", []string{"reward", "status", "rewards"}, 3, []string{"reward"}}, // rewards is two edits away
		{"r1", []string{"r1-a", "r2", "x9"}, 3, []string{"r1-a", "r2"}},           // contains first, then one edit
		{"rollout-12", []string{"12"}, 3, []string{"12"}},                         // contained in the word
		{"CAPTURES", []string{"captures", "capture"}, 3, []string{"captures", "capture"}},
		{"abc", []string{"xyz"}, 3, nil},
		{"ab", []string{"ab1", "ab2", "ab3", "ab4"}, 2, []string{"ab1", "ab2"}}, // ties keep order, n caps
	}
	for _, tt := range tests {
		if got := Nearest(tt.word, tt.names, tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("Nearest(%q, %q, %d) = %q, want %q", tt.word, tt.names, tt.n, got, tt.want)
		}
	}
}
