package view_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/internal/demo"
	"github.com/modelcalls/modelcalls/record"
	"github.com/modelcalls/modelcalls/view"
)

// chromiumPath finds a Chromium to drive. Without one the browser tests skip, except under CI
// (CI=true), where a missing browser is a failure: CI installs Debian's chromium.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-headless-shell", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH (CI=true: install Debian's chromium, apt-get install -y chromium)")
	}
	t.Skip("no chromium on PATH; install Debian's chromium to run the browser tests")
	return ""
}

// newBrowser starts a headless Chromium with a fresh profile; the browser stops with the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

func screenshotDir(t *testing.T) string {
	if d := os.Getenv("MODELCALLS_VIEW_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(dir, name)
	capturetest.WriteFile(t, p, png, 0o644)
	t.Logf("screenshot %s", p)
}

// do runs actions with a per-step timeout.
func do(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitJS waits until the JavaScript expression is truthy. A poll whose JavaScript context went away
// under it (a navigation replaced the document between chromedp's lookup of the frame's context and
// the call: CDP error -32000 "Cannot find context with specified id", seen on a loaded machine right
// after the first navigation from about:blank) is started again in the new document.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	for {
		_, err = chromedp.Run(c, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(20*time.Millisecond)))
		if err == nil || !contextGone(err) || c.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("main").innerText.slice(0, 3000)`))
		t.Fatalf("%s: waiting for %s: %v\npage text:\n%s", what, expr, err, body)
	}
}

// contextGone reports the CDP error of an evaluation in a JavaScript context that no longer exists.
func contextGone(err error) bool {
	return strings.Contains(err.Error(), "Cannot find context with specified id")
}

func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// fixture is a capture dir written by the real gateway: the demo's rollouts (Responses, Chat
// Completions and Messages, JSON and SSE, a two-call tool loop each, a 429 from the upstream) and a
// torn last line appended to one rollout, as a crash mid-append leaves it.
type fixture struct {
	dir, captureDir, rolloutsFile string
	calls                         int // readable records over all rollouts
	rollouts                      int // rollout ids: capture files plus rollout records without one
}

const tornRollout = "demo-chat-json"

func newFixture(t *testing.T) *fixture {
	t.Helper()
	res, err := demo.Run(context.Background(), demo.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	f := &fixture{dir: res.Dir, captureDir: res.CaptureDir, rolloutsFile: res.RolloutsPath}
	p, err := res.Store.CapturePath(tornRollout)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString(`{"model_call_id":"0123456789abcdef0123456789abcdef","dialect":"chat","request":{"mo`)
	fh.Close()
	ids, err := res.Store.Rollouts()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		recs, _, err := record.ReadAvailableRecords(res.Store, id)
		if err != nil {
			t.Fatal(err)
		}
		f.calls += len(recs)
	}
	f.rollouts = len(res.Rollouts) // every scripted rollout has a record; all but one have a capture
	return f
}

func startViewer(t *testing.T, dirs []string, rolloutsFile string) *httptest.Server {
	t.Helper()
	_, ts, stop := serveViewer(t, view.Options{Dirs: dirs, RolloutsFile: rolloutsFile, ScanInterval: 30 * time.Millisecond})
	t.Cleanup(stop)
	return ts
}

// serveViewer starts a viewer with opts behind an httptest server; stop closes the server and
// waits for the viewer's Run to return.
func serveViewer(tb testing.TB, opts view.Options) (srv *view.Server, ts *httptest.Server, stop func()) {
	tb.Helper()
	srv, err := view.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	ts = httptest.NewServer(srv)
	return srv, ts, func() { ts.CloseClientConnections(); ts.Close(); cancel(); <-done }
}

// heldUpstream answers Chat Completions calls with a fixed completion, each only after the test
// sends on release, so that a call stays in flight (its claim live) as long as the test wants.
type heldUpstream struct{ release chan struct{} }

func (u *heldUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	select {
	case <-u.release:
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"chatcmpl-live","object":"chat.completion","created":1,"model":"live-model",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"I print <b>markup</b> as text."},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`)
}

// scriptPrompt is the user message of the live call: markup that must show as text.
const scriptPrompt = `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">hello`

// browseFixture is the set-up of a browser test: it skips (or fails under CI) without Chromium before
// building anything, then builds the fixture, the screenshot directory, a viewer over the fixture's
// capture dir and a browser, which stops first (cleanups run last-in first-out), ending its long polls.
func browseFixture(t *testing.T) (f *fixture, ts *httptest.Server, ctx context.Context, shots string) {
	t.Helper()
	chromiumPath(t)
	f = newFixture(t)
	shots = screenshotDir(t)
	ts = startViewer(t, []string{f.captureDir}, f.rolloutsFile)
	ctx = newBrowser(t)
	return f, ts, ctx, shots
}

func TestBrowserClickThrough(t *testing.T) {
	f, ts, ctx, shots := browseFixture(t)

	// Overview: totals, the error category, the torn line called out as a gap.
	do(t, ctx, "open overview", chromedp.Navigate(ts.URL+"/#/"))
	waitJS(t, ctx, "overview calls", `document.getElementById("card-calls")?.textContent === `+js(strconv.Itoa(f.calls)))
	waitJS(t, ctx, "overview rollouts", `document.getElementById("card-rollouts")?.textContent === `+js(strconv.Itoa(f.rollouts)))
	waitJS(t, ctx, "error category", `document.getElementById("errors-table")?.textContent.includes("rate_limit")`)
	waitJS(t, ctx, "unreadable gap", `document.querySelector('li[data-gap="unreadable"] a')?.textContent === `+js(tornRollout))
	waitJS(t, ctx, "no-capture gap", `document.querySelector('li[data-gap="no-capture"]')?.textContent.includes("demo-never-ran")`)
	for _, id := range []string{"lat", "ttft", "time"} {
		waitJS(t, ctx, "chart "+id, `document.querySelectorAll('svg[aria-labelledby^="`+id+`-t"] rect.bar').length > 0`)
	}
	waitJS(t, ctx, "per dialect", `["responses","chat","messages"].every(d => document.getElementById("dialects-table").textContent.includes(d))`)
	screenshot(t, ctx, shots, "overview.png")

	// Rollout list: sort, filter on a rollout-record field, then open a rollout.
	do(t, ctx, "open list", chromedp.Click(`a[data-nav="rollouts"]`))
	waitJS(t, ctx, "list rows", `document.querySelectorAll("#rollouts-table tbody tr").length === `+strconv.Itoa(f.rollouts))
	do(t, ctx, "sort by calls", chromedp.Click(`button[data-sort="calls"]`))
	waitJS(t, ctx, "sorted asc", `document.querySelector('th[aria-sort="ascending"] button[data-sort="calls"]') !== null`)
	waitJS(t, ctx, "fewest calls first", `document.querySelector("#rollouts-table tbody tr").dataset.rollout === "demo-never-ran"`)
	// Unknown token sums show as unknown, never as 0: the 429 rollout has no usage, the Messages
	// rollouts no reasoning count; a known 0 (cached tokens of demo-chat-sse) shows as 0.
	waitJS(t, ctx, "unknown tokens", `(() => { const col = {}; [...document.querySelectorAll("#rollouts-table thead button[data-sort]")].forEach((b, i) => col[b.dataset.sort] = i);
		const cell = (id, f) => document.querySelector('#rollouts-table tbody tr[data-rollout="' + id + '"]').cells[col[f]].textContent;
		return cell("demo-messages-rate-limited", "tokens_in") === "—" && cell("demo-messages-rate-limited", "tokens_out") === "—" &&
			cell("demo-messages-sse", "tokens_reasoning") === "—" && cell("demo-messages-sse", "tokens_in") !== "—" && cell("demo-chat-sse", "tokens_cached") === "0"; })()`)
	do(t, ctx, "sort desc", chromedp.Click(`button[data-sort="calls"]`))
	waitJS(t, ctx, "sorted desc", `document.querySelector('th[aria-sort="descending"] button[data-sort="calls"]') !== null`)
	do(t, ctx, "filter", chromedp.SetValue(`#filter`, "stream=true calls>=2"), chromedp.Click(`#apply-filter`))
	waitJS(t, ctx, "filtered rows", `[...document.querySelectorAll("#rollouts-table tbody tr")].map(r => r.dataset.rollout).sort().join() === "demo-chat-sse,demo-messages-sse,demo-responses-sse"`)
	waitJS(t, ctx, "record column", `document.querySelector('button[data-sort="record.reward"]') !== null`)
	screenshot(t, ctx, shots, "rollouts.png")

	do(t, ctx, "open rollout", chromedp.Click(`a[href="#/rollout/demo-responses-sse"]`))
	waitJS(t, ctx, "waterfall", `document.querySelectorAll("#waterfall a[data-call]").length === 2`)
	waitJS(t, ctx, "calls table", `document.querySelectorAll("#calls-table tbody tr").length === 2`)
	waitJS(t, ctx, "tool call shown", `document.querySelector('#calls-table tr[data-call="0"]').textContent.includes("get_weather")`)
	// The last call's request: the user message and the tool call are resent history, the tool
	// result is what this call added.
	waitJS(t, ctx, "new message", `[...document.querySelectorAll("#conv-input .msg.new")].map(m => m.textContent).join() .includes("22 degrees Celsius")`)
	waitJS(t, ctx, "history folded", `document.querySelector("#conv-input details.hist summary")?.textContent === "2 messages of resent history"`)
	waitJS(t, ctx, "history holds the question", `document.querySelector("#conv-input details.hist").textContent.includes("What is the weather in Tokyo?")`)
	do(t, ctx, "unfold history", chromedp.Click(`#conv-input details.hist summary`))
	screenshot(t, ctx, shots, "rollout.png")

	// One call: rendered response, record fields with units, provenance, raw stream on demand.
	do(t, ctx, "open call", chromedp.Click(`#calls-table a[aria-label="open call 1"]`))
	waitJS(t, ctx, "call page", `document.getElementById("call-index")?.textContent === "1"`)
	waitJS(t, ctx, "response text", `document.getElementById("conv-output").textContent.includes("22 °C and clear in Tokyo")`)
	waitJS(t, ctx, "reasoning", `document.querySelector("#conv-output .reasoning") !== null`)
	waitJS(t, ctx, "units", `[...document.querySelectorAll("#record-table tr")].some(r => r.cells[0]?.textContent === "latency_total_ms" && r.cells[2].textContent === "ms")`)
	waitJS(t, ctx, "provenance", `document.getElementById("provenance").textContent.includes("upstream")`)
	waitJS(t, ctx, "raw hidden", `document.getElementById("raw-response_raw").hidden`)
	do(t, ctx, "show raw", chromedp.Click(`#show-response_raw`))
	waitJS(t, ctx, "raw stream", `!document.getElementById("raw-response_raw").hidden && document.getElementById("raw-response_raw").textContent.includes("event: response.completed")`)
	screenshot(t, ctx, shots, "call.png")

	// The error call of the rate-limited rollout shows its category and the upstream's message.
	do(t, ctx, "open error call", chromedp.Navigate(ts.URL+"/#/rollout/demo-messages-rate-limited/call/0"))
	waitJS(t, ctx, "error shown", `document.getElementById("card-error")?.textContent === "rate_limit" && document.getElementById("card-status").textContent === "429"`)

	// The torn line is called out on its rollout's page.
	do(t, ctx, "open torn rollout", chromedp.Navigate(ts.URL+"/#/rollout/"+tornRollout))
	waitJS(t, ctx, "damaged note", `document.getElementById("damaged-note")?.textContent.includes("line 3")`)

	// Narrow window: the list still renders (tables scroll inside their box).
	do(t, ctx, "narrow", chromedp.EmulateViewport(400, 800), chromedp.Navigate(ts.URL+"/#/rollouts?sort=id"))
	waitJS(t, ctx, "narrow list", `document.querySelectorAll("#rollouts-table tbody tr").length > 0`)
	waitJS(t, ctx, "no page-wide scroll", `document.documentElement.scrollWidth <= window.innerWidth + 1`)
	screenshot(t, ctx, shots, "rollouts-narrow.png")
}

func TestBrowserLiveAndEscaping(t *testing.T) {
	f, ts, ctx, shots := browseFixture(t)

	store, err := capture.Open(f.captureDir)
	if err != nil {
		t.Fatal(err)
	}
	up := &heldUpstream{release: make(chan struct{})}
	upSrv := capturetest.NewServer(t, up.ServeHTTP)
	u, _ := url.Parse(upSrv.URL)
	gw := &gateway.Handler{Upstream: u, Store: store, ModelServerName: "live_model"}
	gwSrv := capturetest.NewServer(t, gw.ServeHTTP)
	// Released on every path, first of the deferred calls: a failed wait must not leave the held
	// call blocking the servers' Close forever.
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(up.release) }) }
	defer release()

	do(t, ctx, "open list", chromedp.Navigate(ts.URL+"/#/rollouts?sort=id"))
	waitJS(t, ctx, "list rows", `document.querySelectorAll("#rollouts-table tbody tr").length === `+strconv.Itoa(f.rollouts))
	do(t, ctx, "mark page", chromedp.Evaluate[chromedp.Void](`window.__samePage = true`))

	// A call through the real gateway while the page is open: first pending, then captured.
	body, _ := json.Marshal(map[string]any{"model": "live-model",
		"messages": []any{map[string]any{"role": "user", "content": scriptPrompt}}})
	done := make(chan error, 1)
	go func() {
		resp, err := http.Post(gwSrv.URL+"/ng-rollout/live-script/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		done <- err
	}()
	waitJS(t, ctx, "pending row", `document.querySelector('tr[data-rollout="live-script"] .b-pending')?.textContent === "1 pending"`)
	screenshot(t, ctx, shots, "live-pending.png")
	// A second tab on the rollout's own page: the call in flight is a dashed pending row there.
	tab, closeTab := chromedp.NewContext(ctx)
	defer closeTab()
	// The first action on a tab creates it and binds it to its context: run it without a timeout.
	// It opens the page itself: a second navigation (from about:blank) could leave the next
	// evaluation in the blank page's destroyed JavaScript context ("Cannot find context with
	// specified id").
	if _, err := chromedp.Run(tab, chromedp.Navigate(ts.URL+"/#/rollout/live-script")); err != nil {
		t.Fatalf("open the pending rollout in a second tab: %v", err)
	}
	waitJS(t, tab, "pending note", `document.getElementById("pending-note")?.textContent.startsWith("1 call pending")`)
	waitJS(t, tab, "pending row", `document.querySelectorAll("#waterfall g[data-pending]").length === 1`)
	release()
	if err := <-done; err != nil {
		t.Fatalf("live call: %v", err)
	}
	waitJS(t, ctx, "captured row", `(() => { const r = document.querySelector('tr[data-rollout="live-script"]');
		const calls = [...document.querySelectorAll("#rollouts-table thead button[data-sort]")].findIndex(b => b.dataset.sort === "calls");
		return r && !r.querySelector(".b-pending") && r.cells[calls].textContent === "1"; })()`)
	waitJS(t, tab, "captured on the rollout page", `document.querySelectorAll("#waterfall a[data-call]").length === 1 && !document.getElementById("pending-note")`)
	if !evalJS[bool](t, ctx, `window.__samePage === true`) {
		t.Fatal("the page reloaded to show the new call")
	}
	screenshot(t, ctx, shots, "live-captured.png")

	// The prompt's markup is shown as text and never runs.
	do(t, ctx, "open live rollout", chromedp.Click(`a[href="#/rollout/live-script"]`))
	waitJS(t, ctx, "prompt as text", `[...document.querySelectorAll("#conv-input pre")].some(p => p.textContent === `+js(scriptPrompt)+`)`)
	waitJS(t, ctx, "answer as text", `document.getElementById("conv-output").textContent.includes("I print <b>markup</b> as text.")`)
	if n := evalJS[int](t, ctx, `document.querySelectorAll("#main script, #main img, #main b").length`); n != 0 {
		t.Fatalf("payload markup became %d elements", n)
	}
	if v := evalJS[bool](t, ctx, `window.__pwned === undefined`); !v {
		t.Fatal("a script from the prompt ran")
	}
	screenshot(t, ctx, shots, "script-as-text.png")
}
