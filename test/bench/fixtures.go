package main

import (
	"bytes"
	"embed"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// testdata holds the bench's own fixtures, the two client requests (testdata/SOURCES.md); the
// recorded provider bodies and NeMo Gym's capture dir come from the repository's one fixture set
// (testdata/ at the root, located by capturetest.Testdata).
//
//go:embed testdata
var testdata embed.FS

// fixtures are the recorded bodies the upstream serves and the clients send.
type fixtures struct {
	jsonResponse []byte   // a recorded Responses API JSON body (~2 KiB)
	jsonRequest  []byte   // a real agent's Responses request (pi), stream false
	sseRequest   []byte   // a real agent's Chat Completions streaming request (pi)
	sseEvents    [][]byte // 200 Chat Completions events, each ending in "\n\n", the last "data: [DONE]"
	sseHead      [][]byte // big-stream pieces: the first event,
	sseMiddle    [][]byte // the delta events repeated to fill the size,
	sseTail      [][]byte // and the finish, usage and [DONE] events
	gymLines     [][]byte // valid capture lines written by NeMo Gym (templates for the merge data set)
	// contentMiddle replaces sseMiddle in the content-heavy big stream: text deltas in the
	// recording's chunk envelope (same id, model, fingerprint), about half of each event being text
	// the reassembly must keep.
	contentMiddle [][]byte
	tok           *tokenBodies // the token rows' Chat request and vLLM answers (tokens.go)
}

// contentText is the text of one content delta of the content-heavy stream (about 200 bytes).
const contentText = "Streaming a long answer token by token: each chunk carries a piece of prose that the " +
	"capture has to keep, because the reconstructed message is the record's response. Filler, repeated. "

// streamEvents is the number of events of the standard SSE stream every streaming row replays.
const streamEvents = 200

func loadFixtures() (*fixtures, error) {
	read := func(name string) ([]byte, error) {
		b, err := testdata.ReadFile(path.Join("testdata", name))
		if err != nil {
			return nil, fmt.Errorf("read fixture: %w", err)
		}
		return b, nil
	}
	shared := func(elem ...string) ([]byte, error) {
		b, err := os.ReadFile(capturetest.Testdata(elem...))
		if err != nil {
			return nil, fmt.Errorf("read fixture: %w", err)
		}
		return b, nil
	}
	f := &fixtures{}
	var err error
	if f.jsonResponse, err = shared("fixtures", "openai_responses", "json_reasoning_text_function_call_cached.json"); err != nil {
		return nil, err
	}
	if f.jsonRequest, err = read("request_responses.json"); err != nil {
		return nil, err
	}
	if f.sseRequest, err = read("request_chat_stream.json"); err != nil {
		return nil, err
	}
	raw, err := shared("fixtures", "openai_chat", "stream_tool_call_usage_only_chunk.sse")
	if err != nil {
		return nil, err
	}
	events := splitEvents(raw)
	// The recording is: role+tool-call header, argument deltas, finish chunk, usage-only chunk, [DONE].
	if len(events) < 5 || !bytes.HasPrefix(events[len(events)-1], []byte("data: [DONE]")) {
		return nil, fmt.Errorf("sse fixture: unexpected shape (%d events)", len(events))
	}
	f.sseHead = events[:1]
	f.sseMiddle = events[1 : len(events)-3]
	f.sseTail = events[len(events)-3:]
	f.sseEvents = append(f.sseEvents, f.sseHead...)
	for i := 0; len(f.sseEvents) < streamEvents-len(f.sseTail); i++ {
		f.sseEvents = append(f.sseEvents, f.sseMiddle[i%len(f.sseMiddle)])
	}
	f.sseEvents = append(f.sseEvents, f.sseTail...)
	for i := range 8 {
		f.contentMiddle = append(f.contentMiddle, fmt.Appendf(nil,
			"data: {\"id\":\"chatcmpl-ABfw8AOXnoa2kzy11vVTSjuQhHCQr\",\"object\":\"chat.completion.chunk\",\"created\":1727346176,"+
				"\"model\":\"gpt-4o-2024-08-06\",\"system_fingerprint\":\"fp_7568d46099\",\"choices\":[{\"index\":0,"+
				"\"delta\":{\"content\":\"%d %s\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n", i, contentText))
	}

	if f.tok, err = newTokenBodies(f.sseRequest); err != nil {
		return nil, err
	}

	ents, err := os.ReadDir(capturetest.GymCaptureDir())
	if err != nil {
		return nil, fmt.Errorf("read gym capture fixtures: %w", err)
	}
	names := []string{}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), capture.CaptureSuffix) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := shared("gym-capture", "capture", n)
		if err != nil {
			return nil, err
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 || capture.CheckLine(line) != nil {
				continue // blank, or the torn line of 3-0: the merge data set holds only valid lines
			}
			f.gymLines = append(f.gymLines, line)
		}
	}
	if len(f.gymLines) == 0 {
		return nil, fmt.Errorf("gym capture fixtures: no valid lines")
	}
	return f, nil
}

// splitEvents splits an SSE body into events, each keeping its terminating blank line ("\n\n" is
// appended to an unterminated last event).
func splitEvents(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.Index(b, []byte("\n\n"))
		if i < 0 {
			ev := append(bytes.Clone(b), '\n', '\n')
			out = append(out, ev)
			break
		}
		out = append(out, b[:i+2])
		b = b[i+2:]
	}
	return out
}

// sseBody is the whole standard stream as one body.
func (f *fixtures) sseBody() []byte { return bytes.Join(f.sseEvents, nil) }
