package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestCompressedResponses: compressed upstream bodies reach the client exactly as sent and are
// decoded for the capture only, for JSON and for SSE (sync-flushed per event).
func TestCompressedResponses(t *testing.T) {
	jsonBody := fixture(t, "openai_chat/compat_deepseek_json_reasoning_content_tool_call.json")
	sseBody := fixture(t, "openai_responses/stream_reasoning_function_call.sse")
	for _, coding := range capturetest.Codings {
		for _, stream := range []bool{false, true} {
			name := coding + "/json"
			plain, ctype, path := jsonBody, "application/json", "/v1/chat/completions"
			parts := [][]byte{jsonBody}
			if stream {
				name = coding + "/sse"
				plain, ctype, path = sseBody, "text/event-stream", "/v1/responses"
				parts = capturetest.SSEEvents(sseBody)
			}
			t.Run(name, func(t *testing.T) {
				chunks := capturetest.Compress(coding, parts)
				wire := bytes.Join(chunks, nil)
				e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", ctype)
					w.Header().Set("Content-Encoding", capturetest.ContentEncoding(coding))
					for _, c := range chunks {
						w.Write(c)
						http.NewResponseController(w).Flush()
					}
				})
				resp, got := e.post("z-1", path, `{"model":"m"}`, map[string]string{"Accept-Encoding": "gzip, deflate, br, zstd"})
				if !bytes.Equal(got, wire) {
					t.Fatalf("client got %d bytes, upstream sent %d compressed bytes", len(got), len(wire))
				}
				if ce := resp.Header.Get("Content-Encoding"); ce != capturetest.ContentEncoding(coding) {
					t.Errorf("Content-Encoding %q", ce)
				}
				if r := e.up.Requests()[0]; r.Header.Get("Accept-Encoding") != "gzip, deflate, br, zstd" {
					t.Errorf("upstream saw Accept-Encoding %q", r.Header.Get("Accept-Encoding"))
				}
				l := e.one("z-1")
				if l.ErrorCategory != nil || l.Response == nil {
					t.Fatalf("line: category %s, response %s", l.Category(), l.Response)
				}
				if stream {
					if l.ResponseRaw == nil || *l.ResponseRaw != string(plain) {
						t.Errorf("response_raw is not the decoded stream")
					}
					if deref(l.Record.TokensTotal) != int64(522) {
						t.Errorf("tokens_total %v", deref(l.Record.TokensTotal))
					}
				} else {
					var want bytes.Buffer
					json.Compact(&want, plain)
					if string(l.Response) != want.String() || l.Has("response_raw") {
						t.Errorf("response is not the decoded body")
					}
				}
			})
		}
	}
}

// TestCompressedStreamHold: with a gzip stream flushed per event, the gateway still finds the
// terminal event in the chunk that completes it and holds exactly that chunk.
func TestCompressedStreamHold(t *testing.T) {
	events := capturetest.SSEEvents(fixture(t, "openai_chat/stream_tool_call_usage_only_chunk.sse"))
	chunks := capturetest.Compress("gzip", events)
	up := newSteppedUpstream()
	up.header = http.Header{"Content-Encoding": {"gzip"}}
	e := newEnv(t, up.serve)
	const id = "zhold-1"
	unlock := lockCaptureFile(t, e, id)
	req, _ := http.NewRequest(http.MethodPost, e.url(id, "/v1/chat/completions"), strings.NewReader(`{}`))
	req.Header.Set("Accept-Encoding", "gzip")
	_, cr := startCall(t, req)
	// The last data event and [DONE] share the gzip stream's tail: send all but the [DONE] chunk.
	for _, c := range chunks[:len(chunks)-1] {
		up.chunks <- c
		cr.expect(t, c, "compressed chunk")
	}
	last := chunks[len(chunks)-1]
	up.chunks <- last
	cr.expectHeld(t, last, unlock, "compressed terminal chunk")
	if l := e.one(id); l.ErrorCategory != nil || deref(l.Record.TokensTotal) != int64(100) {
		t.Errorf("line: category %s tokens_total %v", l.Category(), deref(l.Record.TokensTotal))
	}
	close(up.chunks)
}

// TestUndecodableBodies: a corrupt or unknown encoding reaches the client unchanged and the line
// says capture_parse_error, keeping the bytes as raw text.
func TestUndecodableBodies(t *testing.T) {
	good := capturetest.Compress("gzip", [][]byte{fixture(t, "openai_chat/json_text_usage_details.json")})[0]
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)/2] ^= 0xff
	for _, tc := range []struct {
		name, encoding string
		body           []byte
	}{
		{"corrupt gzip", "gzip", corrupt},
		{"truncated gzip", "gzip", good[:len(good)/2]},
		{"unknown coding", "compress", []byte("\x1f\x9d\x90abc")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Encoding", tc.encoding)
				w.Write(tc.body)
			})
			_, got := e.post("bad-1", "/v1/chat/completions", `{}`, map[string]string{"Accept-Encoding": "gzip"})
			if !bytes.Equal(got, tc.body) {
				t.Fatalf("client got different bytes")
			}
			l := e.one("bad-1")
			if l.Category() != "capture_parse_error" || l.Response != nil && string(l.Response) != "null" || !l.Has("response_raw") {
				t.Errorf("line: category %s response %s raw present %v", l.Category(), l.Response, l.Has("response_raw"))
			}
		})
	}
}
