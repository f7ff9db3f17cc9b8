package replay

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/dialect"
	"github.com/modelcalls/modelcalls/sse"
)

// recorded is one captured call, ready to be answered.
type recorded struct {
	index       int    // capture index in the rollout's file (0-based)
	line        int    // 1-based line number, for messages
	modelCallID string // the recorded model_call_id
	dialect     dialect.Dialect

	request    *value  // the request object with the ignored keys removed; nil when none
	requestRaw *string // the request body when it was not a JSON object

	status      int           // recorded HTTP status; 0 when none was recorded (the client left first)
	latency     time.Duration // latency_ms
	ttft        time.Duration // latency_ttft_ms; equal to latency when null (no body byte arrived)
	body        []byte        // response_raw when present, else the stored response object
	stream      bool          // body is an event stream: replayed event by event
	contentType string
	// abort: the recorded call ended with the upstream connection failing mid-body (error_category
	// connection or timeout on a relayed response), or the client going away (cancelled): the
	// replay sends what was recorded and then breaks the connection, as the client then saw.
	abort     bool
	cancelled bool
	used      bool // answered already (strict: each recorded call answers once)
}

// loadRecorded builds the recorded calls of one rollout from its readable capture lines.
func loadRecorded(entries []capture.Entry, ignore []ignoreRule) ([]*recorded, error) {
	out := make([]*recorded, 0, len(entries))
	for _, e := range entries {
		var l capture.Exchange
		if err := json.Unmarshal(e.Data, &l); err != nil {
			return nil, fmt.Errorf("capture line %d: %w", e.Line, err)
		}
		rc := &recorded{
			index:       e.Index,
			line:        e.Line,
			modelCallID: l.ModelCallID,
			dialect:     dialect.Dialect(l.Dialect),
			requestRaw:  l.RequestRaw,
			latency:     msDuration(l.LatencyMS),
		}
		rc.ttft = rc.latency
		if l.LatencyTTFTMS != nil {
			rc.ttft = min(msDuration(*l.LatencyTTFTMS), rc.latency)
		}
		if l.StatusCode != nil {
			rc.status = *l.StatusCode
		}
		if isObject(l.Request) {
			v, err := parseValue(l.Request)
			if err != nil {
				return nil, fmt.Errorf("capture line %d: request: %w", e.Line, err)
			}
			rc.request = v.without(ignore)
		}
		category := ""
		if l.ErrorCategory != nil {
			category = *l.ErrorCategory
		}
		rc.cancelled = category == capture.CategoryCancelled
		local := l.ResponseSource != nil && *l.ResponseSource == "local"
		rc.abort = rc.cancelled || (!local && (category == capture.CategoryConnection || category == capture.CategoryTimeout))
		switch {
		case l.ResponseRaw != nil:
			rc.body = []byte(*l.ResponseRaw)
			if len(sse.Parse(rc.body)) > 0 {
				rc.stream, rc.contentType = true, "text/event-stream"
			} else if json.Valid(rc.body) {
				rc.contentType = "application/json"
			} else {
				rc.contentType = "text/plain; charset=utf-8"
			}
		case isObject(l.Response):
			rc.body = l.Response
			rc.contentType = "application/json"
		}
		out = append(out, rc)
	}
	return out, nil
}

func isObject(raw json.RawMessage) bool {
	s := strings.TrimLeft(string(raw), " \t\r\n")
	return strings.HasPrefix(s, "{")
}

func msDuration(ms float64) time.Duration {
	if ms <= 0 {
		return 0
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// chunks splits the body into the pieces the replay sends one at a time: each SSE event with the
// blank line that ends it (bytes kept exactly; a trailing piece without its blank line, as a
// truncated stream ends, is the last piece), or the whole body for anything else.
func (rc *recorded) chunks() [][]byte {
	if len(rc.body) == 0 {
		return nil
	}
	if !rc.stream {
		return [][]byte{rc.body}
	}
	return splitEvents(rc.body)
}

// splitEvents cuts an event stream after every blank line (a line break right after a line break,
// with CRLF, LF and CR as line breaks, as the SSE standard frames events).
func splitEvents(b []byte) [][]byte {
	var out [][]byte
	start := 0
	atLineStart := true // the previous byte ended a line (or we are at the start)
	for i := 0; i < len(b); {
		c := b[i]
		if c != '\r' && c != '\n' {
			atLineStart = false
			i++
			continue
		}
		end := i + 1
		if c == '\r' && end < len(b) && b[end] == '\n' {
			end++
		}
		if atLineStart && i > start {
			out = append(out, b[start:end])
			start = end
		}
		atLineStart = true
		i = end
	}
	if start < len(b) {
		out = append(out, b[start:])
	}
	return out
}
