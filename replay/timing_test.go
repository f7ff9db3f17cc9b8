package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// measure posts body and returns when (since the request was sent) each byte offset in ends was
// first readable by the client, and the time the body ended.
func measure(ctx context.Context, url, body string, ends []int) ([]time.Duration, time.Duration, []byte, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, nil, err
	}
	defer res.Body.Close()
	var got []byte
	var at []time.Duration
	buf := make([]byte, 64<<10)
	for {
		n, err := res.Body.Read(buf)
		now := time.Since(start)
		got = append(got, buf[:n]...)
		for len(at) < len(ends) && len(got) >= ends[len(at)] {
			at = append(at, now)
		}
		if err == io.EOF {
			return at, now, got, nil
		}
		if err != nil {
			return nil, 0, nil, err
		}
	}
}

// pacingLog is a clock whose waits return at once and a log of what a replay did, in order: each
// request's arrival (a call of Now, which starts the request's offsets), each wait (as the offset
// of the instant waited for), and what was written to the client (status, bytes, flushes).
// Waiting moves its time on to the instant waited for, so the next request arrives after it.
type pacingLog struct {
	mu      sync.Mutex
	now     time.Time
	arrived time.Time
	log     []string
}

func (p *pacingLog) Now() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.arrived = p.now
	p.log = append(p.log, "request")
	return p.now
}

func (p *pacingLog) WaitUntil(ctx context.Context, t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, "wait until "+t.Sub(p.arrived).String())
	if t.After(p.now) {
		p.now = t
	}
	return ctx.Err() == nil
}

func (p *pacingLog) note(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, s)
}

func (p *pacingLog) entries() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

// pacedWriter notes what the replay writes to its client in the pacing log.
type pacedWriter struct {
	http.ResponseWriter
	p *pacingLog
}

func (w pacedWriter) WriteHeader(code int) {
	w.p.note(fmt.Sprintf("status %d", code))
	w.ResponseWriter.WriteHeader(code)
}

func (w pacedWriter) Write(b []byte) (int, error) {
	w.p.note("write " + string(b))
	return w.ResponseWriter.Write(b)
}

func (w pacedWriter) Flush() {
	w.p.note("flush")
	w.ResponseWriter.(http.Flusher).Flush()
}

func (w pacedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestTimingRecorded: the replay waits until the recorded TTFT to send a stream's first event and
// until the recorded latency to send its terminal event and end the body, with the events in
// between spread evenly; a JSON body goes at TTFT and ends at the latency; xN scales every offset;
// fast waits for nothing. All offsets are from the request's arrival, not chained.
//
// The schedule is checked exactly, on a clock that records each wait and returns at once, in order
// with what is written and flushed to a real client over loopback: a wait's offset either is the
// recorded one or is not, whatever the machine's load. Real time is checked once, loosely (the
// wallclock subtest); how late a loaded machine's timers fire is not the replay's schedule.
func TestTimingRecorded(t *testing.T) {
	events := []string{
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\n\n",
		"data: [DONE]\n\n",
	}
	raw := strings.Join(events, "")
	var ends []int
	n := 0
	for _, e := range events {
		n += len(e)
		ends = append(ends, n)
	}
	jsonBody := `{"object":"chat.completion"}`
	store, _ := capture.Open(t.TempDir())
	appendLine(t, store, "r", capture.Exchange{Request: json.RawMessage(`{"stream":true}`), StatusCode: ptr(200),
		ResponseRaw: &raw, Response: json.RawMessage(jsonBody), LatencyMS: 420, LatencyTTFTMS: ptr(120.0)})
	appendLine(t, store, "r", capture.Exchange{Request: json.RawMessage(`{"stream":false}`), StatusCode: ptr(200),
		Response: json.RawMessage(jsonBody), LatencyMS: 200, LatencyTTFTMS: ptr(150.0)})

	for _, c := range []struct {
		timing Timing
		scale  float64 // of every recorded offset
	}{{Recorded, 1}, {Timing{Speed: 2}, 0.5}, {Timing{Speed: 0.5}, 2}, {Timing{Fast: true}, 0}} {
		t.Run("schedule "+c.timing.String(), func(t *testing.T) {
			wait := func(ms float64) string {
				return "wait until " + time.Duration(ms*c.scale*float64(time.Millisecond)).String()
			}
			p := &pacingLog{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
			s := &Server{Source: store, Match: Sequence, Timing: c.timing, clock: p, Logger: capturetest.QuietLogger()}
			rp := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
				s.ServeHTTP(pacedWriter{w, p}, r)
			}).URL
			url := rp + "/ng-rollout/r/v1/chat/completions" // sequence: the stream, then the JSON answer
			if status, _, body := post(t, url, "", `{}`); status != 200 || string(body) != raw {
				t.Fatalf("stream: %d %q, want 200 %q", status, body, raw)
			}
			if status, _, body := post(t, url, "", `{}`); status != 200 || string(body) != jsonBody {
				t.Fatalf("JSON: %d %q, want 200 %q", status, body, jsonBody)
			}
			want := []string{
				// A stream: status and headers at once, each event flushed at its instant (TTFT,
				// spread evenly, latency), the body ended at the latency.
				"request", "status 200", "flush",
				wait(120), "write " + events[0], "flush",
				wait(220), "write " + events[1], "flush",
				wait(320), "write " + events[2], "flush",
				wait(420), "write " + events[3], "flush",
				wait(420),
				// A JSON answer: status and body at TTFT, the body ended at the latency.
				"request",
				wait(150), "status 200", "write " + jsonBody, "flush",
				wait(200),
			}
			got := p.entries()
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
				t.Errorf("replay paced\n%s\nwant\n%s", strings.Join(quoteAll(got), "\n"), strings.Join(quoteAll(want), "\n"))
			}
		})
	}

	// On real time the replay's waits are timers, which never fire early, and the client starts
	// its clock before the replay receives the request: no event can arrive before its recorded
	// offset whatever the load (1 ms of slack for clock reading). Lateness is not bounded here: a
	// loaded machine delays timers and goroutines by amounts no test controls, and the schedule
	// the replay asks for is checked exactly above.
	t.Run("wallclock", func(t *testing.T) {
		if testing.Short() {
			t.Skip("waits the recorded 420 ms")
		}
		rp := newReplay(t, &Server{Source: store, Match: Sequence, Timing: Recorded})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		at, end, body, err := measure(ctx, rp+"/ng-rollout/r/v1/chat/completions", `{}`, ends)
		if err != nil || string(body) != raw {
			t.Fatalf("stream: %q, %v; want %q", body, err, raw)
		}
		offsets := []time.Duration{120 * time.Millisecond, 220 * time.Millisecond, 320 * time.Millisecond, 420 * time.Millisecond}
		for i := range at {
			t.Logf("event %d: %v (recorded %v)", i, at[i].Round(10*time.Microsecond), offsets[i])
			if at[i] < offsets[i]-time.Millisecond {
				t.Errorf("event %d arrived at %v, before the recorded %v", i, at[i], offsets[i])
			}
		}
		if end < offsets[3]-time.Millisecond {
			t.Errorf("the stream ended at %v, before the recorded latency %v", end, offsets[3])
		}
	})

	// Fast ignores the recorded delays, on real time too. The call here was recorded an hour to its
	// first byte and to its end, so answering at once and following the record are told apart by
	// an hour, not by a margin of milliseconds that a loaded machine's scheduling delays can eat.
	t.Run("fast", func(t *testing.T) {
		slow, _ := capture.Open(t.TempDir())
		appendLine(t, slow, "r", capture.Exchange{Request: json.RawMessage(`{"stream":true}`), StatusCode: ptr(200),
			ResponseRaw: &raw, Response: json.RawMessage(`{"object":"chat.completion"}`), LatencyMS: 3600e3, LatencyTTFTMS: ptr(3600e3)})
		rp := newReplay(t, &Server{Source: slow, Match: Sequence, Timing: Timing{Fast: true}})
		// A minute for what takes milliseconds: enough on any machine, and a replay that waits is
		// stopped then (the request is cancelled) rather than holding the test for its hour.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, end, body, err := measure(ctx, rp+"/ng-rollout/r/v1/chat/completions", `{}`, ends)
		if ctx.Err() != nil {
			t.Fatalf("fast: no answer within a minute to a call recorded at an hour: the replay follows the recorded delays (%v)", err)
		}
		if err != nil || string(body) != raw {
			t.Errorf("fast: %q, %v; want %q", body, err, raw)
		}
		t.Logf("fast: the body of a call recorded at an hour ended after %v", end)
	})
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func TestSchedule(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		n             int
		ttft, latency time.Duration
		want          []time.Duration
	}{
		{0, 10 * ms, 20 * ms, []time.Duration{}},
		{1, 10 * ms, 20 * ms, []time.Duration{10 * ms}},
		{2, 10 * ms, 20 * ms, []time.Duration{10 * ms, 20 * ms}},
		{5, 100 * ms, 500 * ms, []time.Duration{100 * ms, 200 * ms, 300 * ms, 400 * ms, 500 * ms}},
		{3, 0, 0, []time.Duration{0, 0, 0}},
	} {
		if got := schedule(c.n, c.ttft, c.latency); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("schedule(%d, %v, %v) = %v, want %v", c.n, c.ttft, c.latency, got, c.want)
		}
	}
}

func TestParseTiming(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Timing
		err  bool
	}{
		{"recorded", Recorded, false}, {"fast", Timing{Fast: true}, false}, {"x2", Timing{Speed: 2}, false},
		{"x0.25", Timing{Speed: 0.25}, false}, {"x0", Timing{}, true}, {"x-1", Timing{}, true}, {"2", Timing{}, true},
		{"xNaN", Timing{}, true}, {"slow", Timing{}, true},
	} {
		got, err := ParseTiming(c.in)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("ParseTiming(%q) = %v, %v", c.in, got, err)
		}
	}
}

func TestSplitEvents(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"data: a\n\ndata: b\n\n", []string{"data: a\n\n", "data: b\n\n"}},
		{"data: a\r\n\r\ndata: b\r\n\r\n", []string{"data: a\r\n\r\n", "data: b\r\n\r\n"}},
		{"data: a\r\rdata: b", []string{"data: a\r\r", "data: b"}},
		{"event: x\ndata: a\n\n: keepalive\n\ndata: partial", []string{"event: x\ndata: a\n\n", ": keepalive\n\n", "data: partial"}},
		{"data: a\n\n\n\ndata: b\n\n", []string{"data: a\n\n", "\n\n", "data: b\n\n"}},
	} {
		var got []string
		for _, p := range splitEvents([]byte(c.in)) {
			got = append(got, string(p))
		}
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", c.want) {
			t.Errorf("splitEvents(%q) = %q, want %q", c.in, got, c.want)
		}
		if !bytes.Equal([]byte(strings.Join(got, "")), []byte(c.in)) {
			t.Errorf("pieces of %q do not add up", c.in)
		}
	}
}

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		a, b, path string
		n          int
	}{
		{`{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1.0}`, "", 0},
		{`{"a":{"x":"s"}}`, `{"a":{"x":"t"}}`, "$.a.x", 1},
		{`{"a":[1,2,3]}`, `{"a":[1,2]}`, "$.a[2]", 1},
		{`{"a":1,"z":2}`, `{"a":2,"z":3}`, "$.a", 2},
		{`{"weird key":1}`, `{"weird key":2}`, `$["weird key"]`, 1},
		{`{"a":null}`, `{"a":false}`, "$.a", 1},
		{`{"a":1}`, `{"a":1,"b":1}`, "$.b", 1},
	} {
		x, err := parseValue([]byte(c.a))
		if err != nil {
			t.Fatal(err)
		}
		d, n := compare(x, []byte(c.b), nil)
		path := ""
		if d != nil {
			path = d.path
		}
		if path != c.path || n != c.n {
			t.Errorf("compare(%s, %s) = %q, %d; want %q, %d", c.a, c.b, path, n, c.path, c.n)
		}
	}
	v, _ := parseValue([]byte(`{"metadata":{"user_id":"u","keep":1},"user":"x","m":1,"input":[{"id":"a","t":1},"s",{"t":2}]}`))
	var rules []ignoreRule
	for _, k := range []string{"metadata.user_id", "user", "input.id", "input.t~^[0-9]"} {
		r, err := parseIgnoreRule(k)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	w := v.without(rules)
	if d, _ := compare(w, []byte(`{"metadata":{"keep":1},"m":1,"input":[{"t":1},"s",{"t":2}]}`), nil); d != nil {
		t.Errorf("without: %+v", d)
	}
	// The same members dropped from the live request as it is compared.
	if d, _ := compare(w, []byte(`{"metadata":{"user_id":"v","keep":1},"user":"y","m":1,"input":[{"id":"b","t":1},"s",{"t":2,"id":"c"}]}`),
		rules); d != nil {
		t.Errorf("ignored members of the live request: %+v", d)
	}
	// A mask removes the matches from a string (or each string of an array) and keeps the rest, in
	// the recorded request and in the live one as it is compared.
	v = mustParse(t, `{"input":[{"output":"Chunk ID: 9f2c\nWall time: 0.0012 seconds\nOutput:\nhi"},{"output":["Wall time: 3 seconds","x"]},{"output":7}]}`)
	r, err := parseIgnoreRule(`input.output~(Chunk ID|Wall time): [^\n]*`)
	if err != nil {
		t.Fatal(err)
	}
	masked := v.without([]ignoreRule{r})
	if d, _ := compare(masked, []byte(`{"input":[{"output":"\n\nOutput:\nhi"},{"output":["","x"]},{"output":7}]}`), nil); d != nil {
		t.Errorf("masked: %+v", d)
	}
	live := `{"input":[{"output":"Chunk ID: 0000\nWall time: 9.5 seconds\nOutput:\nhi"},{"output":["Wall time: 1 seconds","x"]},{"output":7}]}`
	if d, _ := compare(masked, []byte(live), []ignoreRule{r}); d != nil {
		t.Errorf("masked live request: %+v", d)
	}
	if d, _ := compare(masked, []byte(strings.Replace(live, "hi", "ho", 1)), []ignoreRule{r}); d == nil || d.path != "$.input[0].output" {
		t.Errorf("masked live request with another output: %+v", d)
	}
	for _, bad := range []string{"", "a..b", "x~(", "x~"} {
		if err := CheckIgnoreKeys([]string{bad}); (err == nil) != (bad == "") {
			t.Errorf("CheckIgnoreKeys(%q) = %v", bad, err)
		}
	}
}

func mustParse(t *testing.T, s string) *value {
	t.Helper()
	v, err := parseValue([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRenderStrings(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, c := range []struct{ a, b, wa, wb string }{
		{"hello", "help", `"hello"`, `"help"`},
		{long + "ABC" + long, long + "ABD" + long, `..."` + strings.Repeat("x", 28) + "ABC" + strings.Repeat("x", 49) + `"... (from character 72)`,
			`..."` + strings.Repeat("x", 28) + "ABD" + strings.Repeat("x", 49) + `"...`},
		{long, long + "!", `..."` + strings.Repeat("x", 30) + `" (from character 70)`, `..."` + strings.Repeat("x", 30) + `!"`},
	} {
		ga, gb := renderStrings(c.a, c.b)
		if ga != c.wa || gb != c.wb {
			t.Errorf("renderStrings:\n got %s | %s\nwant %s | %s", ga, gb, c.wa, c.wb)
		}
	}
}
