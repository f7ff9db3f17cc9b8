// Package rundiff compares two runs of the same rollout: a replay and the recording it replays,
// two attempts at one task, or the runs before and after a prompt change. It names the first call
// and the first message of that call where the runs part, and summarises every call side by side
// (status, model, tokens, latency, tool calls). `modelcalls diff` prints it and the viewer's
// /api/diff serves it; both read the capture files through Load, one line in memory at a time.
//
// # What is compared
//
// Calls are paired by position in started_at order (capture order for ties and unknown times):
// the first call of A with the first of B, and so on; a call only one run made is "missing" in
// the other. A pair differs when any of these differ:
//
//   - "dialect": the API the call used (chat, responses, messages, ...); named first, since the
//     messages and answers of two dialects differ in shape even when they say the same;
//   - "model": the record's model;
//   - "messages": what the request sent, taken generically from the request object: its
//     top-level "system" and "instructions" (when not null), then each element of "messages"
//     (Chat Completions, Messages) or "input" (Responses; a string input is one message);
//   - "status": the HTTP status;
//   - "finish_reason": the record's finish_reason (or response_status);
//   - "tool_calls": the tool calls the model asked for, by name and arguments;
//   - "answer": what the model answered, taken from the response object: Chat Completions
//     "choices", Responses "output", Messages "content";
//   - "error": the record's error category.
//
// Messages, answers and tool arguments are compared as JSON values (key order and spacing do not
// matter) with the keys that name one run's objects left out, since two runs never share them:
// "id", "call_id", "tool_call_id", "tool_use_id", "signature" and "encrypted_content". Tokens and
// latency never make a pair differ (no two runs take the same time); they are summarised.
package rundiff

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/record"
)

// Message is one message a call's request sent, as compared.
type Message struct {
	Role    string `json:"role"`    // the element's "role", else its "type"; "system" for system / instructions
	Excerpt string `json:"excerpt"` // up to ExcerptLen characters of its first text
	key     uint64
}

// Call is one call of a run, as compared and summarised.
type Call struct {
	Index     int       `json:"call_index"`
	StartedAt *float64  `json:"started_at"` // seconds since the Unix epoch
	Dialect   *string   `json:"dialect"`    // chat, responses, messages, ...
	Model     *string   `json:"model"`
	Status    *int      `json:"status_code"`
	Finish    *string   `json:"finish_reason"` // finish_reason, else response_status
	Error     *string   `json:"error_category"`
	TokensIn  *int64    `json:"tokens_in"`
	TokensOut *int64    `json:"tokens_out"`
	LatencyMS *float64  `json:"latency_total_ms"`
	ToolCalls []string  `json:"tool_calls"` // "name(arguments)", arguments cut to ExcerptLen
	Messages  []Message `json:"messages"`
	Answer    string    `json:"answer"` // up to ExcerptLen characters of the answer's first text
	toolsKey  uint64
	answerKey uint64
}

// Run is one side of a comparison: a rollout read from a capture dir.
type Run struct {
	Dir     string `json:"dir"`
	Rollout string `json:"rollout"`
	Calls   []Call `json:"calls"` // in started_at order
	Damaged int    `json:"damaged_lines"`
}

// ExcerptLen is the most characters an excerpt keeps.
const ExcerptLen = 120

// Load reads rollout id from store, one capture line at a time. dir is only recorded (for
// messages). A rollout with no capture file gives a Run without calls.
func Load(store *capture.Store, dir, id string) (*Run, error) {
	r := &Run{Dir: dir, Rollout: id, Calls: []Call{}}
	_, err := store.ScanFrom(id, capture.Resume{}, func(l capture.ScannedLine) {
		if capture.CheckLine(l.Data) != nil {
			r.Damaged++
			return
		}
		rec, err := record.BuildRecord(l.Data, l.Index)
		if err != nil {
			r.Damaged++
			return
		}
		r.Calls = append(r.Calls, summarise(rec))
	})
	if err != nil {
		return nil, fmt.Errorf("read rollout %s in %s: %w", id, dir, err)
	}
	sortCalls(r)
	return r, nil
}

// sortCalls puts r's calls in started_at order (capture order for ties, unknown times first).
func sortCalls(r *Run) {
	slices.SortStableFunc(r.Calls, func(a, b Call) int {
		return cmp.Or(cmp.Compare(f64(a.StartedAt), f64(b.StartedAt)), cmp.Compare(a.Index, b.Index))
	})
}

func summarise(rec *record.ModelCallRecord) Call {
	c := Call{Index: rec.CallIndex, StartedAt: rec.StartedAt, Dialect: rec.Dialect, Model: rec.Model, Status: rec.StatusCode,
		Finish: cmp.Or(rec.FinishReason, rec.ResponseStatus), Error: rec.ErrorCategory, TokensIn: rec.TokensIn,
		TokensOut: rec.TokensOut, LatencyMS: rec.LatencyTotalMS, ToolCalls: []string{}, Messages: []Message{}}
	var tools strings.Builder
	for _, t := range rec.ToolCalls {
		name := deref(t.Name)
		args := canonical(t.Arguments)
		c.ToolCalls = append(c.ToolCalls, name+"("+cut(args)+")")
		tools.WriteString(name + "\x00" + args + "\x00")
	}
	c.toolsKey = maphash.String(seed, tools.String())
	if rec.Request != nil {
		c.Messages = requestMessages(rec.Request)
	}
	if rec.Response != nil {
		var resp map[string]json.RawMessage
		if json.Unmarshal(rec.Response, &resp) == nil {
			for _, k := range []string{"choices", "output", "content"} {
				if v, ok := resp[k]; ok {
					s := canonical(v)
					c.answerKey = maphash.String(seed, k+"\x00"+s)
					c.Answer = cut(firstText(v))
					break
				}
			}
		}
	}
	return c
}

// requestMessages lists what a request sent: system, instructions, then messages or input.
func requestMessages(req []byte) []Message {
	var r map[string]json.RawMessage
	if json.Unmarshal(req, &r) != nil {
		return []Message{{Role: "request", Excerpt: cut(string(req)), key: maphash.Bytes(seed, req)}}
	}
	msgs := []Message{}
	for _, k := range []string{"system", "instructions"} {
		if v, ok := r[k]; ok && !isNull(v) {
			msgs = append(msgs, message("system", v))
		}
	}
	for _, k := range []string{"messages", "input"} {
		v, ok := r[k]
		if !ok || isNull(v) {
			continue
		}
		var list []json.RawMessage
		if json.Unmarshal(v, &list) != nil {
			msgs = append(msgs, message("user", v)) // a string input
			continue
		}
		for _, el := range list {
			var head struct{ Role, Type string }
			json.Unmarshal(el, &head)
			msgs = append(msgs, message(cmp.Or(head.Role, head.Type, "?"), el))
		}
	}
	return msgs
}

func message(role string, v json.RawMessage) Message {
	return Message{Role: role, Excerpt: cut(firstText(v)), key: maphash.String(seed, role+"\x00"+canonical(v))}
}

var seed = maphash.MakeSeed()

// runKeys are the keys whose values name one run's objects; comparisons leave them out.
var runKeys = map[string]bool{"id": true, "call_id": true, "tool_call_id": true, "tool_use_id": true,
	"signature": true, "encrypted_content": true}

// canonical is v as JSON with sorted keys, no spacing and without runKeys; text that is not JSON
// is returned as it is.
func canonical(v json.RawMessage) string {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return string(v)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(strip(x))
	return strings.TrimSuffix(b.String(), "\n")
}

func strip(x any) any {
	switch v := x.(type) {
	case map[string]any:
		for k := range v {
			if runKeys[k] {
				delete(v, k)
			} else {
				v[k] = strip(v[k])
			}
		}
	case []any:
		for i := range v {
			v[i] = strip(v[i])
		}
	}
	return x
}

// firstText is the first string found under a "text", "content", "output", "arguments" or
// "input" key (depth first), or the value itself when it is a string.
func firstText(v json.RawMessage) string {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return string(v)
	}
	var find func(x any) string
	find = func(x any) string {
		switch v := x.(type) {
		case string:
			return v
		case map[string]any:
			for _, k := range []string{"text", "content", "output", "message", "arguments", "input", "thinking"} {
				if s := find(v[k]); s != "" {
					return s
				}
			}
		case []any:
			for _, e := range v {
				if s := find(e); s != "" {
					return s
				}
			}
		}
		return ""
	}
	return find(x)
}

// cut keeps the first ExcerptLen characters of s, its whitespace runs as one space.
func cut(s string) string {
	if len(s) > 8*ExcerptLen {
		s = s[:8*ExcerptLen]
	}
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= ExcerptLen {
		return s
	}
	r := []rune(s)
	return string(r[:ExcerptLen]) + "…"
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func f64(p *float64) float64 {
	if p == nil {
		return -1 // unknown times sort first, as the viewer's new-vs-history rule takes them
	}
	return *p
}
