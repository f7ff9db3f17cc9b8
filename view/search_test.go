package view_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/view"
)

// TestAPISearch: a search finds message text, tool names and errors across every rollout, a
// message resent on a later call once (at the first call that carried it), and says when it
// stopped at its limit.
func TestAPISearch(t *testing.T) {
	base := indexedDemoViewer(t)
	search := func(q string, limit string) view.SearchResult {
		t.Helper()
		var r view.SearchResult
		getJSON(t, base+"/api/search?q="+url.QueryEscape(q)+"&limit="+limit, 200, &r)
		return r
	}
	// The question of demo-responses-sse is sent on both its calls: found once, on call 0.
	r := search("what is the weather in tokyo", "100")
	var hits []view.SearchHit
	for _, h := range r.Hits {
		if h.RolloutID == "demo-responses-sse" {
			hits = append(hits, h)
		}
	}
	if len(hits) != 1 || hits[0].CallIndex != 0 || hits[0].Where != "request" || hits[0].Role != "user" ||
		!strings.Contains(hits[0].Snippet, "What is the weather in Tokyo?") {
		t.Errorf("hits in demo-responses-sse: %+v", hits)
	}
	if r.Rollouts == 0 || r.Calls == 0 || r.Truncated {
		t.Errorf("searched %d rollouts, %d calls, truncated %v", r.Rollouts, r.Calls, r.Truncated)
	}
	wheres := func(r view.SearchResult) map[string]bool {
		m := map[string]bool{}
		for _, h := range r.Hits {
			m[h.Where+":"+h.Kind] = true
		}
		return m
	}
	if w := wheres(search("get_weather", "100")); !w["tools:tool"] || !w["response:tool_call"] || !w["request:tool_result"] {
		t.Errorf("get_weather found as %v; want the tools offered, the call and its (named) result", w)
	}
	if w := wheres(search("rate_limit", "100")); !w["error:error"] {
		t.Errorf("rate_limit found as %v", w)
	}
	if r := search("get_weather", "2"); len(r.Hits) != 2 || !r.Truncated {
		t.Errorf("limit 2: %d hits, truncated %v", len(r.Hits), r.Truncated)
	}
	if r := search("no such text anywhere", "100"); len(r.Hits) != 0 || r.Hits == nil {
		t.Errorf("no match: %+v", r.Hits)
	}
	getJSON(t, base+"/api/search?q=%20", 400, nil)
	getJSON(t, base+"/api/search?q=x&limit=-3", 400, nil)
}

// TestAPITranscript: every message of a rollout once, in call order, with the call that first
// carried it: the new messages of each request, then its response.
func TestAPITranscript(t *testing.T) {
	base := indexedDemoViewer(t)
	var tr struct {
		Calls   int                    `json:"calls"`
		Entries []view.TranscriptEntry `json:"entries"`
		Error   string                 `json:"error"`
	}
	getJSON(t, base+"/api/rollouts/demo-chat-json/transcript", 200, &tr)
	var got []string
	for _, e := range tr.Entries {
		got = append(got, e.Source+":"+itoa(uint64(e.CallIndex))+":"+e.Message.Role)
	}
	// Call 0 sends the question and gets a tool call; call 1 adds the tool result and gets the
	// answer. The torn last line is not a call.
	want := "request:0:user response:0:assistant request:1:tool response:1:assistant"
	if strings.Join(got, " ") != want || tr.Calls != 2 || tr.Error != "" {
		t.Errorf("transcript %q (calls %d, error %q); want %q", strings.Join(got, " "), tr.Calls, tr.Error, want)
	}
	for _, e := range tr.Entries {
		for _, p := range e.Message.Parts {
			if p.Kind == "tool_result" && p.Name != "get_weather" {
				t.Errorf("tool result names %q; want get_weather", p.Name)
			}
		}
	}
	getJSON(t, base+"/api/rollouts/nope/transcript", 404, nil)
}

// TestAPIDiff: the viewer's comparison is rundiff's; bad parameters are 400s, an unknown rollout 404.
func TestAPIDiff(t *testing.T) {
	base := indexedDemoViewer(t)
	var d view.DiffResult
	getJSON(t, base+"/api/diff?a=demo-chat-json&b=demo-chat-sse", 200, &d)
	if d.Same || d.First == nil || d.First.What != "model" || len(d.Pairs) != 2 || len(d.Dirs) != 1 {
		t.Errorf("diff: %+v", d.Result)
	}
	for q, status := range map[string]int{
		"a=demo-chat-json&b=demo-chat-json": 400, "a=demo-chat-json&b=../x": 400, "a=demo-chat-json&b=demo-chat-sse&b_dir=5": 400,
		"a=demo-chat-json&b=demo-chat-sse&a_dir=x": 400, "a=demo-chat-json&b=nope": 404, "a=demo-chat-json&b=demo-chat-sse&a_dir=0&b_dir=0": 200,
	} {
		getJSON(t, base+"/api/diff?"+q, status, nil)
	}
}
