// Command bench measures what modelcalls costs on the hot path of a model call and writes the
// results table to BENCHMARKS.md. Run it from the repository root:
//
//	make bench            # = go run ./test/bench
//	go run ./test/bench -quick -out /tmp/b.md   # small iteration counts, for trying changes
//
// Everything runs in one process on loopback, against a fast in-process upstream that answers
// instantly with recorded fixture bodies (testdata/, see testdata/SOURCES.md), so that what is
// measured is the proxy in between. Each figure is reported as a ratio or difference against a
// baseline measured in the same run (direct calls, a bare httputil.ReverseProxy, a raw bufio read,
// an fsync on the same disk), with baseline and subject batches interleaved (ABAB), because absolute
// times on a small shared machine mean little.
//
// A mitmproxy peer (mitmdump in reverse mode, recording flows to a file) runs beside ours for the
// latency and throughput rows when mitmdump is installed; -install-mitmproxy installs the Debian
// package first. The peak-memory row runs the proxy in a child process (this binary re-executed with
// -child) that reports its own /proc/self/status. Hot-path micro-benchmarks live next to the code
// they measure (go test -bench) and in this directory's _test.go files; -micro runs them all.
package main
