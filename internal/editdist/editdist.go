// Package editdist measures how far apart two short strings are, for "did you mean" hints: the
// CLI's suggestion of a rollout id, path or column like an unknown one, the viewer's of a filter
// field like an unknown one.
package editdist

import (
	"slices"
	"strings"
)

// Levenshtein is the edit distance of a and b: the fewest single-byte insertions, deletions and
// substitutions that turn a into b. It counts bytes, not runes (ids and field names are ASCII);
// time O(len(a)·len(b)), memory O(len(b)).
func Levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Nearest returns up to n of names that word could have been meant as, closest first: names
// within a third of word's length in edits (at least 1), compared without case, and names that
// contain word or are contained in it (distance 0: an id with more, or less, around it). Names at
// the same distance keep their order in names. Nil when none is near.
func Nearest(word string, names []string, n int) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	lower := strings.ToLower(word)
	limit := max(1, len(word)/3)
	for _, name := range names {
		ln := strings.ToLower(name)
		d := 0
		if !strings.Contains(ln, lower) && !strings.Contains(lower, ln) {
			d = Levenshtein(lower, ln)
		}
		if d <= limit {
			cs = append(cs, cand{name, d})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return a.d - b.d })
	var like []string
	for i := 0; i < len(cs) && i < n; i++ {
		like = append(like, cs[i].name)
	}
	return like
}
