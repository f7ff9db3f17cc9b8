//go:build unix

package reliability

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// Item 6: client faults. A client that leaves before the upstream answers, mid-stream, or after the
// terminal event, and a client that reads slowly: every call still gets its line (cancelled with the
// partial body when the client left before the terminal event, the upstream's own outcome when it
// left after), the upstream request is cancelled when the client leaves early (observed at the
// upstream: its request context ends), claims are released (checked at each gateway's cleanup), and
// no goroutine is left behind.

// noLeaks checks, after every other cleanup of t ran (servers closed), that no goroutine of the
// test is left.
func noLeaks(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// awaitClosed fails the test unless ch is closed within waitFor.
func awaitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-within():
		t.Fatalf("%s did not happen within %v", what, waitFor)
	}
}

func TestClientFaults(t *testing.T) {
	const path = "/v1/chat/completions"
	stream := chatStream("n1", "Hel", "lo", " world")
	whole := bytes.Join(stream, nil)

	t.Run("leaves before the upstream answers", func(t *testing.T) {
		noLeaks(t)
		arrived, gone := make(chan struct{}), make(chan struct{})
		up := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			close(arrived)
			awaitCancel(t, r, gone)
		})
		g := startGateway(t, up.URL, nil)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-arrived
			cancel()
		}()
		_, err := g.post(ctx, "early-0", path, chatRequest("n1", true))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("client error %v, want its own cancellation", err)
		}
		awaitClosed(t, gone, "cancellation of the upstream request")
		g.drain()
		x := g.only("early-0")
		if str(x.ErrorCategory) != "cancelled" || x.StatusCode != nil || x.ResponseRaw != nil || string(x.Response) != "null" {
			t.Errorf("line: category %s status %s raw %q response %s; want cancelled, no status, no body", str(x.ErrorCategory), num(x.StatusCode), str(x.ResponseRaw), x.Response)
		}
		if !bytes.Contains(x.Request, []byte(`"n1"`)) {
			t.Errorf("the request is missing from the line: %s", x.Request)
		}
	})

	t.Run("leaves while sending the request", func(t *testing.T) {
		noLeaks(t)
		reached := make(chan struct{}, 1)
		up := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) { reached <- struct{}{} })
		g := startGateway(t, up.URL, nil)
		c, err := net.Dial("tcp", g.srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		body := chatRequest("n1", false)
		fmt.Fprintf(c, "POST /ng-rollout/half-0%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body[:len(body)/2])
		c.Close()
		select {
		case <-g.served:
		case <-within():
			t.Fatal("the gateway did not finish the request")
		}
		g.drain()
		x := g.only("half-0")
		if str(x.ErrorCategory) != "cancelled" || x.StatusCode != nil {
			t.Errorf("line: category %s status %s; want cancelled, no status", str(x.ErrorCategory), num(x.StatusCode))
		}
		select {
		case <-reached:
			t.Error("half a request was forwarded upstream")
		default:
		}
	})

	for _, tc := range []struct {
		name, dialect, path string
		events              [][]byte
		cut                 int    // events the client reads before it leaves
		reassembled         string // what the partial reassembly must contain
	}{
		{"leaves mid-stream (chat)", "chat", path, stream, 2, "Hello"},
		{"leaves mid-stream (messages)", "messages", "/v1/messages", messagesStream("Hel", "lo", " world"), 4, "Hello"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			gone := make(chan struct{})
			up := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				sendThenAwaitCancel(t, w, r, gone, tc.events[:tc.cut]...)
			})
			g := startGateway(t, up.URL, nil)
			res := g.open("mid-0", tc.path, chatRequest("n1", true))
			sent := bytes.Join(tc.events[:tc.cut], nil)
			readFirst(t, res.Body, sent)
			res.Body.Close() // leave before the terminal event
			awaitClosed(t, gone, "cancellation of the upstream request")
			g.drain()
			x := g.only("mid-0")
			if str(x.ErrorCategory) != "cancelled" || num(x.StatusCode) != "200" || str(x.ResponseRaw) != string(sent) {
				t.Errorf("line: category %s status %s raw %q; want cancelled, 200, the events sent", str(x.ErrorCategory), num(x.StatusCode), str(x.ResponseRaw))
			}
			if !bytes.Contains(x.Response, []byte(tc.reassembled)) {
				t.Errorf("partial reassembly %s does not hold %q", x.Response, tc.reassembled)
			}
		})
	}

	t.Run("leaves after the terminal event", func(t *testing.T) {
		noLeaks(t)
		up := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			// Keep the connection open after [DONE], as some servers do.
			sendThenAwaitCancel(t, w, r, nil, whole)
		})
		g := startGateway(t, up.URL, nil)
		res := g.open("after-0", path, chatRequest("n1", true))
		readFirst(t, res.Body, whole)
		// The line is durable once the client has the terminal event, though the upstream has
		// not ended its body.
		x := g.only("after-0")
		res.Body.Close()
		g.drain()
		if x.ErrorCategory != nil || num(x.StatusCode) != "200" || str(x.ResponseRaw) != string(whole) || content(t, x.Response) != "Hello world" {
			t.Errorf("line: category %s status %s raw %q response %s; want a clean call", str(x.ErrorCategory), num(x.StatusCode), str(x.ResponseRaw), x.Response)
		}
		if y := g.only("after-0"); y.ModelCallID != x.ModelCallID || y.ErrorCategory != nil {
			t.Errorf("leaving after the terminal event changed the capture to %s", str(y.ErrorCategory))
		}
	})

	t.Run("leaves mid-body of a large JSON answer", func(t *testing.T) {
		noLeaks(t)
		// 16 MiB: more than the client's 64 KiB receive buffer and the gateway's send buffer (at
		// most 4 MiB here) can hold, so the gateway cannot have read the whole body when the client
		// leaves.
		full := chatJSON("n1", 16<<20)
		gone := make(chan struct{})
		up := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", fmt.Sprint(len(full)))
			for off := 0; off < len(full); off += 64 << 10 {
				if _, err := w.Write(full[off:min(off+64<<10, len(full))]); err != nil {
					break // the gateway closed the upstream connection
				}
			}
			awaitCancel(t, r, gone)
		})
		g := startGateway(t, up.URL, nil)
		client := smallWindowClient(t)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url("bigjson-0", path), bytes.NewReader(chatRequest("n1", false)))
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		head := full[:100<<10]
		readFirst(t, res.Body, head)
		res.Body.Close()
		awaitClosed(t, gone, "cancellation of the upstream request")
		g.drain()
		x := g.only("bigjson-0")
		raw := str(x.ResponseRaw)
		if str(x.ErrorCategory) != "cancelled" || len(raw) < len(head) || len(raw) >= len(full) || !strings.HasPrefix(string(full), raw) {
			t.Errorf("line: category %s, raw body of %d bytes; want cancelled and a strict prefix of the %d-byte body, at least the %d bytes the client read",
				str(x.ErrorCategory), len(raw), len(full), len(head))
		}
	})

	t.Run("slow reader", func(t *testing.T) {
		noLeaks(t)
		// 12 MiB of events to a client with a 64 KiB receive buffer: more than the sockets between
		// gateway and client hold, so the gateway blocks writing to the client while the client
		// pauses for longer than the idle timeout. Waiting on a slow client is not an idle upstream.
		var evs [][]byte
		piece := strings.Repeat("z", 4000)
		for range 3000 {
			evs = append(evs, chatEvent("n1", piece, ""))
		}
		evs = append(evs, chatEvent("n1", "", "stop"), []byte("data: [DONE]\n\n"))
		body := bytes.Join(evs, nil)
		up := capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			for _, ev := range evs {
				if _, err := w.Write(ev); err != nil {
					return
				}
			}
		})
		const idle = 400 * time.Millisecond
		g := startGateway(t, up.URL, func(h *gateway.Handler) { h.IdleTimeout = idle })
		client := smallWindowClient(t)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url("slow-0", path), bytes.NewReader(chatRequest("n1", true)))
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		for i := 0; ; i++ {
			n, err := io.CopyN(&got, res.Body, 1<<20)
			if err == io.EOF || (err == nil && n == 0) {
				break
			}
			if err != nil {
				t.Fatalf("after %d bytes: %v", got.Len(), err)
			}
			if i < 3 {
				time.Sleep(2 * idle) // the fault: a client that stops reading for a while
			}
		}
		res.Body.Close()
		if !bytes.Equal(got.Bytes(), body) {
			t.Fatalf("slow client got %d bytes, want the %d sent", got.Len(), len(body))
		}
		g.drain()
		x := g.only("slow-0")
		if x.ErrorCategory != nil || str(x.ResponseRaw) != string(body) || len(content(t, x.Response)) != 3000*len(piece) {
			t.Errorf("line: category %s, raw %d bytes; want a clean call with the whole %d-byte body", str(x.ErrorCategory), len(str(x.ResponseRaw)), len(body))
		}
	})
}

// smallWindowClient is a client whose connections have a 64 KiB receive buffer (which also stops
// the kernel from growing it), so a gateway writing to it feels backpressure after a few MiB. Its
// idle connections are closed when the test ends.
func smallWindowClient(t testing.TB) *http.Client {
	d := &net.Dialer{Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
		})
		return errors.Join(err, serr)
	}}
	c := &http.Client{Transport: withSecrets{&http.Transport{DialContext: d.DialContext, DisableCompression: true}}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// messagesStream is an Anthropic Messages stream with the text pieces as deltas: message_start,
// content_block_start, deltas, content_block_stop, message_delta, message_stop.
func messagesStream(pieces ...string) [][]byte {
	ev := func(typ, data string) []byte { return fmt.Appendf(nil, "event: %s\ndata: %s\n\n", typ, data) }
	evs := [][]byte{
		ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"test-model","content":[],"stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}`),
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
	}
	for _, p := range pieces {
		evs = append(evs, ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, p)))
	}
	return append(evs,
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}`),
		ev("message_stop", `{"type":"message_stop"}`))
}
