package e2e

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestTapStreamsAndRecords checks the tap relays each SSE event as the upstream flushes it
// (the client reads the first event while the upstream still holds the second), and records
// request and whole response.
func TestTapStreamsAndRecords(t *testing.T) {
	release := make(chan struct{})
	up := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		_ = http.NewResponseController(w).Flush()
		<-release
		_, _ = io.WriteString(w, "data: two\n\n")
	})
	tap, front := tapIn(t, up.URL)

	resp, err := http.Post(front.URL+"/v1/chat/completions?x=1", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || first != "data: one\n" {
		t.Fatalf("first line %q, %v", first, err)
	}
	close(release) // only now may the upstream finish: the first event came through alone
	rest, err := io.ReadAll(br)
	resp.Body.Close()
	if err != nil || string(rest) != "\ndata: two\n\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}

	head, err := http.Head(front.URL + "/api/hello")
	if err != nil {
		t.Fatal(err)
	}
	head.Body.Close()
	if head.StatusCode != http.StatusNotFound {
		t.Fatalf("HEAD status %d, want the upstream's 404", head.StatusCode)
	}

	got := tap.Take()
	if len(got) != 2 {
		t.Fatalf("%d entries, want 2", len(got))
	}
	post, h := got[0], got[1]
	if post.Dialect() != DialectChat || post.RawQuery != "x=1" || string(post.ReqBody) != `{"stream":true}` ||
		post.Status != 200 || string(post.RespBody) != "data: one\n\ndata: two\n\n" {
		t.Fatalf("POST entry %+v", post)
	}
	if h.Method != http.MethodHead || h.Path != "/api/hello" || h.Status != 404 || h.Dialect() != "" {
		t.Fatalf("HEAD entry %+v", h)
	}
	if len(tap.Take()) != 0 {
		t.Fatalf("Take did not forget")
	}
}

func TestNewTapRejectsBadTargets(t *testing.T) {
	for _, target := range []string{"", "127.0.0.1:80", "https://x", "http://", "::"} {
		if _, err := NewTap(target); err == nil {
			t.Errorf("NewTap(%q) = nil error", target)
		}
	}
}

// tapIn starts a Tap in front of upstream on a test server, closed at cleanup.
func tapIn(t *testing.T, upstream string) (*Tap, *httptest.Server) {
	t.Helper()
	tap, err := NewTap(upstream)
	if err != nil {
		t.Fatal(err)
	}
	front := capturetest.NewServer(t, tap.ServeHTTP)
	return tap, front
}
