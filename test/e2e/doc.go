// Package e2e owns the end-to-end tests of modelcalls against real agent harnesses (Claude Code,
// Codex, opencode, pi, Qwen Code) and real upstream model servers.
//
// The matrix itself lives in files behind the build tag e2e (run it with `make e2e`, or
// `make e2e-ci` for pi alone on the scripted upstream). This untagged part holds the pieces
// the matrix is built from, each unit-tested on its own:
//
//   - Scripted: a small loopback model server that speaks the three wire dialects (OpenAI Chat
//     Completions, OpenAI Responses, Anthropic Messages; JSON or SSE as the request's "stream"
//     asks). It answers a request that offers a file-reading tool and carries no tool result
//     yet with a call of that tool, and a request that carries the tool result with a text
//     naming what the tool returned, so every harness does a two-turn tool loop.
//   - Tap: a recording reverse proxy put between the modelcalls proxy and the upstream, so the
//     tests know every request that reached the upstream and every byte it answered.
//   - UsageOf: an independent, test-side reading of the usage an upstream reported in a body
//     the tap recorded, to compare with what modelcalls captured.
//
// None of this is part of the product: the gateway never imports it.
package e2e
