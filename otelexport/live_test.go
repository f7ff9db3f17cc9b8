package otelexport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/record"
)

// indent pretty-prints a JSON object, as an upstream may send it (the capture line compacts it).
func indent(s string) string {
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(s), "", "  "); err != nil {
		panic(err)
	}
	return b.String()
}

// liveAndLineRecords returns ex's record as the live worker builds it (spanRecord) and as
// BuildRecord reads it from ex's encoded line, the latter with the response model spans read from
// the payloads.
func liveAndLineRecords(t *testing.T, ex *capture.Exchange) (live, line *record.ModelCallRecord) {
	t.Helper()
	live, _, err := spanRecord(ex, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := capture.EncodeExchange(ex)
	if err != nil {
		t.Fatal(err)
	}
	line, err = record.BuildRecord(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	line.Model = scanPayloads(line).responseModel
	return live, line
}

// liveAndFileSpan exports ex through the live worker and rec through Emit (as `export otlp` does
// from the file), each into its own harness with Config{Content: content}, and returns the one span
// each gave.
func liveAndFileSpan(t *testing.T, ex *capture.Exchange, rec *record.ModelCallRecord, content bool) (live, file tracetest.SpanStub) {
	t.Helper()
	lh, fh := newHarness(t, Config{Content: content}), newHarness(t, Config{Content: content})
	lh.e.handle(lh.e.newLiveCall("r1", ex, ""))
	fh.e.Emit(context.Background(), "r1", rec, "")
	ls, fs := lh.flushSpans(t), fh.flushSpans(t)
	if len(ls) != 1 || len(fs) != 1 {
		t.Fatalf("content %v: %d live spans, %d file spans", content, len(ls), len(fs))
	}
	return ls[0], fs[0]
}

// The live worker builds a call's record from the exchange without writing its line: it must be
// the record BuildRecord reads from the line (response_raw aside, which the live path drops, and
// model, which spans read from the payloads), and the span built from it the span `export otlp`
// builds from the file.
func TestSpanRecordMatchesLine(t *testing.T) {
	tests := []struct {
		name     string
		ex       *capture.Exchange
		indented bool // payloads not compact: the records differ in their raw bytes, the spans must not
	}{
		{name: "chat json", ex: exchange("chat", chatReq, chatResp, func(ex *capture.Exchange) { ex.LatencyTTFTMS = new(250.5); ex.ClientSessionID = new("sess-1") })},
		{name: "messages sse", ex: exchange("messages", messagesReq, messagesResp, func(ex *capture.Exchange) { ex.LatencyTTFTMS = new(120.0) })},
		{name: "responses", ex: exchange("responses", responsesReq, responsesResp, func(ex *capture.Exchange) { ex.PayloadsChecked = true })},
		{name: "no response, error, local", ex: exchange("chat", chatReq, "", func(ex *capture.Exchange) {
			ex.ErrorCategory = new("connection")
			ex.ResponseSource = new("local")
			ex.UpstreamAttempted = new(false)
			ex.UpstreamStatusCode = nil
			ex.LocalResponseReason = new("upstream_unreachable")
			ex.ModelRef = nil
			ex.StatusCode = new(502)
		})},
		{name: "request raw, no request object", ex: exchange("chat", "", chatResp, func(ex *capture.Exchange) { ex.Request = nil; ex.RequestRaw = new("not json") })},
		{name: "invalid UTF-8 and odd source", ex: exchange("chat", chatReq, chatResp, func(ex *capture.Exchange) {
			ex.ClientSessionID = new("s\xffx")
			ex.ClientAssistantMessageID = new("m\xc3")
			ex.ResponseSource = new("elsewhere")
			ex.ModelRef.Name = "p\xfe"
		})},
		{name: "NaN and infinite times", ex: exchange("chat", chatReq, chatResp, func(ex *capture.Exchange) {
			ex.StartedAt = math.NaN()
			ex.LatencyMS = math.Inf(1)
			ex.LatencyTTFTMS = new(math.Inf(-1))
		})},
		{name: "empty model call id, tiny and huge times", ex: exchange("responses", responsesReq, responsesResp, func(ex *capture.Exchange) {
			ex.ModelCallID = ""
			ex.StartedAt = 1e-7
			ex.CompletedAt = 3e17
		})},
		{name: "response without model, empty request model", ex: exchange("chat", `{"model":"","stream":true}`, `{"id":"c1","model":"","choices":[]}`, nil)},
		{name: "indented payloads", indented: true, ex: exchange("messages", indent(messagesReq), indent(messagesResp), func(ex *capture.Exchange) { ex.PayloadsChecked = true })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, want := liveAndLineRecords(t, tt.ex)
			if !tt.indented && !reflect.DeepEqual(got, want) {
				t.Errorf("live record\n%s\nline record\n%s", got.AppendJSON(nil, true), want.AppendJSON(nil, true))
			}
			for _, content := range []bool{false, true} {
				l, f := liveAndFileSpan(t, tt.ex, want, content)
				// Without started_at both take the export time: their own.
				sameTimes := want.StartedAt == nil || (l.StartTime.Equal(f.StartTime) && l.EndTime.Equal(f.EndTime))
				if l.Name != f.Name || !l.SpanContext.Equal(f.SpanContext) || !l.Parent.Equal(f.Parent) || !sameTimes || l.Status != f.Status || !reflect.DeepEqual(attrMap(l.Attributes), attrMap(f.Attributes)) {
					t.Errorf("content %v:\nlive %s %v %v\nfile %s %v %v", content, l.Name, l.Status, attrMap(l.Attributes), f.Name, f.Status, attrMap(f.Attributes))
				}
			}
		})
	}
	t.Run("model_ref of another type is refused as the line is", func(t *testing.T) {
		ex := exchange("chat", chatReq, chatResp, func(ex *capture.Exchange) { ex.ModelRef.Type = "other" })
		if _, _, err := spanRecord(ex, nil); err == nil {
			t.Error("spanRecord accepted a model_ref the line reader refuses")
		}
		line, _ := capture.EncodeExchange(ex)
		if _, err := record.BuildRecord(line, 0); err == nil {
			t.Error("BuildRecord accepted it: the test's premise is gone")
		}
	})
}

// maxCallAttrs sizes the attribute slice up front: a call with every field set has exactly that
// many attributes with content.
func TestMaxCallAttrs(t *testing.T) {
	ex := exchange("messages", messagesReq, messagesResp, func(ex *capture.Exchange) {
		ex.LatencyTTFTMS = new(120.0)
		ex.ClientSessionID = new("sess-1")
		ex.ClientAssistantMessageID = new("msg-1")
		ex.ErrorCategory = new("incomplete")
		ex.LocalResponseReason = new("why")
		ex.Response = json.RawMessage(`{"id":"m","model":"x","status":"s","stop_reason":"max_tokens","content":[{"type":"text","text":"t"}],"usage":{"input_tokens":1,"output_tokens":2,"cache_read_input_tokens":3,"cache_creation_input_tokens":4,"output_tokens_details":{"reasoning_tokens":1}}}`)
	})
	ex.Request = json.RawMessage(`{"model":"claude-x","stream":true,"system":"be brief","messages":[{"role":"user","content":"hi"}]}`)
	u, _ := url.Parse("http://llm:8000")
	h := newHarness(t, Config{Content: true, Upstream: u})
	h.e.handle(h.e.newLiveCall("r1", ex, ""))
	spans := h.flushSpans(t)
	if len(spans) != 1 || len(spans[0].Attributes) != maxCallAttrs {
		t.Fatalf("%d attributes, maxCallAttrs %d: %v", len(spans[0].Attributes), maxCallAttrs, attrMap(spans[0].Attributes))
	}
}

// For every response body of the fixture set, compact as the line holds it and pretty-printed as an
// upstream sends it, and for odd shapes (repeated and escaped member names, members of the wrong
// type, only members the record does not read), the live record and span must be the ones the whole
// line gives.
func TestSpanRecordFixtures(t *testing.T) {
	dialects := map[string]string{"openai_chat": "chat", "openai_responses": "responses", "anthropic_messages": "messages", "google_gemini": "gemini"}
	reqs := map[string]string{"chat": chatReq, "responses": responsesReq, "messages": messagesReq,
		"gemini": `{"systemInstruction":{"parts":[{"text":"be brief"}]},"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"weather"}]}]}`}
	type tc struct{ name, dialect, resp string }
	var cases []tc
	files, err := filepath.Glob(filepath.FromSlash("../testdata/fixtures/*/*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		d, ok := dialects[filepath.Base(filepath.Dir(f))]
		if !ok {
			t.Fatalf("%s: no dialect for its directory", f)
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, tc{filepath.Base(filepath.Dir(f)) + "/" + filepath.Base(f), d, string(raw)})
	}
	cases = append(cases,
		tc{"repeated members, last wins", "chat", `{"id":"a","model":"m1","choices":[],"usage":{"prompt_tokens":1},"id":"b","model":"m2","usage":{"prompt_tokens":9,"completion_tokens":2},"choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"length"}]}`},
		tc{"escaped member names", "messages", `{"\u0069d":"msg_e","mod\u0065l":"claude-e","stop_reason":"end_turn","\u0075sage":{"input_tokens":4,"output_tokens":5},"content":[{"type":"text","text":"t"}],"\u0074ools":[1]}`},
		tc{"members of the wrong type", "responses", `{"id":7,"model":null,"status":["x"],"output":{"a":1},"usage":"many","incomplete_details":3}`},
		tc{"skipped members first and last", "responses", `{"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"instructions":"be brief","id":"resp_o","model":"m","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\": 1}"}],"usage":{"input_tokens":3,"output_tokens":4,"input_tokens_details":{"cached_tokens":1},"output_tokens_details":{"reasoning_tokens":2}},"text":{"format":{"type":"text"}},"metadata":{}}`},
		tc{"only skipped members", "chat", `{"object":"chat.completion","created":1,"system_fingerprint":"fp"}`},
		tc{"empty object", "messages", `{}`},
	)
	for _, c := range cases {
		for _, indented := range []bool{false, true} {
			resp := compact(t, c.resp)
			if indented {
				resp = indent(resp)
			}
			t.Run(fmt.Sprintf("%s indented=%v", c.name, indented), func(t *testing.T) {
				ex := exchange(c.dialect, reqs[c.dialect], resp, func(ex *capture.Exchange) { ex.PayloadsChecked = true })
				got, want := liveAndLineRecords(t, ex)
				if !bytes.Equal(compactBytes(t, got.Response), want.Response) {
					t.Errorf("response %s, the line's %s", got.Response, want.Response)
				}
				g, w := *got, *want
				g.Response, w.Response = nil, nil
				if indented { // tool-call arguments alias the payload as it stands
					g.ToolCalls, w.ToolCalls = nil, nil
					if len(got.ToolCalls) != len(want.ToolCalls) {
						t.Errorf("%d tool calls, the line's %d", len(got.ToolCalls), len(want.ToolCalls))
					}
				}
				if !reflect.DeepEqual(g, w) {
					t.Errorf("live record\n%s\nline record\n%s", got.AppendJSON(nil, true), want.AppendJSON(nil, true))
				}
				for _, content := range []bool{false, true} {
					if l, f := liveAndFileSpan(t, ex, want, content); l.Name != f.Name || l.Status != f.Status || !reflect.DeepEqual(attrMap(l.Attributes), attrMap(f.Attributes)) {
						t.Errorf("content %v:\nlive %s %v %v\nfile %s %v %v", content, l.Name, l.Status, attrMap(l.Attributes), f.Name, f.Status, attrMap(f.Attributes))
					}
				}
			})
		}
	}
}

func compact(t *testing.T, s string) string { return string(compactBytes(t, []byte(s))) }

func compactBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("compact %q: %v", b, err)
	}
	return out.Bytes()
}
