// Package reliability holds black-box tests of modelcalls' central promise: a model call
// is never broken by capture, and a capture is never silently lost. The tests import the public
// packages (capture, gateway, the root package, internal/cli) and inject the faults users hit:
// writers killed mid-line, many processes appending at once, bursts of calls, full disks and write
// errors, misbehaving upstreams and clients, hostile input, and merges racing the writers.
//
// Multi-process tests re-execute the test binary as a helper process (see helperEnv in
// main_test.go); the helper runs one role (a writer, a claim holder, or the real `modelcalls proxy`
// command) and reports on stdout. The package has no non-test code besides this comment.
// docs/reliability.md lists every test, its figures and how to run the fuzz targets.
package reliability
