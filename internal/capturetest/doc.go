// Package capturetest holds what the tests of several packages share: a capture store in a temp
// dir, the read-back of capture lines into one struct (Line), loopback upstreams that answer with
// recorded bodies (and one that echoes over a switched upgrade connection), HTTP calls that return
// a response's status and body (Get, Post, Do), loopback listeners and addresses (Listen,
// ClosedAddr, FreePort), file reads and writes that fail the test (ReadFile, WriteFile), a
// goroutine-safe buffer for logs and process output, and the paths of the one fixture set in the
// repository's top-level testdata directory.
//
// The encoding/json walk of a JSON object's top-level members that tests check spliced lines with
// is in the sub-package jsonmember, which imports nothing of the module so the root package's own
// tests can use it too.
//
// It is imported by tests (and by the benchmark tool under test/bench), never by product code.
package capturetest
