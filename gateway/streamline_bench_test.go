package gateway_test

import (
	"bytes"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/dialect"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// BenchmarkStreamLine is the work at a stream's terminal event before its line is written: the
// line of a 200-event Chat Completions stream (make bench's row 4 stream), with the reassembled
// response written into it, the body already escaped as response_raw and the request known to be
// compact, into a reused buffer (as the store's pooled line buffers).
func BenchmarkStreamLine(b *testing.B) {
	raw := fixture(b, "openai_chat/stream_tool_call_usage_only_chunk.sse")
	events := capturetest.SSEEvents(raw)
	body := append([]byte(nil), events[0]...)
	for i := 0; len(bytes.Split(body, []byte("\n\n"))) < 198; i++ {
		body = append(body, events[1+i%(len(events)-4)]...)
	}
	for _, ev := range events[len(events)-3:] {
		body = append(body, ev...)
	}
	req := capturetest.ReadFile(b, "../test/bench/testdata/request_chat_stream.json")
	st := dialect.NewStream(dialect.Chat)
	st.Write(body)
	st.End()
	var esc capture.TextEscaper
	escaped := esc.Append(nil, body)
	escaped = esc.Flush(escaped)
	compact := capture.IsCompactJSON(req) // found when the gateway checks the request, before forwarding it
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var line bytes.Buffer
	for b.Loop() {
		line.Reset()
		err := capture.WriteExchange(&line, &capture.Exchange{ModelCallID: "x", Dialect: "chat", Request: req, RequestCompact: compact,
			ResponseTo: st.WriteResponse, ResponseRawEscaped: &capture.EscapedText{Bytes: escaped}, PayloadsChecked: true})
		if err != nil || line.Len() < len(escaped) {
			b.Fatal(err)
		}
	}
}
