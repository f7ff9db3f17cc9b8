package gateway_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/gateway"
)

// TestCaptureLimit: past MaxCaptureBytes of decoded body the client still gets every byte as
// sent, while the line keeps exactly the first MaxCaptureBytes as response_raw, says
// capture_too_large, reconstructs a stream from what it kept and stays readable by NeMo Gym's
// rules; a stream's terminal event past the limit is still found (the line is written, the stream
// reads complete). Plain and gzip bodies, streamed and not.
func TestCaptureLimit(t *testing.T) {
	const limit = 8 << 10
	var sse strings.Builder
	for i := range 400 {
		fmt.Fprintf(&sse, "data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"piece %03d \"}}]}\n\n", i)
	}
	sse.WriteString("data: [DONE]\n\n")
	jsonBody := `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("y", 4*limit) + `"}}]}`
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.Bytes()
	}
	for _, tc := range []struct {
		name, contentType string
		decoded           string
		gzip              bool
	}{
		{"stream", "text/event-stream", sse.String(), false},
		{"gzip stream", "text/event-stream", sse.String(), true},
		{"json", "application/json", jsonBody, false},
		{"gzip json", "application/json", jsonBody, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := []byte(tc.decoded)
			if tc.gzip {
				sent = gz(tc.decoded)
			}
			// The upstream keeps the connection open after the body, so a stream's line can only
			// be there once the client has every byte if its terminal event (past the limit) was
			// found and held.
			release := make(chan struct{})
			e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				if tc.gzip {
					w.Header().Set("Content-Encoding", "gzip")
				}
				if tc.contentType == "application/json" {
					w.Header().Set("Content-Length", fmt.Sprint(len(sent)))
				}
				w.Write(sent)
				w.(http.Flusher).Flush()
				<-release
			}, func(h *gateway.Handler) { h.MaxCaptureBytes = limit; h.SpoolThreshold = 1 << 10 })
			req, _ := http.NewRequest(http.MethodPost, e.url("cap", "/v1/chat/completions"), strings.NewReader(`{"stream":true}`))
			req.Header.Set("Accept-Encoding", "gzip")
			resp, err := rawClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(sent))
			_, err = io.ReadFull(resp.Body, got)
			if resp.StatusCode != 200 || err != nil || !bytes.Equal(got, sent) {
				t.Fatalf("client got %d, %v; want the %d bytes as sent", resp.StatusCode, err, len(sent))
			}
			l := e.one("cap") // before the upstream ends the body
			close(release)
			resp.Body.Close()
			if l.Category() != "capture_too_large" || l.ResponseRaw == nil || *l.ResponseRaw != tc.decoded[:limit] {
				t.Fatalf("category %s, response_raw %d bytes; want capture_too_large and the first %d bytes", l.Category(), len(deref(l.ResponseRaw).(string)), limit)
			}
			if tc.contentType == "application/json" {
				if string(l.Response) != "null" {
					t.Fatalf("response of a cut JSON body: %.80s, want null", l.Response)
				}
				return
			}
			content := l.Record.Response
			if !bytes.Contains(content, []byte(`"content":"piece 000 piece 001 `)) || bytes.Contains(content, []byte("piece 399")) {
				t.Fatalf("reconstruction should hold the kept pieces only: %.200s", content)
			}
		})
	}
}
