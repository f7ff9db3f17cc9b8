//go:build unix

// These tests write capture dirs, which the store does on Linux and macOS only.

package capture

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

func TestEncodeOptionalKeys(t *testing.T) {
	ttft := 1.5
	code := 200
	src, reason := "local", "upstream_timeout"
	f := false
	ex := &Exchange{
		ModelCallID: "abc", Dialect: "messages", StartedAt: 1, CompletedAt: 2.25, LatencyMS: 12,
		LatencyTTFTMS: &ttft, StatusCode: &code, Request: json.RawMessage("{ \"a\" : [1, 2.0] }"),
		ResponseSource: &src, UpstreamAttempted: &f, LocalResponseReason: &reason,
	}
	got, err := EncodeExchange(ex)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model_call_id":"abc","dialect":"messages","model_ref":null,"started_at":1.0,"completed_at":2.25,` +
		`"latency_ms":12.0,"latency_ttft_ms":1.5,"status_code":200,"error_category":null,"request":{"a":[1,2.0]},` +
		`"response":null,"response_source":"local","upstream_attempted":false,"local_response_reason":"upstream_timeout"}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if _, err := EncodeExchange(&Exchange{Request: json.RawMessage(`[1]`)}); err == nil {
		t.Error("a non-object request must be rejected")
	}
}

func TestStrFromSplitsUTF8(t *testing.T) {
	// A 4-byte rune straddling the 64 KiB read boundary must survive intact.
	s := strings.Repeat("a", 64<<10-2) + "😀" + "tail"
	var buf bytes.Buffer
	e := &lineWriter{w: &buf}
	e.strFrom(&oneByteAtBoundary{r: strings.NewReader(s)})
	var got string
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil || got != s {
		t.Fatalf("round trip failed: err=%v equal=%v", err, got == s)
	}
}

// oneByteAtBoundary returns short reads so sequences are split.
type oneByteAtBoundary struct{ r *strings.Reader }

func (o *oneByteAtBoundary) Read(p []byte) (int, error) {
	if len(p) > 7 {
		p = p[:len(p)-7]
	}
	return o.r.Read(p)
}

func TestRoundMS(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{
		{0.005, 0.01}, {0.015, 0.01}, {1.005, 1}, {2.675, 2.67}, {12.344999, 12.34}, {0, 0}, {3.14159, 3.14},
	} {
		if got := RoundMS(tc.in); got != tc.want {
			t.Errorf("RoundMS(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// roundMSSlow is RoundMS by its definition: format with 2 decimals, correctly rounded on the
// exact binary value, and parse back.
func roundMSSlow(ms float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(ms, 'f', 2, 64), 64)
	return v
}

// RoundMS's arithmetic fast path must give what formatting and parsing give, on values near the
// halves (where it must fall back) and on ordinary latencies.
func FuzzRoundMS(f *testing.F) {
	for _, v := range []float64{0.005, 0.015, 1.005, 2.675, 12.344999, 0, 3.14159, -0.125, 0.125, 1e7 - 0.005, 1e7 + 0.005, 5e-324, 9999999.995, 1234.565, math.MaxFloat64, math.Inf(1)} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, ms float64) {
		if math.IsNaN(ms) {
			return
		}
		if got, want := RoundMS(ms), roundMSSlow(ms); got != want {
			t.Fatalf("RoundMS(%v) = %v, want %v", ms, got, want)
		}
	})
}

func TestRoundMSMatchesFormatting(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		// Latencies from µs to hours, and values on and next to the halves of the second decimal.
		ms := math.Exp(r.Float64()*math.Log(1e7)) / 1e3
		half := (math.Floor(ms*100) + 0.5) / 100
		for _, v := range []float64{ms, half, math.Nextafter(half, 0), math.Nextafter(half, math.Inf(1))} {
			if got, want := RoundMS(v), roundMSSlow(v); got != want {
				t.Fatalf("RoundMS(%v) = %v, want %v", v, got, want)
			}
		}
	}
}

func TestNewModelCallID(t *testing.T) {
	a, b := NewModelCallID(), NewModelCallID()
	if len(a) != 32 || a == b || strings.ToLower(a) != a {
		t.Fatalf("ids %q %q", a, b)
	}
}

func FuzzReadAvailable(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n\n{bad\n[1]\n{\"b\":2}"))
	f.Add([]byte("\r\n \n{}\n{"))
	f.Fuzz(func(t *testing.T, content []byte) {
		dir := t.TempDir()
		s, _ := Open(dir)
		p, _ := s.CapturePath("f")
		os.WriteFile(p, content, 0o640)
		entries, damaged, err := s.ReadAvailable("f")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if CheckLine(e.Data) != nil {
				t.Fatalf("entry %d is not a readable line", e.Index)
			}
		}
		// Every index from 0 to n-1 is used exactly once by an entry or a damage.
		used := map[int]bool{}
		for _, e := range entries {
			used[e.Index] = true
		}
		for _, d := range damaged {
			used[d.Index] = true
		}
		if len(used) != len(entries)+len(damaged) {
			t.Fatal("an index was used twice")
		}
		for i := range len(used) {
			if !used[i] {
				t.Fatalf("index %d missing", i)
			}
		}
		// After an append the new line is readable and nothing before it changed.
		if err := s.Append("f", []byte(`{"new":true}`)); err != nil {
			t.Fatal(err)
		}
		e2, d2, err := s.ReadAvailable("f")
		if err != nil || len(e2) != len(entries)+1 || string(e2[len(e2)-1].Data) != `{"new":true}` {
			t.Fatalf("after append: %d entries, %d damaged, %v", len(e2), len(d2), err)
		}
	})
}

func TestIsCompact(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{"a":1}`, true}, {`{"a":"b c\t"}`, true}, {`{"a": 1}`, false}, {"{\"a\":1}\n", false},
		{`{"a":"x\" y","b":2}`, true}, {`{"a":"x\\" , "b":2}`, false},
	} {
		if got := isCompact([]byte(tc.in)); got != tc.want {
			t.Errorf("isCompact(%q) = %v, want %v", tc.in, got, tc.want)
		}
		var buf bytes.Buffer
		json.Compact(&buf, []byte(tc.in))
		if tc.want && buf.String() != tc.in {
			t.Errorf("isCompact(%q) is true but json.Compact changes it", tc.in)
		}
	}
}

// TestRequestCompactLine: a request the caller found compact (RequestCompact) is written as it is,
// giving the same line as without the flag; without it, white space outside strings is dropped.
func TestRequestCompactLine(t *testing.T) {
	for _, req := range []string{`{"a":"b c","d":[1,{"e":null}]}`, `{"model":"m"}`} {
		ex := Exchange{ModelCallID: "x", Dialect: "chat", Request: json.RawMessage(req), PayloadsChecked: true}
		plain, err := EncodeExchange(&ex)
		if err != nil {
			t.Fatal(err)
		}
		if !IsCompactJSON(ex.Request) {
			t.Fatalf("IsCompactJSON(%s) is false", req)
		}
		ex.RequestCompact = true
		flagged, err := EncodeExchange(&ex)
		if err != nil || !bytes.Equal(plain, flagged) || !bytes.Contains(flagged, []byte(`"request":`+req+`,`)) {
			t.Errorf("with RequestCompact: %s (%v), without: %s", flagged, err, plain)
		}
	}
	ex := Exchange{ModelCallID: "x", Dialect: "chat", Request: json.RawMessage("{ \"a\" : \"b c\" }"), PayloadsChecked: true}
	line, err := EncodeExchange(&ex)
	if err != nil || !bytes.Contains(line, []byte(`"request":{"a":"b c"},`)) {
		t.Errorf("not compacted: %s (%v)", line, err)
	}
}

func TestAppendExchangeStreamsBigPayloads(t *testing.T) {
	s := newStore(t)
	big := `{"messages":[{"role":"user","content":"` + strings.Repeat("long context ", 200_000) + `"}]}`
	ex := &Exchange{ModelCallID: "m", Dialect: "chat", Request: json.RawMessage(big)}
	if err := s.AppendExchange("r", ex); err != nil {
		t.Fatal(err)
	}
	want, err := EncodeExchange(ex)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, s, "r"); got != string(want)+"\n" {
		t.Fatalf("streamed line (%d bytes) differs from the encoded one (%d bytes)", len(got), len(want)+1)
	}
}

// escapeInPieces escapes text with a TextEscaper, cut at the given offsets.
func escapeInPieces(text []byte, cuts []int) []byte {
	var t TextEscaper
	var out []byte
	prev := 0
	for _, c := range cuts {
		c = min(max(c, prev), len(text))
		out = t.Append(out, text[prev:c])
		prev = c
	}
	out = t.Append(out, text[prev:])
	return t.Flush(out)
}

// TestTextEscaperPieces checks that escaping in pieces gives the bytes the line writer gives for
// the whole text, wherever the cuts fall: inside multi-byte sequences, inside invalid ones, and
// at a truncated end.
func TestTextEscaperPieces(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
	}{
		{"ascii and escapes", "data: {\"a\":\"b\\\\c\"}\n\n\t\r\x01"},
		{"two, three and four byte sequences", "é€😀 é€😀"},
		{"invalid bytes", "a\xffb\xc0\x80c\xe0\x80\x80d\xed\xa0\x80e"},
		{"truncated at the end", "x€"[:3]},
		{"lone continuation bytes", "\x80\x80\x80\x80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := []byte(tc.text)
			want := jsonscan.AppendEscaped(nil, text)
			for a := 0; a <= len(text); a++ {
				for b := a; b <= len(text); b++ {
					if got := escapeInPieces(text, []int{a, b}); !bytes.Equal(got, want) {
						t.Fatalf("cut at %d and %d: %q, want %q", a, b, got, want)
					}
				}
			}
		})
	}
}

// FuzzTextEscaper checks the same for any text and any three cuts.
func FuzzTextEscaper(f *testing.F) {
	f.Add([]byte("é€😀\xff\xe2\x82"), 1, 2, 5)
	f.Add([]byte("data: {\"x\":\"\\n\"}\n\n"), 0, 7, 30)
	f.Fuzz(func(t *testing.T, text []byte, a, b, c int) {
		cuts := []int{abs(a) % (len(text) + 1), abs(b) % (len(text) + 1), abs(c) % (len(text) + 1)}
		want := jsonscan.AppendEscaped(nil, text)
		if got := escapeInPieces(text, cuts); !bytes.Equal(got, want) {
			t.Fatalf("cuts %v: %q, want %q", cuts, got, want)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// BenchmarkLine is the per-line JSON work of a captured non-streamed call: the gateway's one
// IsPayloadObject check of request and response, then the encoding of a line whose response is
// pretty-printed (as many servers send it), without a second check (PayloadsChecked).
func BenchmarkLine(b *testing.B) {
	resp, err := os.ReadFile("../testdata/fixtures/openai_chat/json_text_usage_details.json")
	if err != nil {
		b.Fatal(err)
	}
	req := json.RawMessage(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if !IsPayloadObject(req) || !IsPayloadObject(resp) {
			b.Fatal("not a payload")
		}
		if _, err := EncodeExchange(&Exchange{ModelCallID: "x", Dialect: "chat", Request: req, Response: resp, PayloadsChecked: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLineStreamed encodes the line of a streamed call: a recorded 200-event SSE body as
// response_raw (most of the line, escaped into a JSON string).
func BenchmarkLineStreamed(b *testing.B) {
	raw, err := os.ReadFile("../testdata/fixtures/openai_chat/stream_tool_call_usage_only_chunk.sse")
	if err != nil {
		b.Fatal(err)
	}
	for len(raw) < 60<<10 {
		raw = append(raw, raw...)
	}
	s := string(raw[:60<<10])
	req := json.RawMessage(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeExchange(&Exchange{ModelCallID: "x", Dialect: "chat", Request: req, ResponseRaw: &s, PayloadsChecked: true}); err != nil {
			b.Fatal(err)
		}
	}
}
