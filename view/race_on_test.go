//go:build race

package view_test

// raceEnabled reports whether the tests run under the race detector, which makes the viewer's
// byte work several times slower: the large-rollout test then reads a smaller file.
const raceEnabled = true
