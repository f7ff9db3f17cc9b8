//go:build race

package dialect

// raceOn reports a -race build: TestReassemblyWorkIsLinear, which measures CPU time and takes 40 s
// under the race detector's instrumentation, is skipped then.
const raceOn = true
