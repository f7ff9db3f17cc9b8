package gateway_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/internal/fsutil"
)

// steppedUpstream streams SSE chunks the test hands it one at a time, and then keeps the connection
// open (without ending the body) until the test or the client lets go.
type steppedUpstream struct {
	header  http.Header // extra response headers
	chunks  chan []byte
	release chan struct{}
	gone    chan struct{} // closed when the upstream request's context ended (the proxy cancelled it)
}

func newSteppedUpstream() *steppedUpstream {
	return &steppedUpstream{chunks: make(chan []byte), release: make(chan struct{}), gone: make(chan struct{})}
}

func (s *steppedUpstream) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	for k, v := range s.header {
		w.Header()[k] = v
	}
	w.WriteHeader(http.StatusOK)
	http.NewResponseController(w).Flush()
	for {
		select {
		case c, ok := <-s.chunks:
			if !ok {
				// Body finished, but keep the connection open until released.
				select {
				case <-s.release:
				case <-r.Context().Done():
					close(s.gone)
				}
				return
			}
			w.Write(c)
			http.NewResponseController(w).Flush()
		case <-r.Context().Done():
			close(s.gone)
			return
		}
	}
}

// clientReader reads a response body in the background, delivering exactly the sizes asked for.
type clientReader struct {
	want chan int
	got  chan []byte
	errs chan error
}

func newClientReader(t *testing.T, body io.Reader) *clientReader {
	cr := &clientReader{want: make(chan int), got: make(chan []byte), errs: make(chan error, 1)}
	t.Cleanup(func() { close(cr.want) })
	br := bufio.NewReader(body)
	go func() {
		for n := range cr.want {
			buf := make([]byte, n)
			if _, err := io.ReadFull(br, buf); err != nil {
				cr.errs <- err
				return
			}
			select {
			case cr.got <- buf:
			case <-time.After(10 * time.Second): // the test gave up on this read
				return
			}
		}
	}()
	return cr
}

// expect waits for the next len(want) bytes and checks them; a chunk that does not arrive within
// the bound is reported as delayed.
func (cr *clientReader) expect(t *testing.T, want []byte, what string) {
	t.Helper()
	cr.ask(t, len(want), what)
	cr.receive(t, want, what, "not delivered to the client while the upstream waits for it")
}

// expectHeld asks for the next len(want) bytes while the capture write is blocked and checks that
// none of them reach the client within 300 ms; it then calls unlock (the capture write can finish)
// and checks that exactly want arrives.
func (cr *clientReader) expectHeld(t *testing.T, want []byte, unlock func(), what string) {
	t.Helper()
	cr.ask(t, len(want), what)
	select {
	case got := <-cr.got:
		t.Fatalf("%s: %q reached the client while the capture write was blocked", what, got)
	case err := <-cr.errs:
		t.Fatalf("%s: client read failed: %v", what, err)
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	cr.receive(t, want, what, "not released after the capture write could finish")
}

// ask has the reader read the next n bytes.
func (cr *clientReader) ask(t *testing.T, n int, what string) {
	t.Helper()
	select {
	case cr.want <- n:
	case err := <-cr.errs:
		t.Fatalf("%s: client read failed: %v", what, err)
	}
}

// receive waits up to 5 s for the bytes asked for and checks they are want; late says what it
// means when they do not come.
func (cr *clientReader) receive(t *testing.T, want []byte, what, late string) {
	t.Helper()
	select {
	case got := <-cr.got:
		if string(got) != string(want) {
			t.Fatalf("%s: client got %q, want %q", what, got, want)
		}
	case err := <-cr.errs:
		t.Fatalf("%s: client read failed: %v", what, err)
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: %s", what, late)
	}
}

// startCall sends req to the gateway and returns its response with a clientReader over the body;
// the body is closed when the test ends, before the reader stops.
func startCall(t *testing.T, req *http.Request) (*http.Response, *clientReader) {
	t.Helper()
	resp, err := rawClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cr := newClientReader(t, resp.Body)
	t.Cleanup(func() { resp.Body.Close() })
	return resp, cr
}

// lockCaptureFile takes an exclusive flock on rollout id's capture file, so the gateway's append
// blocks until unlock is called.
func lockCaptureFile(t *testing.T, e *env, id string) (unlock func()) {
	t.Helper()
	p, err := e.store.CapturePath(id)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsutil.Lock(f, true); err != nil {
		t.Fatal(err)
	}
	done := false
	unlock = func() {
		if !done {
			done = true
			fsutil.Unlock(f)
			f.Close()
		}
	}
	t.Cleanup(unlock)
	return unlock
}

// captureSize is the size of rollout id's capture file (read without taking its lock).
func captureSize(t *testing.T, e *env, id string) int64 {
	t.Helper()
	p, _ := e.store.CapturePath(id)
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestHoldAndNoDelay proves both halves of the hold rule for every dialect. The capture file is
// locked the whole time, so a capture write cannot finish: every non-terminal chunk (and the first
// fragment of the terminal event) still reaches the client before the upstream sends the next; the
// chunk that completes the terminal event does not, until the lock is released and the line is
// durable. The upstream then keeps the connection open: that must not delay anything, and the
// client leaving afterwards does not make the call "cancelled".
func TestHoldAndNoDelay(t *testing.T) {
	for _, tc := range []struct {
		dialect, path, fixture string
	}{
		{"responses", "/v1/responses", "openai_responses/stream_reasoning_function_call.sse"},
		{"chat", "/v1/chat/completions", "openai_chat/stream_tool_call_usage_only_chunk.sse"},
		{"messages", "/v1/messages", "anthropic_messages/stream_thinking_signature.sse"},
	} {
		t.Run(tc.dialect, func(t *testing.T) {
			events := capturetest.SSEEvents(fixture(t, tc.fixture))
			up := newSteppedUpstream()
			e := newEnv(t, up.serve)
			const id = "hold-1"
			unlock := lockCaptureFile(t, e, id)

			req, _ := http.NewRequest(http.MethodPost, e.url(id, tc.path), strings.NewReader(`{"model":"m","stream":true}`))
			resp, cr := startCall(t, req)

			for i, ev := range events[:len(events)-1] {
				up.chunks <- ev
				cr.expect(t, ev, "event "+strconv.Itoa(i))
			}
			last := events[len(events)-1]
			head, tail := last[:7], last[7:]
			up.chunks <- head
			cr.expect(t, head, "first fragment of the terminal event")
			if n := captureSize(t, e, id); n != 0 {
				t.Fatalf("capture file has %d bytes before the terminal event", n)
			}
			if c, err := e.store.Claims(id); err != nil || c.Live != 1 {
				t.Fatalf("claims before the terminal event: %+v, %v; want 1 live", c, err)
			}

			up.chunks <- tail
			cr.expectHeld(t, tail, unlock, "the chunk that completes the terminal event")
			l := e.one(id)
			if c, _ := e.store.Claims(id); c.Live != 0 {
				t.Errorf("claim still live after the line is durable")
			}

			// The upstream still holds the connection open; the client has its terminal event
			// and leaves. The call's outcome stays the upstream's.
			close(up.chunks)
			resp.Body.Close()
			select {
			case <-up.gone:
			case <-time.After(5 * time.Second):
				t.Fatal("upstream request not cancelled after the client left")
			}
			e.drain()
			if *l.StatusCode != 200 || l.ErrorCategory != nil || l.Dialect != tc.dialect {
				t.Errorf("line: status %v category %s dialect %s", deref(l.StatusCode), l.Category(), l.Dialect)
			}
			if l.ResponseRaw == nil || !strings.HasSuffix(*l.ResponseRaw, string(last)) {
				t.Errorf("response_raw does not end with the terminal event")
			}
			if len(e.lines(id)) != 1 {
				t.Errorf("the client leaving after the terminal event added a line")
			}
		})
	}
}

// TestHoldLastChunkOfJSON: a non-streamed body's last chunk (here: the whole Content-Length body)
// is released only once the line is durable.
func TestHoldLastChunkOfJSON(t *testing.T) {
	body := fixture(t, "openai_chat/json_text_usage_details.json")
	e := newEnv(t, capturetest.Replay(http.StatusOK, "application/json", body))
	const id = "hold-json"
	unlock := lockCaptureFile(t, e, id)
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := rawClient().Post(e.url(id, "/v1/chat/completions"), "application/json", strings.NewReader(`{"model":"m"}`))
		if err != nil {
			done <- result{nil, err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("client got the whole body (%d bytes, %v) while the capture write was blocked", len(r.b), r.err)
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	r := <-done
	if r.err != nil || string(r.b) != string(body) {
		t.Fatalf("body %d bytes, %v", len(r.b), r.err)
	}
	if l := e.one(id); l.ErrorCategory != nil || l.Response == nil {
		t.Errorf("line: category %s, response %s", l.Category(), l.Response)
	}
}

// A response of known length gets its headers with its first chunk, in one write, as from a proxy
// with the default flush interval; a stream still gets its headers on their own, at once. Checked
// on a raw connection, captured and uncaptured, with an upstream that sends its headers and then
// waits before the body.
func TestHeadersGoWithFirstChunk(t *testing.T) {
	for _, tt := range []struct {
		name, contentType, id string
		length                bool
		headersAlone          bool
	}{
		{"json, captured", "application/json", "hf-1", true, false},
		{"json, uncaptured", "application/json", "", true, false},
		{"sse, captured", "text/event-stream", "hf-2", false, true},
		{"json without length, captured", "application/json", "hf-3", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(`{"id":"c","object":"chat.completion","choices":[]}`)
			if tt.contentType == "text/event-stream" {
				body = []byte("data: {\"id\":\"c\",\"choices\":[]}\n\ndata: [DONE]\n\n")
			}
			sent, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			let := func() { once.Do(func() { close(release) }) }
			defer let() // a failed check must not leave the upstream waiting
			e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				if tt.length {
					w.Header().Set("Content-Length", "51")
				}
				w.WriteHeader(http.StatusOK)
				http.NewResponseController(w).Flush()
				close(sent)
				<-release
				w.Write(body)
			})
			u, _ := url.Parse(e.url(tt.id, "/v1/chat/completions"))
			conn, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			req := "POST " + u.Path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
			if _, err := conn.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
			<-sent
			// The upstream's headers are out and its body is not: a proxy that forwards the
			// headers on their own does so within this wait.
			conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			buf := make([]byte, 4096)
			n, err := conn.Read(buf)
			gotAlone := err == nil
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal(err)
			}
			if gotAlone != tt.headersAlone {
				t.Fatalf("headers before the body: %v (read %q), want %v", gotAlone, buf[:n], tt.headersAlone)
			}
			let()
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			if !gotAlone {
				// One read: the gateway wrote the headers and the body together.
				if n, err = conn.Read(buf); err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(buf[:n], []byte("\r\n\r\n")) || !bytes.HasSuffix(buf[:n], body) {
					t.Fatalf("first read %q: want the headers and the whole body", buf[:n])
				}
			}
			resp, err := http.ReadResponse(bufio.NewReader(&prefixed{head: buf[:n], conn: conn}), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
		})
	}
}

// prefixed reads head, then conn.
type prefixed struct {
	head []byte
	conn net.Conn
}

func (p *prefixed) Read(b []byte) (int, error) {
	if len(p.head) > 0 {
		n := copy(b, p.head)
		p.head = p.head[n:]
		return n, nil
	}
	return p.conn.Read(b)
}
