package demo

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcalls/modelcalls/dialect"
)

//go:embed replay/*.json replay/*.sse
var replayFS embed.FS

// rateLimitHeader on a request makes the replay upstream answer it with the recorded 429.
const rateLimitHeader = "X-Demo-Rate-Limit"

// replayUpstream is the demo's model server: for each observed path it answers with a recorded
// response of that dialect. A request that already carries a tool result gets the final answer;
// otherwise it gets a tool call. "stream": true selects the SSE recording, sent one event per write
// with a flush, as a real server streams. A request with rateLimitHeader gets the recorded
// Anthropic 429 error.
type replayUpstream struct{}

func (replayUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d, ok := dialect.ForPath(r.URL.Path)
	if !ok || r.Method != http.MethodPost {
		http.Error(w, "the demo upstream serves POST /v1/responses, /v1/chat/completions and /v1/messages", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read request: "+err.Error(), http.StatusBadRequest)
		return
	}
	var req struct {
		Stream bool `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "request is not JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	if r.Header.Get(rateLimitHeader) != "" {
		b, _ := replayFS.ReadFile("replay/messages_error_429.json")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write(b)
		return
	}
	turn := "tool"
	if hasToolResult(d, body) {
		turn = "answer"
	}
	if !req.Stream {
		b, err := replayFS.ReadFile(fmt.Sprintf("replay/%s_%s.json", d, turn))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
		return
	}
	stream, err := sseBody(d, turn)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for _, ev := range splitEvents(stream) {
		if _, err := w.Write(ev); err != nil {
			return
		}
		rc.Flush()
	}
}

// sseBody returns the recorded stream of a dialect and turn. The streamed Responses answer has no
// recorded stream: it is framed from the response object in <dialect>_<turn>.stream.json as
// response.created then response.completed.
func sseBody(d dialect.Dialect, turn string) ([]byte, error) {
	if b, err := replayFS.ReadFile(fmt.Sprintf("replay/%s_%s.sse", d, turn)); err == nil {
		return b, nil
	}
	js, err := replayFS.ReadFile(fmt.Sprintf("replay/%s_%s.stream.json", d, turn))
	if err != nil {
		return nil, err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, js); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":%s}\n\n",
		strings.Replace(compact.String(), `"status":"completed"`, `"status":"in_progress"`, 1))
	fmt.Fprintf(&b, "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":1,\"response\":%s}\n\n", compact.String())
	return b.Bytes(), nil
}

// splitEvents cuts an SSE body after each blank line, keeping every byte; a last event without its
// blank line (as in some recordings) is its own piece.
func splitEvents(b []byte) [][]byte {
	events := bytes.SplitAfter(b, []byte("\n\n"))
	if last := len(events) - 1; len(events[last]) == 0 {
		events = events[:last]
	}
	return events
}

// hasToolResult reports whether a request carries a tool result in its dialect's shape: a Chat
// message with role "tool", an Anthropic content block of type "tool_result", a Responses input
// item of type "function_call_output".
func hasToolResult(d dialect.Dialect, body []byte) bool {
	var needle string
	switch d {
	case dialect.Chat:
		needle = `"role":"tool"`
	case dialect.Messages:
		needle = `"type":"tool_result"`
	case dialect.Responses:
		needle = `"type":"function_call_output"`
	}
	var compact bytes.Buffer
	if json.Compact(&compact, body) != nil {
		return false
	}
	return bytes.Contains(compact.Bytes(), []byte(needle))
}
