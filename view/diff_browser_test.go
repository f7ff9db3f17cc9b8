package view_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/modelcalls/modelcalls/internal/demo"
)

// TestBrowserDiff compares runs side by side: the same rollouts captured by two runs of the demo
// into two dirs match; two rollouts of one run, chosen from a rollout's page, part at the first
// call's model, which the page names with both sides.
func TestBrowserDiff(t *testing.T) {
	chromiumPath(t)
	f := newFixture(t)
	again, err := demo.Run(context.Background(), demo.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	shots := screenshotDir(t)
	ts := startViewer(t, []string{f.captureDir, again.CaptureDir}, f.rolloutsFile)
	ctx := newBrowser(t)

	do(t, ctx, "open diff of two dirs", chromedp.Navigate(ts.URL+"/#/diff?a=demo-responses-sse&b=demo-responses-sse&a_dir=0&b_dir=1"))
	waitJS(t, ctx, "runs match", `document.getElementById("diff-first")?.textContent.startsWith("The runs match: 2 calls")`)
	waitJS(t, ctx, "totals", `document.getElementById("diff-totals").textContent.includes(`+js(again.CaptureDir)+`)`)
	waitJS(t, ctx, "pairs", `document.querySelectorAll("#diff-table tbody tr").length === 2 && document.querySelectorAll("#diff-table tr.differs").length === 0`)

	do(t, ctx, "open rollout", chromedp.Navigate(ts.URL+"/#/rollout/demo-chat-json"))
	do(t, ctx, "compare with", chromedp.SetValue(`#compare-with`, "demo-chat-sse"), chromedp.Click(`#compare`))
	waitJS(t, ctx, "first difference", `(() => { const f = document.getElementById("diff-first");
		return f && f.textContent.startsWith("First difference: call #0 (A call 0, B call 0): model") &&
			document.getElementById("diff-first-a").textContent === "deepseek-reasoner" && document.getElementById("diff-first-b").textContent === "gpt-5-nano-2025-08-07"; })()`)
	waitJS(t, ctx, "side by side", `(() => { const r = document.querySelector('#diff-table tr[data-position="0"]');
		return r.matches(".differs") && r.cells[3].textContent.includes("model") && r.cells[4].textContent === "deepseek-reasoner / gpt-5-nano-2025-08-07" &&
			r.cells[9].textContent === "get_weather / get_weather"; })()`)
	screenshot(t, ctx, shots, "diff.png")

	do(t, ctx, "unknown rollout", chromedp.Navigate(ts.URL+"/#/diff?a=demo-chat-json&b=nope"))
	waitJS(t, ctx, "named", `document.getElementById("diff-error")?.textContent.includes("nope")`)
	if n := evalJS[int](t, ctx, `document.querySelectorAll("#diff-first-note").length`); n != 0 {
		t.Errorf("a note on a page without a difference")
	}

	// Two runs whose first user messages differ only past the excerpt: both sides read the same,
	// and the page says why they still differ.
	dir := t.TempDir()
	long := strings.Repeat("word ", 40)
	writeChatRollout(t, dir, "long-a", []chatCall{{msgs: `[{"role":"user","content":` + js(long+"A") + `}]`, answer: "ok"}})
	writeChatRollout(t, dir, "long-b", []chatCall{{msgs: `[{"role":"user","content":` + js(long+"B") + `}]`, answer: "ok"}})
	ts2 := startViewer(t, []string{dir}, "")
	do(t, ctx, "open diff past the excerpt", chromedp.Navigate(ts2.URL+"/#/diff?a=long-a&b=long-b"))
	waitJS(t, ctx, "note", `(() => { const n = document.getElementById("diff-first-note");
		return n && n.textContent.startsWith("Note: both sides read the same here") && document.getElementById("diff-first").textContent.includes(": messages, message 0") &&
			document.getElementById("diff-first-a").textContent === document.getElementById("diff-first-b").textContent; })()`)
}
