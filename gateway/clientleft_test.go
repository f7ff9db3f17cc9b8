package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/dialect"
)

// TestReassemblyStopsWhenClientLeaves: once the client's request context is done, the chunks the
// proxy still reads (before its write to the gone client fails) are kept as raw bytes but not
// reassembled, and the call notes that the client left.
func TestReassemblyStopsWhenClientLeaves(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &call{h: &Handler{}, dialect: dialect.Chat, start: time.Now(), contentLength: -1, clientCtx: ctx}
	c.responseStarted(&http.Response{StatusCode: 200, ContentLength: -1,
		Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(""))})
	defer func() {
		c.stopOnLeave()
		c.body.Close()
		c.stream.Close()
	}()
	c.observe([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"before\"}}]}\n\n"))
	cancel()
	c.observe([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" after\"}}]}\n\ndata: [DONE]\n\n"))
	if !c.clientLeft.Load() {
		t.Fatal("the call did not note that the client left")
	}
	if r := c.stream.Response(); !bytes.Contains(r, []byte(`"content":"before"`)) {
		t.Fatalf("reassembly after the client left: %s", r)
	}
	if c.kept != int64(len("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"before\"}}]}\n\n")+len("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" after\"}}]}\n\ndata: [DONE]\n\n")) {
		t.Fatalf("raw bytes kept: %d", c.kept)
	}
	if !c.terminalHit {
		t.Fatal("the terminal event is still found after the client left")
	}
}
