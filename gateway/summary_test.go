package gateway

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// A streamed call's reconstruction is written into the line through ResponseTo; the access log
// line and OnCaptured still see its model and usage (the stream's Summary), in every dialect.
func TestStreamedCallSummaryReachesLogAndOnCaptured(t *testing.T) {
	tests := []struct {
		dialect, path, stream, model, tokens string
	}{
		{"chat", "/v1/chat/completions",
			"data: {\"id\":\"c1\",\"model\":\"m-chat\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n" +
				"data: {\"id\":\"c1\",\"model\":\"m-chat\",\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":7}}\n\ndata: [DONE]\n\n",
			"m-chat", "tokens_in=11 tokens_out=7"},
		{"messages", "/v1/messages",
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"role\":\"assistant\",\"model\":\"m-msg\",\"content\":[],\"usage\":{\"input_tokens\":5}}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			"m-msg", "tokens_in=5 tokens_out=2"},
		{"responses", "/v1/responses",
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\",\"model\":\"m-resp\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":4}}}\n\n",
			"m-resp", "tokens_in=3 tokens_out=4"},
	}
	for _, tt := range tests {
		t.Run(tt.dialect, func(t *testing.T) {
			seen, line := streamOnce(t, tt.path, tt.stream, nil)
			if !bytes.Contains(seen, []byte(`"model":"`+tt.model+`"`)) || !bytes.Contains(seen, []byte(`"usage"`)) {
				t.Errorf("OnCaptured response %s; want the stream's model and usage", seen)
			}
			if !strings.Contains(line, "model="+tt.model) || !strings.Contains(line, tt.tokens) {
				t.Errorf("access log %q; want model=%s and %s", line, tt.model, tt.tokens)
			}
		})
	}
}

// A streamed text past the spool threshold is not kept in memory; OnCaptured still gets its first
// dialect.SummaryTextBytes bytes (here all of it), which live span export carries as content.
func TestOnCapturedGetsSpilledText(t *testing.T) {
	text := strings.Repeat("0123456789", 50)
	seen, _ := streamOnce(t, "/v1/chat/completions",
		"data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\""+text+"\"}}]}\n\n"+
			"data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
		func(h *Handler) { h.SpoolThreshold, h.SpoolDir = 64, t.TempDir() })
	if !bytes.Contains(seen, []byte(`"content":"`+text+`"`)) {
		t.Errorf("OnCaptured response %s; want the spilled text", seen)
	}
}

// streamOnce serves stream as a text/event-stream answer to one captured call through a Handler
// (configured by configure, with OnCaptured recording the exchange's response), and returns, once
// the call is settled, what OnCaptured got and the access log.
func streamOnce(t *testing.T, path, stream string, configure func(*Handler)) (seen []byte, log string) {
	t.Helper()
	up := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, stream)
	})
	u, _ := url.Parse(up.URL)
	store, err := capture.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	h := &Handler{Upstream: u, Store: store, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OnCaptured: func(c CapturedCall) {
			mu.Lock()
			defer mu.Unlock()
			seen = append([]byte(nil), c.Exchange.Response...)
			if c.Exchange.ResponseTo != nil {
				t.Error("OnCaptured got an exchange whose response is written by ResponseTo")
			}
		}}
	if configure != nil {
		configure(h)
	}
	gw := capturetest.NewServer(t, h.ServeHTTP)
	resp, err := http.Post(gw.URL+"/ng-rollout/r1"+path, "application/json", strings.NewReader(`{"model":"asked","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The log line and OnCaptured come once the held chunk has gone out: wait for them.
	if err := h.inflight.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return seen, logs.String()
}
