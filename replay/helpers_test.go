package replay

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// logTo returns a logger writing text records into buf.
func logTo(buf *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// canned is one answer of the test upstream.
type canned struct {
	status      int
	contentType string
	body        []byte
}

// cannedUpstream answers each request on path with the next canned answer for that path, SSE
// bodies flushed event by event (as a model server streams).
func cannedUpstream(t *testing.T, answers map[string][]canned) *httptest.Server {
	t.Helper()
	next := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		list := answers[r.URL.Path]
		i := next[r.URL.Path]
		if i >= len(list) {
			http.Error(w, "no more canned answers", http.StatusTeapot)
			return
		}
		next[r.URL.Path] = i + 1
		a := list[i]
		w.Header().Set("Content-Type", a.contentType)
		w.WriteHeader(a.status)
		if a.contentType != "text/event-stream" {
			w.Write(a.body)
			return
		}
		for _, ev := range splitEvents(a.body) {
			w.Write(ev)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// recordThroughGateway runs the capture gateway in front of upstream into a fresh capture dir.
func recordThroughGateway(t *testing.T, upstream string) (*httptest.Server, *capture.Store) {
	t.Helper()
	store, err := capture.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(upstream)
	gw := &gateway.Handler{Upstream: u, Store: store, ModelServerName: "policy", Logger: quietLog()}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return srv, store
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

// lines returns the rollout's capture lines as generic maps.
func lines(t *testing.T, store *capture.Store, id string) []map[string]any {
	t.Helper()
	entries, err := store.Read(id)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range entries {
		var m map[string]any
		if err := json.Unmarshal(e.Data, &m); err != nil {
			t.Fatal(err)
		}
		m["_line"] = bytes.Clone(e.Data)
		out = append(out, m)
	}
	return out
}

// recordedBody is what the capture line holds as the body, as stored: response_raw, else the
// response object's bytes.
func recordedBody(t *testing.T, m map[string]any) []byte {
	t.Helper()
	if raw, ok := m["response_raw"].(string); ok {
		return []byte(raw)
	}
	var l struct {
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(m["_line"].([]byte), &l); err != nil {
		t.Fatal(err)
	}
	return l.Response
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

// newReplay serves s on a test server.
func newReplay(t *testing.T, s *Server) *httptest.Server {
	t.Helper()
	if s.Logger == nil {
		s.Logger = quietLog()
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// syncBuffer is a goroutine-safe bytes.Buffer for log output.
type syncBuffer struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{mu: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.String()
}
