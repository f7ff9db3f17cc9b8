//go:build unix && !race

package reliability

// raceOn reports a -race build (see race_on_test.go).
const raceOn = false
