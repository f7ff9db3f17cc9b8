package view_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/rollout"
	"github.com/modelcalls/modelcalls/view"
)

// A clean run is one the overview has nothing to warn about: no error, maybe no usage, no rollouts
// file, or nothing captured yet. Each kind of run is a capture dir (and an optional rollouts file).
type cleanRun struct {
	name     string
	rollouts bool   // write a rollouts file naming the rollout
	calls    int    // captured calls of rollout "clean-0"
	usage    bool   // the responses report usage
	pending  int    // live claims of rollout "clean-0" (held by this test process)
	want     string // the overview's rollouts card
}

var cleanRuns = []cleanRun{
	{name: "no errors", calls: 2, usage: true, rollouts: true, want: "1"},
	{name: "no usage", calls: 2, want: "1"},
	{name: "no rollouts file", calls: 1, usage: true, want: "1"},
	{name: "only pending calls", pending: 2, want: "1"},
}

// writeCleanRun writes run's capture dir: calls answered 200 with a Chat Completions answer, and
// claims left live; it returns the dir and the rollouts file ("" without one).
func writeCleanRun(t *testing.T, run cleanRun) (dir, rolloutsFile string) {
	t.Helper()
	dir = t.TempDir()
	st, err := capture.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	t0 := float64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix())
	for c := range run.calls {
		usage := ""
		if run.usage {
			usage = `,"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}`
		}
		status := 200
		ex := &capture.Exchange{ModelCallID: fmt.Sprintf("%032x", c+1), Dialect: "chat",
			ModelRef:  &rollout.ModelServerRef{Type: rollout.ModelServerRefType, Name: "clean"},
			StartedAt: t0 + float64(c), CompletedAt: t0 + float64(c) + 0.5, LatencyMS: 500, StatusCode: &status,
			Request:  json.RawMessage(`{"model":"m","messages":[{"role":"user","content":"step ` + strconv.Itoa(c) + `"}]}`),
			Response: json.RawMessage(`{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok ` + strconv.Itoa(c) + `"},"finish_reason":"stop"}]` + usage + `}`),
		}
		if err := st.AppendExchange("clean-0", ex); err != nil {
			t.Fatal(err)
		}
	}
	for c := range run.pending {
		cl, err := st.Claim("clean-0", fmt.Sprintf("%032x", 100+c))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Release() })
	}
	if run.rollouts {
		rolloutsFile = dir + "/rollouts.jsonl"
		capturetest.WriteFile(t, rolloutsFile, []byte(`{"_ng_rollout_id":"clean-0","reward":1.0}`+"\n"), 0o644)
	}
	return dir, rolloutsFile
}

// checkLists fails for every JSON null (or missing member) where the Go type of the answer has a
// list: the pages iterate lists, and a null stops them. Byte slices (raw JSON) are not lists.
func checkLists(t *testing.T, where string, typ reflect.Type, v any) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		if v == nil {
			return
		}
		typ = typ.Elem()
	}
	switch typ.Kind() {
	case reflect.Slice:
		if typ.Elem().Kind() == reflect.Uint8 {
			return
		}
		list, ok := v.([]any)
		if !ok {
			t.Errorf("%s: %v; want a list", where, v)
			return
		}
		for i, e := range list {
			checkLists(t, fmt.Sprintf("%s[%d]", where, i), typ.Elem(), e)
		}
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s: %v; want an object", where, v)
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Anonymous && f.Tag.Get("json") == "" {
				checkLists(t, where, f.Type, v)
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || strings.Contains(opts, "omitempty") {
				continue
			}
			if name == "" {
				name = f.Name
			}
			checkLists(t, where+"."+name, f.Type, obj[name])
		}
	}
}

// Every answer of the API has its lists as lists, never null, for each kind of clean run, and the
// pages render from them.
func TestAPICleanRunsHaveNoNullLists(t *testing.T) {
	for _, run := range cleanRuns {
		t.Run(run.name, func(t *testing.T) {
			dir, rf := writeCleanRun(t, run)
			_, ts, stop := serveViewer(t, view.Options{Dirs: []string{dir}, RolloutsFile: rf, ScanInterval: 30 * time.Millisecond})
			defer stop()
			// Before the first pass, too: the overview answers at once.
			get := func(path string, typ reflect.Type) {
				t.Helper()
				var v any
				getJSON(t, ts.URL+path, 200, &v)
				checkLists(t, path, typ, v)
			}
			get("/api/overview", reflect.TypeFor[view.Overview]())
			waitIndexed(t, ts.URL)
			get("/api/overview", reflect.TypeFor[view.Overview]())
			get("/api/rollouts", reflect.TypeFor[view.ListResult]())
			get("/api/rollouts?filter=nothing-matches", reflect.TypeFor[view.ListResult]())
			get("/api/rollouts/clean-0", reflect.TypeFor[view.RolloutDetail]())
			get("/api/rollouts/clean-0/lineage", reflect.TypeFor[view.LineageDetail]())
			if run.calls > 0 {
				get("/api/rollouts/clean-0/calls/0", reflect.TypeFor[view.CallDetail]())
			}
			// A page brings its rollout up to date the way a pass does: once it has, neither
			// moves the version again while nothing changes (an open page would refetch forever).
			var o view.Overview
			getJSON(t, ts.URL+"/api/overview", 200, &o)
			get("/api/rollouts/clean-0", reflect.TypeFor[view.RolloutDetail]())
			var ch struct{ Version uint64 }
			getJSON(t, ts.URL+"/api/changes?timeout=1&since="+itoa(o.Version), 200, &ch)
			if ch.Version != o.Version {
				t.Errorf("the version moved from %d to %d with nothing changed", o.Version, ch.Version)
			}
		})
	}
}

// The overview, the rollout list, the rollout page and a call page render in a browser for each
// kind of clean run.
func TestBrowserCleanRuns(t *testing.T) {
	chromiumPath(t)
	ctx := newBrowser(t)
	for _, run := range cleanRuns {
		t.Run(run.name, func(t *testing.T) {
			dir, rf := writeCleanRun(t, run)
			var ts *httptest.Server
			ts = startViewer(t, []string{dir}, rf)
			do(t, ctx, "open overview", chromedp.Navigate(ts.URL+"/#/"))
			waitJS(t, ctx, "overview", `document.getElementById("card-rollouts")?.textContent === `+js(run.want)+
				` && document.getElementById("card-calls").textContent === `+js(strconv.Itoa(run.calls))+
				` && document.getElementById("errors-none") !== null && document.getElementById("dialects-table") !== null`)
			if run.pending > 0 {
				waitJS(t, ctx, "pending gap", `document.querySelector('li[data-gap="pending"] a')?.textContent === "clean-0"`)
			} else {
				waitJS(t, ctx, "no gaps", `document.getElementById("gaps-none") !== null`)
			}
			if !run.usage {
				waitJS(t, ctx, "unknown tokens", `document.getElementById("card-tokens-in").textContent === "—"`)
			}
			do(t, ctx, "open list", chromedp.Navigate(ts.URL+"/#/rollouts"))
			waitJS(t, ctx, "list", `document.querySelector('#rollouts-table tbody tr[data-rollout="clean-0"]') !== null`)
			do(t, ctx, "open rollout", chromedp.Navigate(ts.URL+"/#/rollout/clean-0"))
			waitJS(t, ctx, "rollout", `document.getElementById("rollout-id")?.textContent === "clean-0" && document.querySelectorAll("#calls-table tbody tr").length === `+strconv.Itoa(run.calls))
			if run.pending > 0 {
				waitJS(t, ctx, "pending note", `document.getElementById("pending-note")?.textContent.startsWith("2 calls pending")`)
			}
			if run.calls > 0 {
				waitJS(t, ctx, "conversation", `document.getElementById("conv-output")?.textContent.includes("ok `+strconv.Itoa(run.calls-1)+`")`)
				do(t, ctx, "open call", chromedp.Navigate(ts.URL+"/#/rollout/clean-0/call/0"))
				waitJS(t, ctx, "call", `document.getElementById("call-index")?.textContent === "0" && document.getElementById("conv-output")?.textContent.includes("ok 0")`)
			}
		})
	}
}
