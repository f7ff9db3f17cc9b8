// Package view is the local web viewer over capture dirs (`modelcalls view`): an http.Handler that
// serves an embedded single-page front end and the JSON API it draws from, backed by an Index that
// rescans the dirs and keeps one summary per rollout.
//
// Pages: the run overview (calls, errors by category, tokens, cache hit rate, latency and TTFT
// histograms, calls over time, per model and dialect, gaps), the rollout list (sorted, filtered
// and paged over the summaries only, columns chosen), one rollout (waterfall timeline, the calls' lineage tree from
// package lineage, calls, the conversation of a call with new messages told apart from resent
// history and each message's author), its transcript (every
// message once), one call (request and response rendered, its generated tokens coloured by logprob from package
// tokens, record fields with units, provenance, raw payloads on demand), a search across the run, and two runs side by side (package rundiff). The page long-polls
// GET /api/changes and redraws what changed, so calls appear while a gateway writes.
//
// The viewer only reads: stores are opened with capture.OpenExisting and read with the store's
// shared-lock reads; pending calls are the rollouts' live claims (capture.Store.Claims). Payload
// text reaches the page only through text nodes, under a Content-Security-Policy that allows the
// viewer's own script alone. The API, the filter syntax and the choices made here are documented
// in docs/view.md.
package view
