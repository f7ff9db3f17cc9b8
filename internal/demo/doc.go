// Package demo owns the embedded demo behind `modelcalls demo`: a replay upstream that answers the
// three model-call dialects with recorded real-format responses (JSON and SSE, tool calls included),
// and a scripted two-turn rollout per dialect and transport driven through the capture gateway on
// loopback, merged into rollout records in a temp dir. It needs no network and no model server.
//
// Every rollout is the same conversation, told in its dialect: the user asks for the weather in
// Tokyo, the model calls get_weather for Tokyo, the script runs the tool (weatherTool) and sends the
// result, the model answers with it. The recorded responses (replay/, SOURCES.md) belong to that
// conversation: same model as the request, tool calls the request's tools allow, answers that use
// the tool's result, token counts that fit the texts (TestConversationsCoherent).
package demo
