package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
)

// arrivals posts body and returns when (since the request was sent) each byte offset in ends was
// first readable by the client, and the time the body ended.
func arrivals(t *testing.T, url, body string, ends []int) ([]time.Duration, time.Duration, []byte) {
	t.Helper()
	at, end, got, err := measure(context.Background(), url, body, ends)
	if err != nil {
		t.Fatal(err)
	}
	return at, end, got
}

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

// TestTimingRecorded: the first event arrives at the recorded TTFT and the terminal event at the
// recorded latency; events in between are spread evenly; xN scales; fast sends at once.
func TestTimingRecorded(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
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
	store, _ := capture.Open(t.TempDir())
	appendLine(t, store, "r", capture.Exchange{Request: json.RawMessage(`{"stream":true}`), StatusCode: ptr(200),
		ResponseRaw: &raw, Response: json.RawMessage(`{"object":"chat.completion"}`), LatencyMS: 420, LatencyTTFTMS: ptr(120.0)})
	appendLine(t, store, "r", capture.Exchange{Request: json.RawMessage(`{"stream":false}`), StatusCode: ptr(200),
		Response: json.RawMessage(`{"object":"chat.completion"}`), LatencyMS: 200, LatencyTTFTMS: ptr(150.0)})

	// The replay must never send early (checked on every attempt). How late it may be is measured
	// in the same run: a bare server that sleeps until each recorded instant and writes, serving
	// the same schedule at the same time, is late by up to base (timer wake-up and scheduling on
	// this machine now); the replay may be late by 10 ms more than twice that. Load spikes on a
	// shared machine can still hit one server and not the other, so the lateness bound is taken
	// from the best of three attempts; a wrong schedule fails all three (and early never passes).
	for _, c := range []struct {
		timing Timing
		scale  float64
	}{{Recorded, 1}, {Timing{Speed: 2}, 0.5}, {Timing{Speed: 0.5}, 2}} {
		t.Run(c.timing.String(), func(t *testing.T) {
			ms := func(v float64) time.Duration { return time.Duration(v * c.scale * float64(time.Millisecond)) }
			offsets := []time.Duration{ms(120), ms(220), ms(320), ms(420)}
			var late []string
			for attempt := 1; attempt <= 3; attempt++ {
				late = nil
				rp := newReplay(t, &Server{Source: store, Match: Sequence, Timing: c.timing}) // sequence: from call 0 again
				baseC := make(chan time.Duration, 1)
				go func() { baseC <- baselineLateness(events, offsets, ends) }()
				at, end, body := arrivals(t, rp+"/ng-rollout/r/v1/chat/completions", `{}`, ends)
				base := <-baseC
				if string(body) != raw {
					t.Fatalf("body %q", body)
				}
				jat, jend, _ := arrivals(t, rp+"/ng-rollout/r/v1/chat/completions", `{}`, []int{1})
				tol := 10*time.Millisecond + 2*base
				t.Logf("attempt %d: bare timer server late by up to %v: tolerance %v", attempt, base, tol)
				got := append(append([]time.Duration{}, at...), end, jat[0], jend)
				want := append(append([]time.Duration{}, offsets...), ms(420), ms(150), ms(200))
				names := []string{"event 0", "event 1", "event 2", "event 3", "end of stream", "JSON body", "end of JSON body"}
				for i := range got {
					t.Logf("  %s: %v (want %v, %+.2f ms)", names[i], got[i].Round(10*time.Microsecond), want[i], float64(got[i]-want[i])/1e6)
					if got[i] < want[i]-time.Millisecond {
						t.Errorf("%s arrived at %v, before the recorded %v", names[i], got[i], want[i])
					}
					if got[i] > want[i]+tol {
						late = append(late, fmt.Sprintf("%s arrived at %v, want %v (+%v at most)", names[i], got[i], want[i], tol))
					}
				}
				for i := 1; i < len(at); i++ {
					t.Logf("  gap %d-%d: %v (recorded spread: %v)", i-1, i, (at[i] - at[i-1]).Round(10*time.Microsecond), offsets[i]-offsets[i-1])
				}
				if len(late) == 0 {
					break
				}
			}
			for _, l := range late {
				t.Error(l)
			}
		})
	}
	// Fast ignores the recorded delays. The call here was recorded an hour to its first byte and to
	// its end, so answering at once and following the record are told apart by an hour, not by a
	// margin of milliseconds that a loaded machine's scheduling delays can eat.
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

// baselineLateness serves events from a bare handler that sleeps until each offset and writes,
// and returns how much later than its offset the latest event reached the client (an hour when
// the exchange failed, which makes any lateness pass: the replay's own checks still run).
func baselineLateness(events []string, offsets []time.Duration, ends []int) time.Duration {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w.Header().Set("Content-Type", "text/event-stream")
		for i, e := range events {
			time.Sleep(time.Until(start.Add(offsets[i])))
			io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	at, _, _, err := measure(context.Background(), srv.URL, `{}`, ends)
	if err != nil || len(at) < len(offsets) {
		return time.Hour
	}
	var late time.Duration
	for i := range at {
		late = max(late, at[i]-offsets[i])
	}
	return late
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
