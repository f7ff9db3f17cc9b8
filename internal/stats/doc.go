// Package stats owns the run-wide statistics that `modelcalls stats` prints over a capture directory:
// call and rollout counts, errors by category, token sums, cache hit rate, latency and time-to-first-token
// percentiles, overall, per model, and per rollout or dialect on request (Accumulator.By).
//
// The package knows nothing about capture files or record building: the caller turns each captured
// call into a Call (from the root package's ModelCallRecord) and feeds it to an Accumulator, which
// keeps only counters, sums and the latency samples needed for percentiles. The viewer's run overview
// takes its percentiles (Distribute) and its cache signal (CacheHits) from here too, so both tools
// give the same numbers for the same calls.
package stats
