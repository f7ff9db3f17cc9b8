//go:build unix

package reliability

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// Item 7: hostile input. Rollout ids that try to leave the capture dir or are not file names,
// request bodies past the limit, deeply nested JSON, invalid UTF-8, and floods of session-id
// headers: no file outside the capture dir, no half-written line, every captured line readable,
// and no credential in a capture file or a log line.

// recordingUpstream answers every request with a small chat completion and remembers what arrived.
type recordingUpstream struct {
	mu     sync.Mutex
	hits   atomic.Int64
	paths  []string
	bodies [][]byte
	auth   []string
}

func (u *recordingUpstream) start(t *testing.T) string {
	srv := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.hits.Add(1)
		u.mu.Lock()
		u.paths = append(u.paths, r.URL.EscapedPath())
		u.bodies = append(u.bodies, b)
		u.auth = append(u.auth, r.Header.Get("Authorization"))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(chatJSON("up", 0))
	})
	return srv.URL
}

// rawRequest sends one HTTP/1.1 request with the request target exactly as given (no client-side
// escaping or cleaning) and the test credentials, and returns status and body.
func rawRequest(t *testing.T, g *gw, target string, body []byte) (int, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", g.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var hdr strings.Builder
	for k, v := range secretHeaders {
		fmt.Fprintf(&hdr, "%s: %s\r\n", k, v)
	}
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n", target, hdr.String(), len(body))
	c.Write(body)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s: %v", target, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func TestHostileRolloutIDs(t *testing.T) {
	up := &recordingUpstream{}
	g := startGateway(t, up.start(t), nil)
	base := filepath.Dir(g.dir)
	const rest = "/v1/chat/completions"
	for _, tc := range []struct {
		name, segment string // the id segment exactly as it appears in the request target
	}{
		{"dot dot", ".."},
		{"dot", "."},
		{"escaped dot dot", "%2e%2e"},
		{"escaped slash up", "..%2F..%2Fescaped"},
		{"NUL", "a%00b"},
		{"10 KB", strings.Repeat("a", 10<<10)},
		{"unicode", "r%C3%B6llout-%E2%80%A8"},
		{"leading dash", "-rm"},
		{"space", "a%20b"},
		{"newline", "a%0A"},
		{"backslash", "a%5C..%5Cb"},
		{"hidden", ".capture"},
		// Escaped slashes stay inside the id segment (the id is read from the escaped path), so
		// they are invalid ids, not a different path that would go out uncaptured.
		{"escaped slash", "a%2Fb"},
		{"escaped slash traversal", "ok%2F..%2F..%2Fetc"},
		{"only an escaped slash", "%2F"},
		// An empty id: what a base URL built from an unset variable gives.
		{"empty", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := up.hits.Load()
			status, body := rawRequest(t, g, "/ng-rollout/"+tc.segment+rest, chatRequest("n1", false))
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			if status != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error.Code != gateway.ReasonInvalidRolloutID {
				t.Errorf("got %d %.200s, want 400 invalid_rollout_id", status, body)
			}
			if up.hits.Load() != before {
				t.Error("a call with an invalid rollout id reached the upstream")
			}
		})
	}
	// A valid id next to them is captured as usual.
	if status, _ := rawRequest(t, g, "/ng-rollout/valid.id_0-1"+rest, chatRequest("n1", false)); status != 200 {
		t.Fatalf("valid id: status %d", status)
	}
	g.drain()
	if n := metric(t, g.client, g.srv.URL, gateway.MetricInvalidIDs); n != 16 {
		t.Errorf("%s = %v, want 16", gateway.MetricInvalidIDs, n)
	}
	if !strings.Contains(g.logs.String(), "invalid rollout id") {
		t.Error("invalid rollout ids are not logged")
	}
	// Nothing was created anywhere but the one capture file of the valid id.
	var files []string
	filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, strings.TrimPrefix(p, base+"/"))
		}
		return nil
	})
	if len(files) != 1 || files[0] != "capture/valid.id_0-1.capture.jsonl" {
		t.Errorf("files under the temp dir: %q, want only capture/valid.id_0-1.capture.jsonl", files)
	}
	g.only("valid.id_0-1")
	for _, a := range up.auth {
		if !strings.Contains(a, secretMarker) {
			t.Errorf("the upstream got authorization %q, want the client's credential forwarded unchanged", a)
		}
	}
}

func TestRequestTooLarge(t *testing.T) {
	up := &recordingUpstream{}
	g := startGateway(t, up.start(t), nil) // the default limit: 64 MiB
	big := make([]byte, gateway.DefaultMaxRequestBytes+1)
	copy(big, `{"model":"m","messages":[{"role":"user","content":"`)
	for i := 52; i < len(big); i++ {
		big[i] = 'a'
	}
	for _, tc := range []struct {
		name    string
		chunked bool
	}{{"with Content-Length", false}, {"chunked", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader(big)
			if tc.chunked {
				body = io.MultiReader(bytes.NewReader(big)) // hides the length: sent chunked
			}
			id := "big-" + map[bool]string{false: "cl", true: "chunked"}[tc.chunked]
			req, _ := http.NewRequest(http.MethodPost, g.url(id, "/v1/chat/completions"), body)
			res, err := g.client.Do(req)
			if err == nil {
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(b, []byte(gateway.ReasonRequestTooLarge)) {
					t.Errorf("got %d %.200s, want 413 request_too_large", res.StatusCode, b)
				}
			} else if !tc.chunked {
				t.Errorf("client error %v, want a 413 answer", err)
			}
			g.awaitServed(t)
			x := g.onlyUnder(t, id)
			checkLine(t, x, lineWant{status: 413, category: "client_error", source: "local", attempted: "false", reason: "request_too_large", response: true})
			if x.Request != nil && string(x.Request) != "null" || x.RequestRaw != nil {
				t.Errorf("a refused body was captured: request %.100s, request_raw %.100q", x.Request, str(x.RequestRaw))
			}
		})
	}
	if up.hits.Load() != 0 {
		t.Errorf("%d refused requests reached the upstream", up.hits.Load())
	}
}

// awaitServed waits for one finished request (ServeHTTP returned).
func (g *gw) awaitServed(t *testing.T) {
	t.Helper()
	select {
	case <-g.served:
	case <-within():
		t.Fatal("the gateway did not finish the request")
	}
}

// onlyUnder reads the single line of rollout id, failing t (not the gateway's test).
func (g *gw) onlyUnder(t *testing.T, id string) *capturetest.Line {
	t.Helper()
	xs := capturetest.Lines(t, g.store, id)
	if len(xs) != 1 {
		t.Fatalf("rollout %s has %d lines, want 1", id, len(xs))
	}
	return xs[0]
}

func TestRequestLimitBoundary(t *testing.T) {
	up := &recordingUpstream{}
	const limit = 1 << 20
	g := startGateway(t, up.start(t), func(h *gateway.Handler) { h.MaxRequestBytes = limit })
	at := append(append([]byte(`{"pad":"`), bytes.Repeat([]byte("p"), limit-10)...), '"', '}')
	if status, _, _, err := g.call("edge-0", "/v1/chat/completions", at); err != nil || status != 200 {
		t.Fatalf("a body of exactly the limit: %d %v", status, err)
	}
	over := append(append([]byte(`{"pad":"`), bytes.Repeat([]byte("p"), limit-9)...), '"', '}')
	if status, _, _, err := g.call("edge-1", "/v1/chat/completions", over); err != nil || status != 413 {
		t.Fatalf("a body one byte past the limit: %d %v", status, err)
	}
	g.drain()
	if x := g.only("edge-0"); !bytes.Equal(x.Request, at) || !bytes.Equal(up.bodies[0], at) {
		t.Error("the body at the limit was not forwarded and captured whole")
	}
	g.only("edge-1")
}

func TestHostileBodies(t *testing.T) {
	up := &recordingUpstream{}
	g := startGateway(t, up.start(t), nil)
	nested := func(depth int) []byte { // an object whose value nests depth containers in all
		return []byte(`{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)
	}
	for i, tc := range []struct {
		name string
		body []byte
	}{
		{"nested 1000", nested(1000)},
		{"nested to encoding/json's limit", nested(10000)},
		{"nested past it", nested(10001)},
		{"nested 1M deep", nested(1 << 20)},
		{"objects nested 200k deep", []byte(strings.Repeat(`{"a":`, 200000) + "1" + strings.Repeat("}", 200000))},
		{"invalid UTF-8 in a string", []byte("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\xc3(\"}]}")},
		{"invalid UTF-8 outside JSON", []byte("\xff\xfe\x00\x01binary")},
		{"NUL and controls", []byte("{\"a\":\"\\u0000\x01\"}")},
		{"lone surrogate escape", []byte(`{"a":"\ud800"}`)},
		{"duplicate keys", []byte(`{"model":"a","model":"b","stream":false,"stream":true}`)},
		{"huge number", []byte(`{"n":1` + strings.Repeat("0", 100000) + `}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("body-%d", i)
			status, _, got, err := g.call(id, "/v1/chat/completions", tc.body)
			if err != nil || status != 200 || !bytes.Equal(got, chatJSON("up", 0)) {
				t.Fatalf("got %d %.100q %v, want the upstream's answer", status, got, err)
			}
			up.mu.Lock()
			forwarded := up.bodies[len(up.bodies)-1]
			up.mu.Unlock()
			if !bytes.Equal(forwarded, tc.body) {
				t.Errorf("the upstream got %d bytes, not the %d the client sent", len(forwarded), len(tc.body))
			}
			// The line must be readable (strict read) and say what was sent: the object, or its text.
			x := g.onlyUnder(t, id)
			switch {
			case x.RequestRaw != nil:
				if *x.RequestRaw != string([]rune(string(tc.body))) {
					t.Errorf("request_raw is not the body's text")
				}
			case len(x.Request) > 0 && x.Request[0] == '{':
				if !utf8.Valid(tc.body) || !json.Valid(tc.body) {
					t.Errorf("request holds a body that is not a JSON object")
				}
			default:
				t.Errorf("the body is missing from the line")
			}
		})
	}
}

func TestHostileHeaders(t *testing.T) {
	up := &recordingUpstream{}
	g := startGateway(t, up.start(t), nil)
	same := make([]string, 0, 2000)
	for range 1000 {
		same = append(same, "X-Session-Id", "sess-1")
	}
	differ := make([]string, 0, 2000)
	for i := range 1000 {
		differ = append(differ, "X-Session-Id", fmt.Sprintf("sess-%d", i))
	}
	long := strings.Repeat("s", 200<<10)
	for i, tc := range []struct {
		name    string
		headers []string
		want    string // client_session_id, "<nil>" for null
	}{
		{"1000 equal session ids", same, "sess-1"},
		{"1000 different session ids", differ, "<nil>"},
		{"conflicting ids then a lower-precedence header", append(append([]string{}, differ[:4]...), "X-Claude-Code-Session-Id", "cc"), "<nil>"},
		{"a 200 KB session id", []string{"Session_id", long}, long},
		{"invalid UTF-8 session id", []string{"X-Session-Id", "s\xffid"}, "s\ufffdid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("hdr-%d", i)
			status, _, _, err := g.call(id, "/v1/chat/completions", chatRequest("n1", false), tc.headers...)
			if err != nil || status != 200 {
				t.Fatalf("got %d %v", status, err)
			}
			if x := g.onlyUnder(t, id); str(x.ClientSessionID) != tc.want {
				t.Errorf("client_session_id %.40q, want %.40q", str(x.ClientSessionID), tc.want)
			}
		})
	}
}

// The store writes only lines it reads back: a payload that encoding/json accepts but the strict
// line reader would not (one level too deep once inside the line, invalid UTF-8) is refused by the
// encoder instead of making the whole line (and a strict read of the rollout) unreadable.
func TestEncoderWritesOnlyReadableLines(t *testing.T) {
	nested := func(depth int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)
	}
	for _, tc := range []struct {
		name    string
		payload []byte
		ok      bool
	}{
		{"nested 9999", nested(jsonscan.MaxNesting - 1), true},
		{"nested 10000", nested(jsonscan.MaxNesting), false},
		{"deep but in a string", []byte(`{"a":"` + strings.Repeat("[", 30000) + `"}`), true},
		{"invalid UTF-8", []byte("{\"a\":\"\xff\"}"), false},
		{"NaN", []byte(`{"a":NaN}`), false},
	} {
		for _, field := range []string{"request", "response"} {
			ex := okExchange("enc-"+field, 1)
			if field == "request" {
				ex.Request = tc.payload
			} else {
				ex.Response = tc.payload
			}
			line, err := capture.EncodeExchange(ex)
			if tc.ok != (err == nil) {
				t.Errorf("%s as %s: error %v, want ok %v", tc.name, field, err, tc.ok)
				continue
			}
			if err == nil {
				if err := capture.CheckLine(line); err != nil {
					t.Errorf("%s as %s: the line does not read back: %v", tc.name, field, err)
				}
			}
		}
	}
}

// Hostile answers: response bodies nested to encoding/json's limit (as JSON, and as a Responses
// stream whose reconstruction nests one level deeper than any event), and invalid UTF-8 in a JSON
// body and in stream deltas. The client gets the bytes as sent; the line is readable and keeps the
// body's text.
func TestHostileResponses(t *testing.T) {
	deep := func(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }
	item := `{"type":"message","id":"m1","role":"assistant","content":[{"type":"output_text","text":"x","annotations":` + deep(9996) + `}]}`
	for i, tc := range []struct {
		name, path, ctype string
		body              string
	}{
		{"JSON nested 10000", "/v1/chat/completions", "application/json", `{"id":"x","choices":` + deep(9999) + `}`},
		{"stream item nested to the limit", "/v1/responses", "text/event-stream",
			"data: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":" + item + "}\n\n" +
				"data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"output\":[]}}\n\n"},
		{"invalid UTF-8 in JSON", "/v1/chat/completions", "application/json", "{\"id\":\"x\",\"choices\":[{\"message\":{\"content\":\"\xff\xc3(\"}}]}"},
		{"invalid UTF-8 in stream deltas", "/v1/chat/completions", "text/event-stream",
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\xe2\x82\"}}]}\n\ndata: [DONE]\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				io.WriteString(w, tc.body)
			})
			g := startGateway(t, up.URL, nil)
			id := fmt.Sprintf("resp-%d", i)
			status, _, got, err := g.call(id, tc.path, chatRequest("n1", tc.ctype == "text/event-stream"))
			if err != nil || status != 200 || string(got) != tc.body {
				t.Fatalf("client got %d (%d bytes) %v, want the %d bytes sent", status, len(got), err, len(tc.body))
			}
			g.drain()
			x := g.only(id)
			if x.ResponseRaw == nil && (len(x.Response) == 0 || x.Response[0] != '{') {
				t.Errorf("the answer is missing from the line")
			}
			if x.ResponseRaw != nil && *x.ResponseRaw != string([]rune(tc.body)) {
				t.Errorf("response_raw is not the body's text")
			}
		})
	}
}
