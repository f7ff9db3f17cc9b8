package replay

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// canned is the answer of a test upstream.
func canned(status int, contentType string, body []byte) capturetest.Answer {
	return capturetest.Answer{Status: status, ContentType: contentType, Body: body}
}

// exchangeCase is one call recorded through the gateway and replayed.
type exchangeCase struct {
	path, request string
	answer        capturetest.Answer
}

func recordedCases(t *testing.T) []exchangeCase {
	return []exchangeCase{
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"weather?"}],"stream_options":{"include_usage":true}}`,
			canned(200, "text/event-stream", capturetest.Fixture(t, "openai_chat/stream_tool_call_usage_only_chunk.sse"))},
		{"/v1/responses", `{"model":"m","stream":true,"input":"weather?"}`,
			canned(200, "text/event-stream", capturetest.Fixture(t, "openai_responses/stream_reasoning_function_call.sse"))},
		{"/v1/messages", `{"model":"claude","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"weather?"}]}`,
			canned(200, "text/event-stream", capturetest.Fixture(t, "anthropic_messages/stream_tool_use_input_json_delta.sse"))},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"a holiday?"}]}`,
			canned(200, "application/json", capturetest.Fixture(t, "openai_chat/json_text_usage_details.json"))},
		{"/v1/messages", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"too much"}]}`,
			canned(429, "application/json", capturetest.Fixture(t, "anthropic_messages/error_429_rate_limit.json"))},
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"weather?"}]}]}`,
			canned(200, "text/event-stream", capturetest.Fixture(t, "google_gemini/stream_function_call_thought_signature.sse"))},
		{"/v1beta/models/gemini-3-pro-preview:generateContent", `{"contents":[{"role":"user","parts":[{"text":"weather in SF?"}]}]}`,
			canned(200, "application/json", capturetest.Fixture(t, "google_gemini/json_function_call_thought_signature.json"))},
	}
}

// record runs the cases through the gateway against a canned upstream, which is then stopped.
// It returns the capture and what the client received for each case.
func record(t *testing.T, id string, cases []exchangeCase) (*capture.Store, [][]byte) {
	t.Helper()
	answers := map[string][]capturetest.Answer{}
	for _, c := range cases {
		path, _, _ := strings.Cut(c.path, "?")
		answers[path] = append(answers[path], c.answer)
	}
	up := cannedUpstream(t, answers)
	gw, store := recordThroughGateway(t, up.URL)
	var got [][]byte
	for _, c := range cases {
		status, _, body := post(t, gw, "/ng-rollout/"+id+c.path, c.request)
		if status != c.answer.Status {
			t.Fatalf("recording %s: status %d, want %d", c.path, status, c.answer.Status)
		}
		got = append(got, body)
	}
	up.Close() // the model is gone: everything below comes from the capture
	return store, got
}

// TestReplayServesRecordedBytes records real provider bodies of all three dialects (streams,
// JSON, a 429) through the gateway, stops the upstream and replays: status, content type, model
// call id and body bytes are the recorded ones.
func TestReplayServesRecordedBytes(t *testing.T) {
	cases := recordedCases(t)
	store, original := record(t, "r1", cases)
	recLines := capturetest.Lines(t, store, "r1")
	if len(recLines) != len(cases) {
		t.Fatalf("%d capture lines, want %d", len(recLines), len(cases))
	}
	for _, timing := range []Timing{{Fast: true}, Recorded} {
		t.Run(timing.String(), func(t *testing.T) {
			s := &Server{Source: store, Timing: timing}
			rp := newReplay(t, s)
			for i, c := range cases {
				status, hdr, body := post(t, rp, "/ng-rollout/r1"+c.path, c.request)
				line := recLines[i]
				if want := *line.StatusCode; status != want {
					t.Errorf("%d %s: status %d, recorded %d", i, c.path, status, want)
				}
				if ct := hdr.Get("Content-Type"); ct != c.answer.ContentType {
					t.Errorf("%d %s: Content-Type %q, want %q", i, c.path, ct, c.answer.ContentType)
				}
				if id := hdr.Get("x-nemo-gym-model-call-id"); id != line.ModelCallID {
					t.Errorf("%d: model call id header %q, recorded %q", i, id, line.ModelCallID)
				}
				want := line.Body()
				if !bytes.Equal(body, want) {
					t.Errorf("%d %s: replayed body differs from the recorded one\n got: %.200q\nwant: %.200q", i, c.path, body, want)
				}
				if c.answer.ContentType == "text/event-stream" && !bytes.HasPrefix(original[i], body) {
					t.Errorf("%d %s: replayed stream is not what the client received when recording", i, c.path)
				}
			}
			if sum := s.Summary(); sum.Served != int64(len(cases)) || sum.Misses != 0 || sum.Unused != 0 {
				t.Errorf("summary %s", sum)
			}
		})
	}
}

// errorBody decodes a dialect error body: the message, and the shape it came in.
func errorBody(t *testing.T, b []byte) (shape, msg string) {
	t.Helper()
	var v struct {
		Type  string `json:"type"`
		Error struct {
			Type    string  `json:"type"`
			Message string  `json:"message"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("error body %q: %v", b, err)
	}
	if v.Type == "error" {
		return "anthropic:" + v.Error.Type, v.Error.Message
	}
	return "openai:" + v.Error.Type + ":" + *v.Error.Code, v.Error.Message
}

func TestStrictMatching(t *testing.T) {
	store, _ := capture.Open(t.TempDir())
	body := func(s string) json.RawMessage { return json.RawMessage(s) }
	answer := func(text string) json.RawMessage {
		return body(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + text + `"}}]}`)
	}
	for _, l := range []struct {
		req, ans  string
		cancelled bool
	}{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{"s":"1"}}`, "first hi", false},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{"s":"1"}}`, "second hi", false},
		{`{"model":"m","messages":[{"role":"user","content":"bye"}],"temperature":0.5}`, "bye", false},
		{`{"model":"m","messages":[{"role":"user","content":"left"}]}`, "never", true},
	} {
		ex := capture.Exchange{Request: body(l.req), Response: answer(l.ans), StatusCode: ptr(200), LatencyMS: 1}
		if l.cancelled {
			ex.ErrorCategory = ptr("cancelled")
		}
		appendLine(t, store, "r", ex)
	}
	s := &Server{Source: store, Timing: Timing{Fast: true}}
	rp := newReplay(t, s)
	const chat = "/ng-rollout/r/v1/chat/completions"
	steps := []struct {
		name, req string
		status    int
		want      []string // substrings of the body
	}{
		{"identical requests answer in recorded order (key order, ignored metadata)",
			`{"metadata":{"s":"other"},"messages":[{"content":"hi","role":"user"}],"model":"m"}`, 200, []string{"first hi"}},
		{"then the second recording", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 200, []string{"second hi"}},
		{"each once", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, MissStatus,
			[]string{"replay_exhausted", "recorded this request 2 times", "restart modelcalls replay to replay the run again"}},
		{"numbers compare by value", `{"model":"m","messages":[{"role":"user","content":"bye"}],"temperature":0.50}`, 200, []string{`"bye"`}},
		{"a changed prompt is a miss naming the path", `{"model":"m","messages":[{"role":"user","content":"bye!"}],"temperature":0.5}`, MissStatus,
			[]string{"replay_miss", "nearest is call 2", "$.messages[0].content", `recorded "bye", request "bye!"`}},
		{"an added member", `{"model":"m","messages":[{"role":"user","content":"bye"}],"temperature":0.5,"top_p":1}`, MissStatus,
			[]string{"$.top_p: recorded absent, request 1"}},
		{"a cancelled recording is not an answer", `{"model":"m","messages":[{"role":"user","content":"left"}]}`, MissStatus,
			[]string{"replay_miss", "$.messages[0].content"}},
		{"another dialect", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, MissStatus, []string{"dialect: recorded chat, request messages"}},
	}
	for _, st := range steps {
		path := chat
		if st.name == "another dialect" {
			path = "/ng-rollout/r/v1/messages"
		}
		status, _, b := post(t, rp, path, st.req)
		if status != st.status {
			t.Errorf("%s: status %d, want %d (%s)", st.name, status, st.status, b)
		}
		for _, w := range st.want {
			if !strings.Contains(string(b), w) && !strings.Contains(jsonUnescape(b), w) {
				t.Errorf("%s: body %s lacks %q", st.name, b, w)
			}
		}
	}
	sum := s.Summary()
	if sum.Served != 3 || sum.Exhausted != 1 || sum.Misses != 4 || sum.Unused != 0 {
		t.Errorf("summary: %s", sum)
	}
}

// jsonUnescape returns the message of an error body, unescaped, for substring checks.
func jsonUnescape(b []byte) string {
	var v map[string]any
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	e, _ := v["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

// TestMissShapes: a miss answers in the error shape of the path's dialect and is logged.
func TestMissShapes(t *testing.T) {
	store, _ := capture.Open(t.TempDir())
	for _, d := range []string{"chat", "responses", "messages"} {
		appendLine(t, store, "r", capture.Exchange{Dialect: d, Request: json.RawMessage(`{"model":"m","input":"x"}`),
			Response: json.RawMessage(`{"ok":true}`), StatusCode: ptr(200)})
	}
	logs := &capturetest.Buffer{}
	rp := newReplay(t, &Server{Source: store, Timing: Timing{Fast: true}, Logger: capturetest.Logger(logs)})
	for _, c := range []struct{ path, shape string }{
		{"/v1/chat/completions", "openai:invalid_request_error:replay_miss"},
		{"/v1/responses", "openai:invalid_request_error:replay_miss"},
		{"/v1/messages", "anthropic:invalid_request_error"},
	} {
		status, hdr, b := post(t, rp, "/ng-rollout/r"+c.path, `{"model":"m","input":"y"}`)
		shape, msg := errorBody(t, b)
		if status != MissStatus || shape != c.shape || hdr.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s %q", c.path, status, shape, hdr.Get("Content-Type"))
		}
		if !strings.HasPrefix(msg, "replay_miss: ") || !strings.Contains(msg, `$.input: recorded "x", request "y"`) {
			t.Errorf("%s: message %q", c.path, msg)
		}
	}
	if n := strings.Count(logs.String(), `msg="replay miss"`); n != 3 {
		t.Errorf("%d miss log lines, want 3:\n%s", n, logs)
	}
	// No capture at all for the rollout, and a path that is not a model call.
	status, _, b := post(t, rp, "/ng-rollout/nobody/v1/chat/completions", `{}`)
	if _, msg := errorBody(t, b); status != MissStatus || !strings.Contains(msg, `rollout "nobody" has no recorded calls`) {
		t.Errorf("unknown rollout: %d %s", status, msg)
	}
	status, _, b = post(t, rp, "/ng-rollout/r/v1/models", `{}`)
	if _, msg := errorBody(t, b); status != NotRecordedStatus || !strings.Contains(msg, "replay_not_recorded") {
		t.Errorf("not a model call: %d %s", status, msg)
	}
	// An invalid id: 400, the id and the reason named once.
	for _, id := range []string{"bad%2Fid", "..%2Fx"} {
		status, _, b = post(t, rp, "/ng-rollout/"+id+"/v1/chat/completions", `{}`)
		_, msg := errorBody(t, b)
		if status != http.StatusBadRequest || !strings.HasPrefix(msg, "invalid_rollout_id: ") ||
			strings.Count(msg, "invalid rollout id") != 1 || strings.Count(msg, id) != 1 {
			t.Errorf("invalid rollout id %s: %d %q", id, status, msg)
		}
	}
	// A model call without the prefix (a capture gateway in front strips it): the cause and the
	// wirings that work, in the body and in the log.
	status, _, b = post(t, rp, "/v1/chat/completions", `{}`)
	_, msg := errorBody(t, b)
	for _, want := range []string{"replay_not_recorded: POST /v1/chat/completions", "no /ng-rollout/<id>/ prefix",
		"strips the prefix", "replay --capture-dir-out DIR2", "--upstream at http://REPLAY/ng-rollout/<id>"} {
		if status != NotRecordedStatus || !strings.Contains(msg, want) {
			t.Errorf("unprefixed model call: %d %q lacks %q", status, msg, want)
		}
	}
	if !strings.Contains(logs.String(), `level=WARN msg="replay: model call without a rollout prefix"`) ||
		!strings.Contains(logs.String(), "--capture-dir-out DIR2") {
		t.Errorf("unprefixed model call not logged with its fix:\n%s", logs)
	}
}

func TestSequenceMatching(t *testing.T) {
	store, _ := capture.Open(t.TempDir())
	for i, cat := range []*string{nil, ptr("cancelled"), nil, ptr("cancelled")} {
		ex := capture.Exchange{Request: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), StatusCode: ptr(200), ErrorCategory: cat,
			Response: json.RawMessage(fmt.Sprintf(`{"answer":%d}`, i))}
		if i == 3 { // cancelled before any header arrived: no status, no body
			ex.StatusCode, ex.Response = nil, nil
		}
		appendLine(t, store, "r", ex)
	}
	s := &Server{Source: store, Match: Sequence, Timing: Timing{Fast: true}}
	rp := newReplay(t, s)
	const p = "/ng-rollout/r/v1/chat/completions"
	if _, _, b := post(t, rp, p, `{"anything":"else"}`); string(b) != `{"answer":0}` {
		t.Errorf("call 0 got %s", b)
	}
	// The cancelled recording is replayed too under sequence: its body, then a broken connection.
	res, err := http.Post(rp+p, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err == nil {
		t.Errorf("call 1 (cancelled when recorded): body %q ended cleanly, want a broken connection", b)
	}
	if _, _, b := post(t, rp, p, `{}`); string(b) != `{"answer":2}` {
		t.Errorf("call 2 got %s", b)
	}
	if res, err := http.Post(rp+p, "application/json", strings.NewReader(`{}`)); err == nil {
		res.Body.Close()
		t.Errorf("call 3 (cancelled before any header when recorded): answered %d, want a broken connection", res.StatusCode)
	}
	status, _, b := post(t, rp, p, `{}`)
	if _, msg := errorBody(t, b); status != MissStatus || !strings.Contains(msg, "replay_exhausted") {
		t.Errorf("call 3: %d %s", status, msg)
	}
	if sum := s.Summary(); sum.Served != 4 || sum.Exhausted != 1 || sum.Unused != 0 {
		t.Errorf("summary %s", sum)
	}
}

// TestErrorsReplayed: recorded failures come back as failures.
func TestErrorsReplayed(t *testing.T) {
	store, _ := capture.Open(t.TempDir())
	truncated := "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n" +
		"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\n\n"
	appendLine(t, store, "r", capture.Exchange{Request: json.RawMessage(`{"q":"truncated"}`), StatusCode: ptr(200),
		ErrorCategory: ptr("stream_truncated"), ResponseRaw: &truncated, Response: json.RawMessage(`{"object":"chat.completion"}`),
		LatencyMS: 5, LatencyTTFTMS: ptr(1.0)})
	appendLine(t, store, "r", capture.Exchange{Request: json.RawMessage(`{"q":"broken"}`), StatusCode: ptr(200),
		ErrorCategory: ptr("connection"), ResponseRaw: &truncated, ResponseSource: ptr("upstream"), LatencyMS: 5, LatencyTTFTMS: ptr(1.0)})
	local := `{"error":{"message":"upstream_unreachable: the upstream model server is unreachable","type":"server_error","param":null,"code":"upstream_unreachable"}}`
	appendLine(t, store, "r", capture.Exchange{Request: json.RawMessage(`{"q":"502"}`), StatusCode: ptr(502),
		ErrorCategory: ptr("connection"), Response: json.RawMessage(local), ResponseSource: ptr("local"),
		LocalResponseReason: ptr("upstream_unreachable"), LatencyMS: 3})
	rp := newReplay(t, &Server{Source: store, Timing: Timing{Fast: true}})
	const p = "/ng-rollout/r/v1/chat/completions"

	status, hdr, b := post(t, rp, p, `{"q":"truncated"}`)
	if status != 200 || string(b) != truncated || hdr.Get("Content-Type") != "text/event-stream" {
		t.Errorf("truncated stream: %d %q %q", status, hdr.Get("Content-Type"), b)
	}
	res, err := http.Post(rp+p, "application/json", strings.NewReader(`{"q":"broken"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err = io.ReadAll(res.Body)
	res.Body.Close()
	if err == nil || string(b) != truncated {
		t.Errorf("upstream failure mid-body: read %q, err %v; want the partial body, then a read error", b, err)
	}
	status, _, b = post(t, rp, p, `{"q":"502"}`)
	if status != 502 || string(b) != local {
		t.Errorf("recorded local 502: %d %s", status, b)
	}
}

// TestForwardOnMiss: with an upstream, misses and non-model-call requests go there (prefix
// stripped) and hits do not.
func TestForwardOnMiss(t *testing.T) {
	store, _ := capture.Open(t.TempDir())
	appendLine(t, store, "r", capture.Exchange{Request: json.RawMessage(`{"q":1}`), StatusCode: ptr(200), Response: json.RawMessage(`{"from":"capture"}`)})
	var seen []string
	up := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen = append(seen, r.URL.Path+" "+string(b))
		io.WriteString(w, `{"from":"upstream"}`)
	})
	u, _ := url.Parse(up.URL)
	s := &Server{Source: store, Timing: Timing{Fast: true}, Upstream: u}
	rp := newReplay(t, s)
	if _, _, b := post(t, rp, "/ng-rollout/r/v1/chat/completions", `{"q":1}`); string(b) != `{"from":"capture"}` {
		t.Errorf("hit: %s", b)
	}
	if _, _, b := post(t, rp, "/ng-rollout/r/v1/chat/completions", `{"q":2}`); string(b) != `{"from":"upstream"}` {
		t.Errorf("miss: %s", b)
	}
	if _, _, b := post(t, rp, "/ng-rollout/r/v1/messages/count_tokens", `{"q":3}`); string(b) != `{"from":"upstream"}` {
		t.Errorf("not a call: %s", b)
	}
	want := []string{`/v1/chat/completions {"q":2}`, `/v1/messages/count_tokens {"q":3}`}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("upstream saw %q, want %q", seen, want)
	}
	if sum := s.Summary(); sum.Served != 1 || sum.Misses != 1 || sum.Forwarded != 2 || sum.NotRecorded != 1 {
		t.Errorf("summary %s", sum)
	}
}

// TestEncodedRequestMatches: the capture stores requests decoded, so a compressed request body
// is decoded before matching; an undecodable one is answered 400.
func TestEncodedRequestMatches(t *testing.T) {
	store, _ := capture.Open(t.TempDir())
	appendLine(t, store, "r", capture.Exchange{Request: json.RawMessage(`{"q":"zipped"}`), StatusCode: ptr(200),
		Response: json.RawMessage(`{"ok":1}`)})
	rp := newReplay(t, &Server{Source: store, Timing: Timing{Fast: true}})
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	io.WriteString(zw, `{"q":"zipped"}`)
	zw.Close()
	for _, c := range []struct {
		body   []byte
		status int
	}{{buf.Bytes(), 200}, {[]byte("not gzip"), 400}} {
		req, _ := http.NewRequest(http.MethodPost, rp+"/ng-rollout/r/v1/chat/completions", bytes.NewReader(c.body))
		req.Header.Set("Content-Encoding", "gzip")
		if status, b := capturetest.Do(t, req); status != c.status {
			t.Errorf("%q: %d %s", c.body, status, b)
		}
	}
}

// TestGeminiStreamFromPath: Gemini says in the URL, not in the body, whether it wants a stream, so
// two calls with the same body, one streamed and one not, are each answered by the call recorded
// on the same kind of path, whatever the order they come in.
func TestGeminiStreamFromPath(t *testing.T) {
	req := `{"contents":[{"role":"user","parts":[{"text":"weather?"}]}]}`
	stream := "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
	plain := "/v1beta/models/gemini-2.5-flash:generateContent"
	store, _ := record(t, "g1", []exchangeCase{
		{plain, req, canned(200, "application/json", capturetest.Fixture(t, "google_gemini/json_function_call_thought_signature.json"))},
		{stream, req, canned(200, "text/event-stream", capturetest.Fixture(t, "google_gemini/stream_text_after_function_response.sse"))},
	})
	rp := newReplay(t, &Server{Source: store, Timing: Timing{Fast: true}})
	for _, c := range []struct{ path, ctype string }{{stream, "text/event-stream"}, {plain, "application/json"}} {
		status, hdr, _ := post(t, rp, "/ng-rollout/g1"+c.path, req)
		if status != 200 || hdr.Get("Content-Type") != c.ctype {
			t.Errorf("%s: %d %s, want 200 %s", c.path, status, hdr.Get("Content-Type"), c.ctype)
		}
	}
	status, _, body := post(t, rp, "/ng-rollout/g1"+stream, req)
	if status != MissStatus || !strings.Contains(string(body), `"status":`) {
		t.Errorf("a third call: %d %s, want a %d in Gemini's error shape", status, body, MissStatus)
	}
}

// TestStrictIgnoreVolatileToolOutput: Codex's tool output carries a random chunk id and a wall time,
// so a strict replay of its tool loop misses on the second call; an ignore rule with a pattern
// removes those two lines from the comparison while the rest of the output (the tool's answer)
// still has to match.
func TestStrictIgnoreVolatileToolOutput(t *testing.T) {
	store, _ := capture.Open(t.TempDir())
	second := func(chunk, wall, out string) string {
		return `{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"cat hello.txt"}]},` +
			`{"type":"function_call","call_id":"call_1","name":"exec_command","arguments":"{\"cmd\":\"cat hello.txt\"}"},` +
			`{"type":"function_call_output","call_id":"call_1","output":"Chunk ID: ` + chunk + `\nWall time: ` + wall +
			` seconds\nProcess exited with code 0\nOutput:\n` + out + `"}]}`
	}
	appendLine(t, store, "codex", capture.Exchange{Dialect: "responses", Request: json.RawMessage(second("a1b2c3", "0.0012", "hello 42")),
		Response: json.RawMessage(`{"id":"resp_1","object":"response","status":"completed","output":[]}`), StatusCode: ptr(200), LatencyMS: 1})
	const path = "/ng-rollout/codex/v1/responses"
	live := second("9f8e7d", "0.0031", "hello 42")

	rp := newReplay(t, &Server{Source: store, Timing: Timing{Fast: true}})
	if status, _, b := post(t, rp, path, live); status != MissStatus || !strings.Contains(string(b), "$.input[2].output") {
		t.Fatalf("default rules: %d %s; want a miss at the tool output", status, b)
	}
	rules := append(slices.Clone(DefaultIgnoreKeys), `input.output~(Chunk ID|Wall time): [^\n]*`)
	if err := CheckIgnoreKeys(rules); err != nil {
		t.Fatal(err)
	}
	rp = newReplay(t, &Server{Source: store, Timing: Timing{Fast: true}, IgnoreKeys: rules})
	if status, _, b := post(t, rp, path, second("0000ff", "1.5", "hello 41")); status != MissStatus {
		t.Errorf("a different tool answer: %d %s; want a miss", status, b)
	}
	if status, _, b := post(t, rp, path, live); status != 200 || !strings.Contains(string(b), "resp_1") {
		t.Errorf("with the rule: %d %s; want the recorded answer", status, b)
	}
}
