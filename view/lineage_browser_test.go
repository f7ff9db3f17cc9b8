package view_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/rollout"
)

// chatCall is one scripted Chat Completions call of a test capture.
type chatCall struct {
	msgs     string // the request's messages, a JSON array
	answer   string // the assistant's text; "" for a call that failed with a 500
	response string // a whole response object instead of answer's ("" for none)
	tokenCap string // the line's token_capture ("" for none)
	parent   string // the parent call id the client declared ("" for none)
}

// writeChatRollout appends calls to rollout id of a new capture dir, one second apart.
func writeChatRollout(t *testing.T, dir, id string, calls []chatCall) {
	t.Helper()
	st, err := capture.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := float64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix())
	for i, c := range calls {
		status := 200
		ex := &capture.Exchange{ModelCallID: fmt.Sprintf("%032x", i+1), Dialect: "chat",
			ModelRef:  &rollout.ModelServerRef{Type: rollout.ModelServerRefType, Name: "lin"},
			StartedAt: t0 + float64(i), CompletedAt: t0 + float64(i) + 0.5, LatencyMS: 500, StatusCode: &status,
			Request: json.RawMessage(`{"model":"m","messages":` + c.msgs + `}`),
		}
		switch {
		case c.response != "":
			ex.Response = json.RawMessage(c.response)
		case c.answer != "":
			ex.Response = json.RawMessage(`{"id":"c` + fmt.Sprint(i) + `","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` + js(c.answer) + `},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`)
		default:
			status = 500
			cat := "server_error"
			ex.ErrorCategory = &cat
			ex.Response = json.RawMessage(`{"error":{"message":"overloaded","type":"server_error"}}`)
		}
		if c.tokenCap != "" {
			ex.TokenCapture = json.RawMessage(c.tokenCap)
		}
		if c.parent != "" {
			ex.ClientParentCallID = &c.parent
		}
		if err := st.AppendExchange(id, ex); err != nil {
			t.Fatal(err)
		}
	}
}

// The scripted conversation: a main conversation with a retried call, a branch from its first
// answer with that answer edited by the client, and a side call (a title) with its own prompt.
const (
	linSys  = `{"role":"system","content":"You fix bugs."}`
	linU1   = `{"role":"user","content":"The build fails in parse.go."}`
	linA0   = `{"role":"assistant","content":"Let me read parse.go first."}`
	linA0ed = `{"role":"assistant","content":"Let me read parse.go first, carefully."}`
	linU2   = `{"role":"user","content":"Here it is: func parse() {}"}`
	linA2   = `{"role":"assistant","content":"parse returns nothing; it should return an error."}`
	linU3   = `{"role":"user","content":"Fix it."}`
	linU2b  = `{"role":"user","content":"Actually, look at lex.go instead."}`
)

func linMsgs(m ...string) string { return "[" + strings.Join(m, ",") + "]" }

var lineageCalls = []chatCall{
	{msgs: linMsgs(linSys, linU1), answer: "Let me read parse.go first."},                                                     // 0 root
	{msgs: linMsgs(linSys, linU1, linA0, linU2)},                                                                              // 1 extends 0, fails
	{msgs: linMsgs(linSys, linU1, linA0, linU2), answer: "parse returns nothing; it should return an error."},                 // 2 retry of 1
	{msgs: linMsgs(linSys, `{"role":"user","content":"Title for: The build fails in parse.go."}`), answer: "Fixing parse.go"}, // 3 side call
	{msgs: linMsgs(linSys, linU1, linA0, linU2, linA2, linU3), answer: "Done."},                                               // 4 extends 2
	{msgs: linMsgs(linSys, linU1, linA0ed, linU2b), answer: "Reading lex.go."},                                                // 5 fork of 0 (answer edited)
}

// declaredCalls declare parents lineage cannot use: call 0 a later call (1), call 1 an id the
// rollout does not have, call 2 itself. Call 1 still extends call 0 by its messages.
var declaredCalls = []chatCall{
	{msgs: linMsgs(linSys, linU1), answer: "Let me read parse.go first.", parent: fmt.Sprintf("%032x", 2)},
	{msgs: linMsgs(linSys, linU1, linA0, linU2), answer: "parse returns nothing; it should return an error.", parent: "not-a-call-of-this-rollout"},
	{msgs: linMsgs(linSys, `{"role":"user","content":"Title please."}`), answer: "Title", parent: fmt.Sprintf("%032x", 3)},
}

func TestBrowserLineage(t *testing.T) {
	dir := t.TempDir()
	writeChatRollout(t, dir, "lin-1", lineageCalls)
	writeChatRollout(t, dir, "lin-2", declaredCalls)
	ts := startViewer(t, []string{dir}, "")

	// The API answers package lineage's JSON.
	res, err := http.Get(ts.URL + "/api/rollouts/lin-1/lineage")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("lineage: %d %s", res.StatusCode, body)
	}
	var l struct {
		RolloutID string   `json:"rollout_id"`
		MainChain []string `json:"main_chain"`
		Calls     []struct {
			CallIndex int     `json:"call_index"`
			Parent    *string `json:"parent_call_id"`
			Relation  string  `json:"relation"`
			MainChain bool    `json:"main_chain"`
			Messages  []struct {
				Author string `json:"author"`
			} `json:"messages"`
		} `json:"calls"`
		CallTokens []json.RawMessage `json:"call_tokens"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatalf("lineage JSON: %v\n%s", err, body)
	}
	id := func(i int) string { return fmt.Sprintf("%032x", i+1) }
	want := []struct {
		rel    string
		parent int // -1: none
		main   bool
	}{{"root", -1, true}, {"extends", 0, false}, {"retry", 1, true}, {"root", -1, false}, {"extends", 2, true}, {"fork", 0, false}}
	if len(l.Calls) != len(want) || len(l.CallTokens) != len(want) || l.RolloutID != "lin-1" {
		t.Fatalf("lineage: %d calls, %d call_tokens, rollout %q\n%s", len(l.Calls), len(l.CallTokens), l.RolloutID, body)
	}
	for i, w := range want {
		c := l.Calls[i]
		p := ""
		if c.Parent != nil {
			p = *c.Parent
		}
		wp := ""
		if w.parent >= 0 {
			wp = id(w.parent)
		}
		if c.Relation != w.rel || p != wp || c.MainChain != w.main {
			t.Errorf("call %d: %s of %q main %v, want %s of %q main %v", i, c.Relation, p, c.MainChain, w.rel, wp, w.main)
		}
	}
	if got := strings.Join(l.MainChain, ","); got != id(0)+","+id(2)+","+id(4) {
		t.Errorf("main chain %s", got)
	}

	ctx := newBrowser(t)
	do(t, ctx, "open rollout", chromedp.Navigate(ts.URL+"/#/rollout/lin-1?call=4"))
	waitJS(t, ctx, "lineage tree", `document.querySelectorAll("#lineage li[data-call]").length === 6`)
	// The main chain's tree comes first, with the main-chain child first under each call; the side
	// call stands apart.
	order := evalJS[string](t, ctx, `[...document.querySelectorAll("#lineage-main li")].map(li => li.dataset.call + ":" + li.dataset.relation + ":" + li.dataset.parent + ":" + li.dataset.main).join(" ")`)
	if want := "0:root::true 5:fork:0:false 1:extends:0:false 2:retry:1:true 4:extends:2:true"; order != want && order != "0:root::true 1:extends:0:false 2:retry:1:true 4:extends:2:true 5:fork:0:false" {
		t.Errorf("main tree %q", order)
	}
	if side := evalJS[string](t, ctx, `[...document.querySelectorAll("#lineage-side li")].map(li => li.dataset.call + ":" + li.dataset.relation).join(" ")`); side != "3:root" {
		t.Errorf("side calls %q", side)
	}
	if txt := evalJS[string](t, ctx, `document.querySelector('#lineage li[data-call="2"] .lin-row').innerText`); !strings.Contains(txt, "retry") || !strings.Contains(txt, "of #1") || !strings.Contains(txt, "main chain") {
		t.Errorf("call 2's row %q", txt)
	}
	if txt := evalJS[string](t, ctx, `document.getElementById("lineage-summary").innerText`); !strings.Contains(txt, "Main chain 3 calls") || !strings.Contains(txt, "1 forks") || !strings.Contains(txt, "1 retries") {
		t.Errorf("summary %q", txt)
	}
	// The calls table names each call's relation and parent.
	if txt := evalJS[string](t, ctx, `document.querySelector('#calls-table tr[data-call="5"]').innerText`); !strings.Contains(txt, "fork of #0") {
		t.Errorf("calls table row 5 %q", txt)
	}
	// Call 4's conversation: the model wrote both assistant turns (calls 0 and 2), the client the rest.
	authors := evalJS[string](t, ctx, `[...document.querySelectorAll("#conv-input article.msg")].map(a => a.dataset.role + ":" + (a.dataset.author || "")).join(" ")`)
	if authors != "system:client user:client assistant:model user:client assistant:model user:client" {
		t.Errorf("call 4 authors %q", authors)
	}
	if txt := evalJS[string](t, ctx, `[...document.querySelectorAll("#conv-input .b-model")].map(b => b.textContent).join("|")`); txt != "model-written (call 0)|model-written (call 2)" {
		t.Errorf("model badges %q", txt)
	}
	screenshot(t, ctx, screenshotDir(t), "lineage-rollout.png")

	// Call 5 edited the first answer: that turn is the client's, and the call page says fork of 0.
	do(t, ctx, "open call 5", chromedp.Navigate(ts.URL+"/#/rollout/lin-1/call/5"))
	waitJS(t, ctx, "call 5 lineage", `document.getElementById("call-lineage") !== null`)
	if txt := evalJS[string](t, ctx, `document.getElementById("call-lineage").innerText`); !strings.Contains(txt, "fork") || !strings.Contains(txt, "call 0") || !strings.Contains(txt, "off the main chain") {
		t.Errorf("call 5 lineage %q", txt)
	}
	if authors := evalJS[string](t, ctx, `[...document.querySelectorAll("#conv-input article.msg")].map(a => a.dataset.role + ":" + (a.dataset.author || "")).join(" ")`); authors != "system:client user:client assistant:client user:client" {
		t.Errorf("call 5 authors %q", authors)
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll("#tokens-none").length`); n != 1 {
		t.Errorf("call 5 has no token data, but the page does not say so")
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll("[data-declared-parent-ignored]").length`); n != 0 {
		t.Errorf("call 5 declared no parent, yet %d ignored-parent badges", n)
	}

	// Declared parents lineage did not use: the tree and the call page name each, with what it is.
	do(t, ctx, "open lin-2", chromedp.Navigate(ts.URL+"/#/rollout/lin-2"))
	waitJS(t, ctx, "lin-2 tree", `document.querySelectorAll("#lineage li[data-call]").length === 3`)
	ignored := evalJS[string](t, ctx, `[...document.querySelectorAll("#lineage li[data-call]")].map(li => { const b = li.querySelector(":scope > .lin-row [data-declared-parent-ignored]"); return li.dataset.call + ":" + li.dataset.relation + ":" + (b ? b.textContent : "-"); }).join(" ")`)
	if want := "0:root:declared parent ignored: #1 1:extends:declared parent ignored: unknown id 2:root:declared parent ignored: itself"; ignored != want {
		t.Errorf("ignored declared parents %q\nwant %q", ignored, want)
	}
	if tip := evalJS[string](t, ctx, `document.querySelector('#lineage li[data-call="1"] > .lin-row [data-declared-parent-ignored]').title`); !strings.Contains(tip, "not-a-call-of-this-rollout") || !strings.Contains(tip, "does not have") {
		t.Errorf("call 1's badge title %q", tip)
	}
	do(t, ctx, "open lin-2 call 0", chromedp.Navigate(ts.URL+"/#/rollout/lin-2/call/0"))
	waitJS(t, ctx, "call 0 lineage", `document.getElementById("call-lineage") !== null`)
	if txt := evalJS[string](t, ctx, `document.getElementById("call-lineage").innerText`); !strings.Contains(txt, "declared parent ignored: #1") {
		t.Errorf("call 0 lineage %q", txt)
	}
	if id := evalJS[string](t, ctx, `document.querySelector("#call-lineage [data-declared-parent-ignored]").dataset.declaredParentIgnored`); id != fmt.Sprintf("%032x", 2) {
		t.Errorf("call 0's ignored parent %q", id)
	}
}

// Token-carrying calls, in the shapes the engines answer: vLLM's Chat answer with
// return_token_ids and logprobs (ids on the choice, prompt ids on top, top logprobs), then
// llama-server's (ids on the logprob entries, prompt ids rendered by the gateway into
// token_capture) whose usage counts one token more than its entries (a token without visible text
// gets no entry), which is a finding.
var tokenCalls = []chatCall{
	{msgs: `[{"role":"user","content":"hi"}]`,
		response: `{"id":"chatcmpl-1","object":"chat.completion","created":1790000000,"model":"Qwen/Qwen3-0.6B","choices":[{"index":0,"message":{"role":"assistant","content":"Hi there","refusal":null,"tool_calls":[],"reasoning_content":null},"logprobs":{"content":[{"token":"Hi","logprob":-0.0123,"bytes":[72,105],"top_logprobs":[{"token":"Hi","logprob":-0.0123,"bytes":[72,105]},{"token":"Hello","logprob":-4.5,"bytes":[72,101,108,108,111]}]},{"token":" there","logprob":-0.5,"bytes":[32,116,104,101,114,101],"top_logprobs":[{"token":" there","logprob":-0.5,"bytes":[32,116,104,101,114,101]},{"token":"!","logprob":-1.2,"bytes":[33]}]},{"token":"","logprob":-3.2,"bytes":[],"top_logprobs":[{"token":"","logprob":-3.2,"bytes":[]}]}]},"finish_reason":"stop","stop_reason":null,"token_ids":[13048,1052,151645]}],"usage":{"prompt_tokens":9,"total_tokens":12,"completion_tokens":3},"prompt_logprobs":null,"prompt_token_ids":[151644,872,198,6023,151645,198,151644,77091,198]}`},
	{msgs: `[{"role":"user","content":"hi"},{"role":"assistant","content":"Hi there"},{"role":"user","content":"bye"}]`,
		response: `{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"Bye"},"logprobs":{"content":[{"id":33,"token":"Bye","bytes":[66,121,101],"logprob":-0.02,"top_logprobs":[{"id":33,"token":"Bye","bytes":[66,121,101],"logprob":-0.02}]}]}}],"created":1790000000,"model":"my-model","object":"chat.completion","usage":{"completion_tokens":2,"prompt_tokens":9,"total_tokens":11},"id":"chatcmpl-Xq"}`,
		tokenCap: `{"engine":"llama-server","added":{"logprobs":true,"top_logprobs":1},"prompt_token_ids":[151644,872,198,6023,151645,198,151644,77091,198]}`},
	{msgs: `[{"role":"user","content":"no ids here"}]`, answer: "none"},
}

func TestBrowserTokens(t *testing.T) {
	dir := t.TempDir()
	writeChatRollout(t, dir, "tok-1", tokenCalls)
	ts := startViewer(t, []string{dir}, "")
	ctx := newBrowser(t)

	// The rollout page says which calls carry token data.
	do(t, ctx, "open rollout", chromedp.Navigate(ts.URL+"/#/rollout/tok-1"))
	waitJS(t, ctx, "calls table", `document.querySelectorAll("#calls-table tbody tr").length === 3`)
	waitJS(t, ctx, "lineage", `document.getElementById("lineage") !== null`)
	badges := evalJS[string](t, ctx, `[...document.querySelectorAll("#calls-table tbody tr")].map(tr => { const b = tr.querySelector(".b-tok"); return b ? b.dataset.tokenSource + "=" + b.textContent : "-"; }).join(" ")`)
	if badges != "engine_ids=3 ids logprob_entry_ids=1 ids · 1 finding -" {
		t.Errorf("token badges %q", badges)
	}

	// vLLM: three tokens coloured by logprob, the id and top logprobs on hover.
	do(t, ctx, "open call 0", chromedp.Navigate(ts.URL+"/#/rollout/tok-1/call/0"))
	waitJS(t, ctx, "tokens", `document.querySelectorAll("#tokens-0 .tok").length === 3`)
	if src := evalJS[string](t, ctx, `document.getElementById("card-token-source").innerText + "/" + document.getElementById("card-prompt-token-source").innerText + "/" + document.getElementById("card-prompt-ids").innerText`); src != "engine_ids/engine_ids/9" {
		t.Errorf("sources %q", src)
	}
	toks := evalJS[string](t, ctx, `[...document.querySelectorAll("#tokens-0 .tok")].map(s => s.textContent + "|" + s.dataset.id + "|" + s.className).join(" ")`)
	if toks != "Hi|13048|tok lp-0  there|1052|tok lp-1 ⟨151645⟩|151645|tok lp-4" {
		t.Errorf("tokens %q", toks)
	}
	tip := evalJS[string](t, ctx, `document.querySelector('#tokens-0 .tok[data-i="1"]').title`)
	for _, w := range []string{"id 1052", "logprob -0.5000", `"!": -1.2000`, `" there": -0.5000`} {
		if !strings.Contains(tip, w) {
			t.Errorf("hover of token 1 %q lacks %q", tip, w)
		}
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll("#token-findings-none").length`); n != 1 {
		t.Error("vLLM call: want no findings")
	}
	screenshot(t, ctx, screenshotDir(t), "tokens-vllm.png")

	// llama-server: ids from the logprob entries, prompt ids rendered by the gateway, a finding.
	do(t, ctx, "open call 1", chromedp.Navigate(ts.URL+"/#/rollout/tok-1/call/1"))
	waitJS(t, ctx, "tokens", `document.querySelectorAll("#tokens-0 .tok").length === 1`)
	if src := evalJS[string](t, ctx, `document.getElementById("card-token-source").innerText + "/" + document.getElementById("card-prompt-token-source").innerText`); src != "logprob_entry_ids/server_render" {
		t.Errorf("sources %q", src)
	}
	if codes := evalJS[string](t, ctx, `[...document.querySelectorAll("#token-findings li")].map(li => li.dataset.code).join(" ")`); !strings.Contains(codes, "completion_count_mismatch") {
		t.Errorf("findings %q", codes)
	}
}
