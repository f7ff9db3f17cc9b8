//go:build unix

package reliability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/rollout"
)

// Shared set-up of the gateway tests: an in-process gateway.Handler on a loopback httptest server
// in front of a test upstream, a client that sends credentials on every call, and readers for what
// landed on disk.

// secretMarker is part of every credential the test clients send (authorization, x-api-key,
// api-key). It must never appear in a capture file or a log line.
const secretMarker = "sk-reliability-SECRET-7f3a9c"

// secretHeaders are the credential headers every test call carries.
var secretHeaders = map[string]string{
	"Authorization": "Bearer " + secretMarker + "-bearer",
	"X-Api-Key":     secretMarker + "-x-api-key",
	"Api-Key":       secretMarker + "-api-key",
}

// withSecrets is a RoundTripper that adds secretHeaders to each request, as agent harnesses do.
type withSecrets struct{ rt http.RoundTripper }

func (s withSecrets) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range secretHeaders {
		r.Header.Set(k, v)
	}
	return s.rt.RoundTrip(r)
}

// secretsClient is a client of its own that sends secretHeaders on every call; its idle
// connections are closed when the test ends.
func secretsClient(t testing.TB) *http.Client {
	c := &http.Client{Transport: withSecrets{&http.Transport{}}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// openStore opens the capture store in dir with open (capture.Open creates dir when missing;
// capture.OpenExisting, for a dir a process under test wrote, fails unless it is a capture dir),
// failing the test when it cannot.
func openStore(t testing.TB, open func(dir string) (*capture.Store, error), dir string) *capture.Store {
	t.Helper()
	store, err := open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// gw is one gateway under test.
type gw struct {
	t      *testing.T
	h      *gateway.Handler
	srv    *httptest.Server
	store  *capture.Store
	dir    string
	logs   *capturetest.Buffer
	client *http.Client
	ctr    *http.Transport // the client's transport
	utr    *http.Transport // the gateway's upstream transport
	served chan string     // the path of each request whose ServeHTTP returned (dropped when full)
}

// startGateway starts a gateway in front of upstream (a base URL) with its capture dir in a fresh
// temp dir; configure may change Handler fields before the first request. At cleanup it closes
// everything and checks that no secret reached a capture file or the log, and that no claim is
// left behind.
func startGateway(t *testing.T, upstream string, configure func(h *gateway.Handler)) *gw {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "capture")
	store := openStore(t, capture.Open, dir)
	logs := &capturetest.Buffer{}
	utr := http.DefaultTransport.(*http.Transport).Clone()
	utr.DisableCompression = true
	utr.MaxIdleConnsPerHost = 256
	h := &gateway.Handler{
		Upstream:        u,
		Store:           store,
		ModelServerName: "policy_model",
		Transport:       utr,
		Logger:          capturetest.Logger(logs),
	}
	if configure != nil {
		configure(h)
	}
	served := make(chan string, 1024)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			select {
			case served <- r.URL.Path:
			default:
			}
		}()
		h.ServeHTTP(w, r)
	}))
	ctr := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 128}
	g := &gw{t: t, h: h, srv: srv, store: store, dir: dir, logs: logs, client: &http.Client{Transport: withSecrets{ctr}}, ctr: ctr, utr: utr, served: served}
	t.Cleanup(func() {
		srv.Close()
		ctr.CloseIdleConnections()
		utr.CloseIdleConnections()
		g.assertNoSecrets()
		g.assertNoClaims()
		store.Close()
	})
	return g
}

// url is the gateway URL of path under rollout id's prefix ("" for no prefix).
func (g *gw) url(id, path string) string {
	if id == "" {
		return g.srv.URL + path
	}
	return g.srv.URL + rollout.PathPrefix(id) + path
}

// post sends body to path under rollout id with extra headers (pairs) and returns the response.
func (g *gw) post(ctx context.Context, id, path string, body []byte, headers ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url(id, path), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	return g.client.Do(req)
}

// open posts body to path under rollout id on the test's context and returns the response, failing
// the test when none comes; the caller reads and closes its body.
func (g *gw) open(id, path string, body []byte) *http.Response {
	g.t.Helper()
	res, err := g.post(g.t.Context(), id, path, body)
	if err != nil {
		g.t.Fatal(err)
	}
	return res
}

// readFirst reads len(want) bytes from a response body and fails the test unless they are want:
// what the client must have before the test goes on.
func readFirst(t testing.TB, body io.Reader, want []byte) {
	t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(body, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("client read %.300q (%v), want %.300q", got, err, want)
	}
}

// call posts and reads the whole answer; err is the transport or body read error.
func (g *gw) call(id, path string, body []byte, headers ...string) (status int, hdr http.Header, got []byte, err error) {
	res, err := g.post(context.Background(), id, path, body, headers...)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	got, err = io.ReadAll(res.Body)
	return res.StatusCode, res.Header, got, err
}

// drain waits until every captured call has its line durable or its marker written (Shutdown);
// the gateway refuses new captured calls afterwards.
func (g *gw) drain() {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := g.h.Shutdown(ctx); err != nil {
		g.t.Fatalf("captures still in flight after %v: %v", waitFor, err)
	}
}

// only returns the single exchange of rollout id.
func (g *gw) only(id string) *capturetest.Line {
	g.t.Helper()
	xs := capturetest.Lines(g.t, g.store, id)
	if len(xs) != 1 {
		g.t.Fatalf("rollout %s has %d capture lines, want 1", id, len(xs))
	}
	return xs[0]
}

// assertNoSecrets fails when a credential sent by the test client appears in any file under the
// capture dir (lines, markers, claims) or in the gateway's log.
func (g *gw) assertNoSecrets() {
	g.t.Helper()
	assertNoSecretsIn(g.t, g.dir, g.logs.String())
}

func assertNoSecretsIn(t testing.TB, dir, logs string) {
	t.Helper()
	if strings.Contains(logs, secretMarker) {
		t.Errorf("a credential appears in the gateway log")
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(secretMarker)) {
			t.Errorf("a credential appears in %s", p)
		}
		return nil
	})
}

// assertNoClaims fails when a claim is left in the capture dir (every call released its claim) or a
// per-rollout claims directory exists at all (the gateway never creates one).
func (g *gw) assertNoClaims() {
	g.t.Helper()
	assertNoClaimsIn(g.t, g.dir)
}

func assertNoClaimsIn(t testing.TB, dir string) {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, "*"+capture.ClaimsSuffix))
	if len(matches) > 0 {
		t.Errorf("%d per-rollout claims dirs left behind, e.g. %s", len(matches), matches[0])
	}
	store, err := capture.OpenExisting(dir)
	if err != nil {
		return // no capture dir: no claims
	}
	all, err := store.AllClaims()
	if err != nil {
		t.Errorf("read claims: %v", err)
	}
	for id, c := range all {
		if c.Live+c.Stale > 0 {
			t.Errorf("rollout %s: claims left behind: %+v", id, c)
		}
	}
}

// metric returns the value of the sample of name whose labels contain every "k=v" in labels, from
// the gateway's /metrics endpoint at base; -1 when absent.
func metric(t testing.TB, client *http.Client, base, name string, labels ...string) float64 {
	t.Helper()
	res, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("scrape metrics: %v", err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		rest := line[len(name):]
		if rest != "" && rest[0] != '{' && rest[0] != ' ' {
			continue // a longer metric name
		}
		ok := true
		for _, l := range labels {
			k, v, _ := strings.Cut(l, "=")
			if !strings.Contains(rest, k+`="`+v+`"`) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		return f
	}
	return -1
}

// chatRequest is a Chat Completions request body whose user message is nonce.
func chatRequest(nonce string, stream bool) []byte {
	return fmt.Appendf(nil, `{"model":"test-model","messages":[{"role":"user","content":%q}],"stream":%v}`, nonce, stream)
}

// chatJSON is a Chat Completions response answering nonce, padded with pad bytes of content.
func chatJSON(nonce string, pad int) []byte {
	return fmt.Appendf(nil, `{"id":"chatcmpl-%s","object":"chat.completion","created":1700000000,"model":"test-model","choices":[{"index":0,"message":{"role":"assistant","content":"%s%s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`,
		nonce, nonce, strings.Repeat("x", pad))
}

// chatEvent is one Chat Completions stream chunk carrying content (finish "" for none).
func chatEvent(nonce, content, finish string) []byte {
	fr := "null"
	if finish != "" {
		fr = strconv.Quote(finish)
	}
	c, _ := json.Marshal(content)
	return fmt.Appendf(nil, "data: {\"id\":\"chatcmpl-%s\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"test-model\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},\"finish_reason\":%s}]}\n\n",
		nonce, c, fr)
}

// chatStream is a whole Chat Completions stream: the pieces as deltas, a finish chunk, [DONE].
func chatStream(nonce string, pieces ...string) [][]byte {
	var evs [][]byte
	for _, p := range pieces {
		evs = append(evs, chatEvent(nonce, p, ""))
	}
	evs = append(evs, chatEvent(nonce, "", "stop"), []byte("data: [DONE]\n\n"))
	return evs
}

// sseHeaders sets the headers of an event stream response.
func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
}

// content returns choices[0].message.content of a Chat Completions response object.
func content(t testing.TB, resp json.RawMessage) string {
	t.Helper()
	var r struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(resp, &r); err != nil || len(r.Choices) == 0 {
		t.Fatalf("response %s: %v", resp, err)
	}
	return r.Choices[0].Message.Content
}

func str(s *string) string { return deref(s) }

func num(n *int) string {
	if n == nil {
		return "<nil>"
	}
	return strconv.Itoa(*n)
}

// within returns a channel closed after waitFor, for selects that must not hang.
func within() <-chan time.Time { return time.After(waitFor) }

// echoRequest is a Chat Completions request whose user message is nonce; the echo upstream answers
// with pad bytes of padding (streamed when stream is set).
func echoRequest(nonce string, stream bool, pad int) []byte {
	return fmt.Appendf(nil, `{"model":"test-model","messages":[{"role":"user","content":%q}],"stream":%v,"pad":%d}`, nonce, stream, pad)
}

// echoAnswer is the body the echo upstream sends for echoRequest(nonce, stream, pad).
func echoAnswer(nonce string, stream bool, pad int) []byte {
	if stream {
		return bytes.Join(chatStream(nonce, nonce, strings.Repeat("y", pad)), nil)
	}
	return chatJSON(nonce, pad)
}

// echoHandler is an upstream that answers every Chat Completions request with echoAnswer.
func echoHandler(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
		Stream bool `json:"stream"`
		Pad    int  `json:"pad"`
	}
	if err := json.Unmarshal(b, &req); err != nil || len(req.Messages) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if req.Stream {
		sseHeaders(w)
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Write(echoAnswer(req.Messages[0].Content, req.Stream, req.Pad))
}

// echoCall makes one call through base (a gateway URL) for rollout id and checks that the client
// got exactly the upstream's answer; it returns the model call id the gateway announced.
func echoCall(t testing.TB, client *http.Client, base, id, nonce string, stream bool, pad int) (string, error) {
	req, err := http.NewRequest(http.MethodPost, base+rollout.PathPrefix(id)+"/v1/chat/completions", bytes.NewReader(echoRequest(nonce, stream, pad)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		return "", fmt.Errorf("call %s: read body: %w", nonce, err)
	}
	if res.StatusCode != 200 || !bytes.Equal(got, echoAnswer(nonce, stream, pad)) {
		return "", fmt.Errorf("call %s: got %d %.120q, not the upstream's answer", nonce, res.StatusCode, got)
	}
	mcid := res.Header.Get(gateway.HeaderModelCallID)
	if len(mcid) != 32 {
		return "", fmt.Errorf("call %s: model call id header %q", nonce, mcid)
	}
	return mcid, nil
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func readAllString(res *http.Response) (string, error) {
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

// awaitClaims waits until rollout id has n live claims. The gateway creates a call's claim on its
// own goroutine while it forwards the call (docs/gateway.md, "Claims and durability"), so a call can
// reach the upstream a fraction of a millisecond before its claim exists; tests that act on
// "the upstream has the call" wait for the claim too. There is no event to wait on: it polls.
func awaitClaims(t testing.TB, store *capture.Store, id string, n int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		c, err := store.Claims(id)
		if err != nil {
			t.Fatal(err)
		}
		if c.Live == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rollout %s has %d live claims, want %d", id, c.Live, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
