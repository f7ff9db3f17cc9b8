//go:build unix && race

package reliability

// raceOn reports a -race build: the tests that pass hundreds of MiB through a proxy process
// (itself this binary, so race-instrumented) use smaller sizes then.
const raceOn = true
