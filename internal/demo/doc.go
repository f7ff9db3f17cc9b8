// Package demo owns the embedded demo behind `modelcalls demo`: a replay upstream that answers the
// three model-call dialects with recorded real-format responses (JSON and SSE, tool calls included),
// and a scripted two-turn rollout per dialect and transport driven through the capture gateway on
// loopback, merged into rollout records in a temp dir. It needs no network and no model server.
package demo
