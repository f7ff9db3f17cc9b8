package view_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// ggufModel is a model named by its file, as llama-server reports it.
const ggufModel = "/models/unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF/Qwen3-Coder-30B-A3B-Instruct-Q4_K_M.gguf"

// clientExchanges is the part of testdata/clients/*.json this test replays.
type clientExchanges struct {
	Exchanges []struct {
		Request struct {
			Method string          `json:"method"`
			Path   string          `json:"path"`
			Body   json.RawMessage `json:"body"`
		} `json:"request"`
		Response struct {
			Status int    `json:"status"`
			Body   string `json:"body"`
		} `json:"response_from_capture_stub"`
	} `json:"exchanges"`
}

// addRealRollouts captures, through a real gateway into dir, the requests Claude Code sent in a
// two-turn tool loop (rollout cc-r1: a 6,000-character system prompt, 12 tools, a Read tool call
// and its result), answered with the recorded streams; and one Chat call each for rollouts whose
// models have long names (a dated Claude model, a .gguf path).
func addRealRollouts(t *testing.T, dir string) {
	t.Helper()
	var cf clientExchanges
	if err := json.Unmarshal(capturetest.ReadTestdata(t, "clients", "claude-code.json"), &cf); err != nil {
		t.Fatal(err)
	}
	recorded := map[string]string{} // request body -> recorded answer
	for _, x := range cf.Exchanges {
		recorded[string(x.Request.Body)] = x.Response.Body
	}
	up := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			var req struct{ Model string }
			json.Unmarshal(body, &req)
			w.Header().Set("Content-Type", "application/json")
			b, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion", "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "ok"}, "finish_reason": "stop"}},
				"usage":   map[string]any{"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})
			w.Write(b)
			return
		}
		var compact bytes.Buffer
		json.Compact(&compact, body)
		answer, ok := recorded[compact.String()]
		if !ok {
			http.Error(w, "not recorded", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, answer)
	})
	// The recorded bodies are compared compact.
	for k, v := range recorded {
		var c bytes.Buffer
		if json.Compact(&c, []byte(k)) == nil {
			delete(recorded, k)
			recorded[c.String()] = v
		}
	}
	store, err := capture.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	gw := capturetest.NewServer(t, (&gateway.Handler{Upstream: u, Store: store}).ServeHTTP)
	post := func(path string, body []byte) {
		t.Helper()
		resp, err := http.Post(gw.URL+path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
	}
	for _, x := range cf.Exchanges {
		if x.Request.Method == "POST" {
			post(x.Request.Path, x.Request.Body)
		}
	}
	for id, model := range map[string]string{"long-claude": "claude-sonnet-4-5-20250929", "long-gguf": ggufModel} {
		body, _ := json.Marshal(map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
		post("/ng-rollout/"+id+"/v1/chat/completions", body)
	}
}

// TestBrowserRealRollout reads a real Claude Code rollout and long model names as a user does: the
// call page opens on the user's words (system prompt, tool list and resent history folded), names
// the tool of a tool result, labels the answer, shows the model, reasoning tokens and dates; the
// list has a column chooser, reward beside the id, one column per field and names that do not
// wrap; a filter on an unknown field says so; search finds prompts, tool names and errors; the
// transcript shows every message once with its call.
func TestBrowserRealRollout(t *testing.T) {
	chromiumPath(t)
	f := newFixture(t)
	addRealRollouts(t, f.captureDir)
	shots := screenshotDir(t)
	ts := startViewer(t, []string{f.captureDir}, f.rolloutsFile)
	ctx := newBrowser(t)

	// The second call of the Claude Code rollout.
	do(t, ctx, "open cc call", chromedp.Navigate(ts.URL+"/#/rollout/cc-r1/call/1"))
	waitJS(t, ctx, "call page", `document.getElementById("call-index")?.textContent === "1"`)
	waitJS(t, ctx, "system prompt folded", `(() => { const d = document.querySelector('#conv-input details.long[data-role="system"]');
		return d && !d.open && /system prompt · [0-9,]+ characters/.test(d.querySelector("summary").textContent); })()`)
	waitJS(t, ctx, "tools folded", `(() => { const d = document.getElementById("tools-offered"); return d.tagName === "DETAILS" && !d.open && d.textContent.startsWith("12 tools offered"); })()`)
	waitJS(t, ctx, "history folded", `document.querySelector("#conv-input details.hist:not([open])") !== null`)
	// The user's words are the first thing shown open: nothing before them but folded parts.
	waitJS(t, ctx, "opens on the tool result", `(() => { const first = [...document.getElementById("conv-input").children].find(c => c.tagName !== "DETAILS");
		return first && first.matches(".msg.new"); })()`)
	waitJS(t, ctx, "tool result names its tool", `[...document.querySelectorAll("#conv-input .tool-result .label")].some(l => l.textContent.startsWith("Tool result of Read"))`)
	waitJS(t, ctx, "model card", `document.getElementById("card-model")?.textContent === "claude-opus-5-5"`)
	waitJS(t, ctx, "reasoning tokens card", `document.getElementById("card-tokens-reasoning") !== null`)
	waitJS(t, ctx, "started as a date", `/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/.test(document.getElementById("card-started").textContent)`)
	waitJS(t, ctx, "record times as dates", `[...document.querySelectorAll("#record-table tr")].some(r => r.cells[0]?.textContent === "started_at" && r.cells[1].textContent.includes(" UTC ("))`)
	screenshot(t, ctx, shots, "real-call.png")

	// The answer after the reasoning has its own label.
	do(t, ctx, "open reasoning call", chromedp.Navigate(ts.URL+"/#/rollout/demo-responses-sse/call/1"))
	waitJS(t, ctx, "answer label", `(() => { const parts = [...document.querySelectorAll("#conv-output .part")];
		const r = parts.findIndex(p => p.matches(".reasoning")), a = parts.findIndex(p => p.matches(".answer"));
		return r >= 0 && a > r && parts[a].querySelector(".label").textContent === "Answer"; })()`)

	// The list at 1280 px: reward beside the id, one dialect column, long names cut with a tooltip.
	do(t, ctx, "open list", chromedp.Navigate(ts.URL+"/#/rollouts?sort=id"))
	waitJS(t, ctx, "list rows", `document.querySelector('#rollouts-table tr[data-rollout="long-gguf"]') !== null`)
	waitJS(t, ctx, "reward second", `document.querySelectorAll("#rollouts-table thead th")[1].textContent.startsWith("reward")`)
	waitJS(t, ctx, "reward on screen", `document.querySelector('button[data-sort="record.reward"]').getBoundingClientRect().right <= window.innerWidth`)
	waitJS(t, ctx, "one dialect column", `[...document.querySelectorAll("#rollouts-table thead th")].filter(th => th.textContent.replace(/[▲▼]/g, "").trim() === "dialect").length === 1`)
	waitJS(t, ctx, "names on one line", `(() => { const cols = [...document.querySelectorAll("#rollouts-table thead button[data-sort]")].map(b => b.dataset.sort);
		const row = document.querySelector('#rollouts-table tr[data-rollout="long-gguf"]'), cell = row.cells[cols.indexOf("model")];
		const one = document.querySelector('#rollouts-table tr[data-rollout="long-claude"]');
		return cell.title === `+js(ggufModel)+` && cell.querySelector(".cut").scrollWidth > cell.querySelector(".cut").clientWidth && row.getBoundingClientRect().height < 40 && one.getBoundingClientRect().height < 40; })()`)
	// The column chooser: hide a column, and the choice outlives a reload.
	do(t, ctx, "open chooser", chromedp.Click(`#columns-summary`), chromedp.Click(`input[data-column="tokens_cached"]`))
	waitJS(t, ctx, "column hidden", `document.querySelector('button[data-sort="tokens_cached"]') === null`)
	do(t, ctx, "reload", chromedp.Reload())
	waitJS(t, ctx, "still hidden", `document.querySelector('#rollouts-table tbody tr') !== null && document.querySelector('button[data-sort="tokens_cached"]') === null`)
	do(t, ctx, "show again", chromedp.Click(`#columns-summary`), chromedp.Click(`input[data-column="tokens_cached"]`))
	waitJS(t, ctx, "column back", `document.querySelector('button[data-sort="tokens_cached"]') !== null`)
	screenshot(t, ctx, shots, "real-list.png")

	// A filter on an unknown field names it, and keeps the form.
	do(t, ctx, "bad filter", chromedp.SetValue(`#filter`, "rewrd<1"), chromedp.Click(`#apply-filter`))
	waitJS(t, ctx, "unknown field named", `(() => { const e = document.getElementById("filter-error"); return e && e.textContent.includes('unknown field "rewrd"') && e.textContent.includes("did you mean reward?"); })()`)
	waitJS(t, ctx, "form kept", `document.getElementById("filter").value === "rewrd<1"`)

	// Search across the run: a prompt, a tool name, an error.
	do(t, ctx, "open search", chromedp.Click(`a[data-nav="search"]`))
	do(t, ctx, "search prompt", chromedp.SetValue(`#search-q`, "HELLO.TXT"), chromedp.Click(`#run-search`))
	waitJS(t, ctx, "prompt found", `[...document.querySelectorAll("#search-results tbody tr")].some(r => r.cells[0].textContent === "cc-r1" && r.cells[2].textContent === "request" && r.cells[4].textContent.toLowerCase().includes("hello.txt"))`)
	do(t, ctx, "search tool", chromedp.Navigate(ts.URL+"/#/search?q=get_weather"))
	waitJS(t, ctx, "tool found", `[...document.querySelectorAll("#search-results tbody tr")].some(r => r.cells[2].textContent === "tools") &&
		[...document.querySelectorAll("#search-results tbody tr")].some(r => r.cells[3].textContent.includes("tool call · get_weather"))`)
	do(t, ctx, "search error", chromedp.Navigate(ts.URL+"/#/search?q=rate_limit"))
	waitJS(t, ctx, "error found", `[...document.querySelectorAll("#search-results tbody tr")].some(r => r.cells[0].textContent === "demo-messages-rate-limited" && r.cells[2].textContent === "error")`)
	screenshot(t, ctx, shots, "search.png")

	// The transcript: every message once, in order, with its call; the prompt once though both calls sent it.
	do(t, ctx, "open rollout", chromedp.Navigate(ts.URL+"/#/rollout/cc-r1"))
	do(t, ctx, "open transcript", chromedp.Click(`#transcript-link`))
	waitJS(t, ctx, "transcript", `document.querySelectorAll("#transcript .msg").length > 0`)
	waitJS(t, ctx, "transcript order", `(() => { const ms = [...document.querySelectorAll("#transcript .msg")].map(m => m.dataset.source + ":" + m.dataset.call + ":" + m.dataset.role);
		const toolResult = [...document.querySelectorAll("#transcript .msg")].findIndex(m => m.querySelector(".tool-result"));
		const toolCall = [...document.querySelectorAll("#transcript .msg")].findIndex(m => m.querySelector(".tool-call"));
		return ms[0] === "request:0:system" && toolCall >= 0 && ms[toolCall] === "response:0:assistant" && toolResult > toolCall && ms[toolResult].startsWith("request:1:") &&
			ms[ms.length - 1] === "response:1:assistant"; })()`)
	waitJS(t, ctx, "system prompt folded", `document.querySelectorAll('#transcript details.long[data-role="system"]').length >= 1 &&
		[...document.querySelectorAll('#transcript .msg[data-role="system"]')].every(m => m.parentElement.matches("details.long"))`)
	screenshot(t, ctx, shots, "transcript.png")
}
