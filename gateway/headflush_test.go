package gateway_test

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"
)

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
