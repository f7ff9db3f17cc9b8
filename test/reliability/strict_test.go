//go:build unix

package reliability

import (
	"bytes"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/internal/jsonscan/orjsonrules"
)

// Payloads NeMo Gym's reader (orjson) cannot store as JSON: numbers that overflow a double and
// escaped surrogates without their other half. Each reaches the gateway from the client or from the
// model, plain or streamed; every line the gateway writes must still read back in a strict reader
// with orjson's rules as one exchange, the payload kept as text where it cannot be an object, and
// the client must get its bytes unchanged.

// hostileCase is one captured call: the request the client sends and what the upstream answers.
type hostileCase struct {
	name, path string
	request    string
	stream     bool
	events     []string // SSE events (stream) ...
	body       string   // ... or one JSON body
	// What the line must hold: the request/response kept as an object, or null with the raw text.
	requestObject, responseObject bool
}

var hostileCases = []hostileCase{
	{name: "request temperature 1e400", path: "/v1/chat/completions",
		request: `{"model":"m","temperature":1e400,"messages":[{"role":"user","content":"hi"}]}`,
		body:    chatBody(`"ok"`), requestObject: false, responseObject: true},
	{name: "request negative overflow and long mantissa", path: "/v1/chat/completions",
		request: `{"model":"m","top_p":-1e400,"seed":1.79769313486231581e308,"messages":[]}`,
		body:    chatBody(`"ok"`), requestObject: false, responseObject: true},
	{name: "request lone high surrogate", path: "/v1/chat/completions",
		request: `{"model":"m","messages":[{"role":"user","content":"cut emoji \ud83d"}]}`,
		body:    chatBody(`"ok"`), requestObject: false, responseObject: true},
	{name: "request lone low surrogate in a key", path: "/v1/messages",
		request:       `{"model":"m","max_tokens":5,"metadata":{"\udc00":1},"messages":[{"role":"user","content":"hi"}]}`,
		body:          `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`,
		requestObject: false, responseObject: true},
	{name: "response 1e999 in logprobs", path: "/v1/chat/completions",
		request:       `{"model":"m","messages":[]}`,
		body:          `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"logprobs":{"content":[{"token":"x","logprob":-1e999}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`,
		requestObject: true, responseObject: false},
	{name: "response lone surrogate in content", path: "/v1/chat/completions",
		request: `{"model":"m","messages":[]}`,
		body:    chatBody(`"half \ud800 of a pair"`), requestObject: true, responseObject: false},
	{name: "responses response.completed envelope with 1e400 and a lone surrogate", path: "/v1/responses", stream: true,
		request: `{"model":"m","input":"hi","stream":true}`,
		events: []string{
			`event: response.created` + "\n" + `data: {"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`,
			`event: response.output_text.delta` + "\n" + `data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"a\udc00b"}`,
			`event: response.completed` + "\n" + `data: {"type":"response.completed","response":{"id":"resp_1","object":"response","status":"completed","temperature":1e400,"output":[{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"a\udc00b"}]}],"usage":{"input_tokens":2,"output_tokens":2,"total_tokens":4}}}`,
		},
		requestObject: true, responseObject: false},
	{name: "chat stream splitting a surrogate pair over two deltas", path: "/v1/chat/completions", stream: true,
		request: `{"model":"m","messages":[],"stream":true}`,
		events: []string{
			`data: {"id":"c2","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"\ud83d"},"finish_reason":null}]}`,
			`data: {"id":"c2","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"\ude00"},"finish_reason":null}]}`,
			`data: {"id":"c2","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":1e400}}`,
			`data: [DONE]`,
		},
		requestObject: true},
	{name: "messages stream with a lone surrogate and an overflowing usage", path: "/v1/messages", stream: true,
		request: `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		events: []string{
			`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1e400}}}`,
			`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x\udbff"}}`,
			`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
			`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`,
			`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
		},
		requestObject: true},
	// Controls: what orjson accepts stays an object.
	{name: "paired surrogates and an underflowing number stay objects", path: "/v1/chat/completions",
		request: `{"model":"m","temperature":1e-400,"messages":[{"role":"user","content":"\ud83d\ude00"}]}`,
		body:    chatBody(`"\ud83d\ude00 1.7976931348623157e308"`), requestObject: true, responseObject: true},
}

func chatBody(content string) string {
	return `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` + content + `},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
}

// sseBody is the wire form of a case's events.
func (c hostileCase) sseBody() string {
	var b strings.Builder
	for _, e := range c.events {
		b.WriteString(e)
		b.WriteString("\n\n")
	}
	return b.String()
}

func TestHostilePayloadsWriteLinesNeMoGymReads(t *testing.T) {
	byName := map[string]hostileCase{}
	for _, c := range hostileCases {
		byName[c.name] = c
	}
	up := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		c, ok := byName[r.Header.Get("X-Hostile-Case")]
		if !ok {
			http.Error(w, "unknown case", http.StatusBadRequest)
			return
		}
		if c.stream {
			sseHeaders(w)
			w.Write([]byte(c.sseBody()))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(c.body))
	})
	g := startGateway(t, up.URL, nil)

	ids := map[string]string{}
	for i, c := range hostileCases {
		id := "hostile-" + string(rune('a'+i))
		ids[c.name] = id
		status, _, got, err := g.call(id, c.path, []byte(c.request), "X-Hostile-Case", c.name)
		if err != nil || status != http.StatusOK {
			t.Fatalf("%s: status %d, %v", c.name, status, err)
		}
		want := c.body
		if c.stream {
			want = c.sseBody()
		}
		if string(got) != want {
			t.Errorf("%s: the client got different bytes than the upstream sent:\n got %q\nwant %q", c.name, got, want)
		}
	}
	g.drain()

	// Every line of the capture dir, as NeMo Gym's tolerant read sees it: zero damaged lines.
	files, err := filepath.Glob(filepath.Join(g.dir, "*"+capture.CaptureSuffix))
	if err != nil || len(files) != len(hostileCases) {
		t.Fatalf("%d capture files for %d cases (%v)", len(files), len(hostileCases), err)
	}
	var lines [][]byte
	for _, f := range files {
		data := capturetest.ReadFile(t, f)
		for n, reason := range orjsonrules.CheckLines(data) {
			t.Errorf("%s line %d is damaged under orjson's rules: %v", filepath.Base(f), n, reason)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) != len(hostileCases) {
		t.Fatalf("%d lines for %d calls", len(lines), len(hostileCases))
	}
	verdicts, err := orjsonrules.Orjson(lines)
	switch {
	case errors.Is(err, orjsonrules.ErrNoOrjson):
		t.Log("python3 has no orjson module: lines checked by orjsonrules only")
	case err != nil:
		t.Fatal(err)
	default:
		for i, v := range verdicts {
			if v != nil {
				t.Errorf("orjson.loads refuses a line the gateway wrote: %v\n%.300s", v, lines[i])
			}
		}
	}

	for _, c := range hostileCases {
		ex := g.only(ids[c.name]) // our strict read, and a record builds
		if got := ex.Request != nil && string(ex.Request) != "null"; got != c.requestObject {
			t.Errorf("%s: request stored as an object = %v, want %v", c.name, got, c.requestObject)
		}
		if !c.requestObject && str(ex.RequestRaw) != c.request {
			t.Errorf("%s: request_raw = %q, want the body as sent %q", c.name, str(ex.RequestRaw), c.request)
		}
		hasResponse := ex.Response != nil && string(ex.Response) != "null"
		if !c.stream && hasResponse != c.responseObject {
			t.Errorf("%s: response stored as an object = %v, want %v", c.name, hasResponse, c.responseObject)
		}
		if !c.stream && !c.responseObject && str(ex.ResponseRaw) != c.body {
			t.Errorf("%s: response_raw = %q, want the body as sent", c.name, str(ex.ResponseRaw))
		}
		if c.stream && str(ex.ResponseRaw) != c.sseBody() {
			t.Errorf("%s: response_raw is not the stream as sent", c.name)
		}
		if c.stream && hasResponse {
			if err := orjsonrules.Check(ex.Response); err != nil {
				t.Errorf("%s: reassembled response breaks orjson's rules: %v", c.name, err)
			}
		}
	}
	// The one stream whose terminal envelope carries both hazards keeps no response object.
	if ex := g.only(ids[hostileCases[6].name]); ex.Response != nil && string(ex.Response) != "null" {
		t.Errorf("response.completed envelope with 1e400 stored as an object: %s", ex.Response)
	}
}

// TestReadersRefuseLinesNeMoGymRefuses: our readers apply orjson's rules to lines others wrote: a
// line with 1e400 or a lone surrogate is damaged for them as for NeMo Gym, whoever wrote it.
func TestReadersRefuseLinesNeMoGymRefuses(t *testing.T) {
	good := `{"model_call_id":"4c5ba90cd72e4127a448b4a0442f1c95","dialect":"chat","model_ref":null,"started_at":1.0,"completed_at":2.0,"latency_ms":1.0,"latency_ttft_ms":null,"status_code":200,"error_category":null,"request":{"messages":[]},"response":%s}`
	lines := []string{
		strings.Replace(good, "%s", `{"choices":[]}`, 1),
		strings.Replace(good, "%s", `{"temperature":1e400}`, 1),
		strings.Replace(good, "%s", `{"choices":[{"message":{"content":"\ud800"}}]}`, 1),
		strings.Replace(good, "%s", `{"choices":[{"message":{"content":"\udfff\ud800"}}]}`, 1),
		strings.Replace(good, "%s", `{"choices":[{"message":{"content":"\ud83d\ude00"}}],"t":1e-400}`, 1),
	}
	dir := t.TempDir()
	capturetest.WriteFile(t, filepath.Join(dir, "r1"+capture.CaptureSuffix), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	store := openStore(t, capture.Open, dir)
	recs, damaged, err := modelcalls.ReadAvailableRecords(store, "r1")
	if err != nil {
		t.Fatal(err)
	}
	var idx []int
	for _, r := range recs {
		idx = append(idx, r.CallIndex)
	}
	if damaged != 3 || len(idx) != 2 || idx[0] != 0 || idx[1] != 4 {
		t.Errorf("records at %v with %d damaged, want records at [0 4] and 3 damaged (as orjson reads them)", idx, damaged)
	}
	for i, l := range lines {
		ours, rules := capture.CheckLine([]byte(l)), orjsonrules.Check([]byte(l))
		if (ours == nil) != (rules == nil) {
			t.Errorf("line %d: CheckLine = %v, orjson rules say %v", i, ours, rules)
		}
	}
}
