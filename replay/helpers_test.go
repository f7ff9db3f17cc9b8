package replay

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// cannedUpstream answers each request on path with the next canned answer for that path, SSE
// bodies flushed event by event (as a model server streams).
func cannedUpstream(t *testing.T, answers map[string][]capturetest.Answer) *capturetest.Upstream {
	t.Helper()
	next := map[string]int{}
	return capturetest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		list := answers[r.URL.Path]
		i := next[r.URL.Path]
		if i >= len(list) {
			http.Error(w, "no more canned answers", http.StatusTeapot)
			return
		}
		next[r.URL.Path] = i + 1
		list[i].ServeHTTP(w, r)
	})
}

// recordThroughGateway runs the capture gateway in front of upstream into a fresh capture dir and
// returns the gateway's base URL and the store.
func recordThroughGateway(t *testing.T, upstream string) (string, *capture.Store) {
	t.Helper()
	store := capturetest.NewStore(t)
	u, _ := url.Parse(upstream)
	gw := &gateway.Handler{Upstream: u, Store: store, ModelServerName: "policy", Logger: capturetest.QuietLogger()}
	return capturetest.NewServer(t, gw.ServeHTTP).URL, store
}

// post sends body to base+path and returns status, headers and the whole body.
func post(t *testing.T, base, path, body string) (int, http.Header, []byte) {
	t.Helper()
	res, err := http.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body of %s: %v", path, err)
	}
	return res.StatusCode, res.Header, b
}

// appendLine writes one capture line built from ex (defaults filled in).
func appendLine(t *testing.T, store *capture.Store, id string, ex capture.Exchange) {
	t.Helper()
	if ex.ModelCallID == "" {
		ex.ModelCallID = capture.NewModelCallID()
	}
	if ex.Dialect == "" {
		ex.Dialect = "chat"
	}
	now := float64(time.Now().UnixNano()) / 1e9
	ex.StartedAt, ex.CompletedAt = now, now+ex.LatencyMS/1000
	if err := store.AppendExchange(id, &ex); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// orNil is *p, or nil when p is nil.
func orNil[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// newReplay serves s on a test server and returns its base URL.
func newReplay(t *testing.T, s *Server) string {
	t.Helper()
	if s.Logger == nil {
		s.Logger = capturetest.QuietLogger()
	}
	return capturetest.NewServer(t, s.ServeHTTP).URL
}
