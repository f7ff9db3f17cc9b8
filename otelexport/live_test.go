package otelexport

import (
	"math"
	"reflect"
	"testing"

	"github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
)

// The live worker builds a call's record from the exchange without writing its line; it must be
// the record BuildRecord reads from the line (response_raw aside, which the live path drops).
func TestLiveRecordMatchesLine(t *testing.T) {
	tests := []struct {
		name string
		ex   *capture.Exchange
	}{
		{"chat json", exchange("chat", chatReq, chatResp, func(ex *capture.Exchange) { ex.LatencyTTFTMS = new(250.5); ex.ClientSessionID = new("sess-1") })},
		{"messages sse", exchange("messages", messagesReq, messagesResp, func(ex *capture.Exchange) { ex.LatencyTTFTMS = new(120.0) })},
		{"responses", exchange("responses", responsesReq, responsesResp, func(ex *capture.Exchange) { ex.PayloadsChecked = true })},
		{"no response, error, local", exchange("chat", chatReq, "", func(ex *capture.Exchange) {
			ex.ErrorCategory = new("connection")
			ex.ResponseSource = new("local")
			ex.UpstreamAttempted = new(false)
			ex.UpstreamStatusCode = nil
			ex.LocalResponseReason = new("upstream_unreachable")
			ex.ModelRef = nil
			ex.StatusCode = new(502)
		})},
		{"request raw, no request object", exchange("chat", "", chatResp, func(ex *capture.Exchange) { ex.Request = nil; ex.RequestRaw = new("not json") })},
		{"invalid UTF-8 and odd source", exchange("chat", chatReq, chatResp, func(ex *capture.Exchange) {
			ex.ClientSessionID = new("s\xffx")
			ex.ClientAssistantMessageID = new("m\xc3")
			ex.ResponseSource = new("elsewhere")
			ex.ModelRef.Name = "p\xfe"
		})},
		{"NaN and infinite times", exchange("chat", chatReq, chatResp, func(ex *capture.Exchange) {
			ex.StartedAt = math.NaN()
			ex.LatencyMS = math.Inf(1)
			ex.LatencyTTFTMS = new(math.Inf(-1))
		})},
		{"empty model call id, tiny and huge times", exchange("responses", responsesReq, responsesResp, func(ex *capture.Exchange) {
			ex.ModelCallID = ""
			ex.StartedAt = 1e-7
			ex.CompletedAt = 3e17
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := liveRecord(tt.ex)
			if err != nil {
				t.Fatal(err)
			}
			line, err := capture.EncodeExchange(tt.ex)
			if err != nil {
				t.Fatal(err)
			}
			want, err := modelcalls.BuildRecord(line, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("live record\n%s\nline record\n%s", got.AppendJSON(nil, true), want.AppendJSON(nil, true))
			}
		})
	}
	t.Run("model_ref of another type is refused as the line is", func(t *testing.T) {
		ex := exchange("chat", chatReq, chatResp, func(ex *capture.Exchange) { ex.ModelRef.Type = "other" })
		if _, err := liveRecord(ex); err == nil {
			t.Error("liveRecord accepted a model_ref the line reader refuses")
		}
		line, _ := capture.EncodeExchange(ex)
		if _, err := modelcalls.BuildRecord(line, 0); err == nil {
			t.Error("BuildRecord accepted it: the test's premise is gone")
		}
	})
}
