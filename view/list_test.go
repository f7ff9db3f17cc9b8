package view_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// indexedDemoViewer serves the demo's capture dir and rollouts file (newFixture) and returns the
// viewer's base URL once the index is complete.
func indexedDemoViewer(t *testing.T) string {
	t.Helper()
	f := newFixture(t)
	ts := startViewer(t, []string{f.captureDir}, f.rolloutsFile)
	waitIndexed(t, ts.URL)
	return ts.URL
}

// TestAPIListUnknownTokens: a rollout's token sum is null when none of its calls knows the count
// (0 is a count), sorts last in both orders, and matches `=null`. The demo's Messages rollouts
// report no reasoning count, its 429 rollout no usage at all, and demo-never-ran has no capture.
func TestAPIListUnknownTokens(t *testing.T) {
	base := indexedDemoViewer(t)
	for _, tc := range []struct {
		query   string
		wantIDs []string // rows in order
		field   string   // a field to check on every row
		want    map[string]any
	}{
		{
			query: "sort=tokens_reasoning&order=desc",
			wantIDs: []string{"demo-responses-sse", "demo-responses-json", "demo-chat-sse", "demo-chat-json",
				"demo-messages-json", "demo-messages-rate-limited", "demo-messages-sse", "demo-never-ran"},
			field: "tokens_reasoning",
			want: map[string]any{"demo-responses-sse": 576.0, "demo-responses-json": 146.0, "demo-chat-sse": 64.0,
				"demo-chat-json": 48.0, "demo-messages-json": nil, "demo-messages-rate-limited": nil,
				"demo-messages-sse": nil, "demo-never-ran": nil},
		},
		{
			query: "sort=tokens_reasoning&order=asc",
			wantIDs: []string{"demo-chat-json", "demo-chat-sse", "demo-responses-json", "demo-responses-sse",
				"demo-messages-json", "demo-messages-rate-limited", "demo-messages-sse", "demo-never-ran"},
		},
		{
			query:   "filter=tokens_reasoning=null",
			wantIDs: []string{"demo-messages-json", "demo-messages-rate-limited", "demo-messages-sse", "demo-never-ran"},
		},
		{
			query:   "filter=tokens_in=null&sort=id",
			wantIDs: []string{"demo-messages-rate-limited", "demo-never-ran"},
			field:   "tokens_out",
			want:    map[string]any{"demo-messages-rate-limited": nil, "demo-never-ran": nil},
		},
		{
			// demo-chat-sse: the first call has no cache field, the second reports 0 cached tokens.
			query:   "filter=tokens_cached=0+dialect=chat",
			wantIDs: []string{"demo-chat-sse"},
			field:   "tokens_cached",
			want:    map[string]any{"demo-chat-sse": 0.0},
		},
	} {
		var res struct {
			Rows []map[string]any `json:"rows"`
		}
		getJSON(t, base+"/api/rollouts?"+tc.query, 200, &res)
		var ids []string
		for _, r := range res.Rows {
			id := r["id"].(string)
			ids = append(ids, id)
			if tc.field == "" {
				continue
			}
			v, ok := r[tc.field]
			if !ok {
				t.Errorf("%s: row %s has no %s", tc.query, id, tc.field)
			}
			if want := tc.want[id]; !reflect.DeepEqual(v, want) {
				t.Errorf("%s: row %s %s = %v, want %v", tc.query, id, tc.field, v, want)
			}
		}
		if !reflect.DeepEqual(ids, tc.wantIDs) {
			t.Errorf("%s: rows %v, want %v", tc.query, ids, tc.wantIDs)
		}
	}

	// The overview's sums follow the same rule: the demo knows every kind of count somewhere.
	var o struct {
		Tokens map[string]any     `json:"tokens"`
		Cache  map[string]float64 `json:"cache"`
	}
	getJSON(t, base+"/api/overview", 200, &o)
	for _, k := range []string{"in", "out", "cached", "reasoning", "cache_creation"} {
		if _, ok := o.Tokens[k].(float64); !ok {
			t.Errorf("overview tokens.%s = %v, want a number", k, o.Tokens[k])
		}
	}
	// The cache signal: hits among the calls whose cache_hit is known (the demo's 11 calls with a
	// cache signal, 2 of them hits), and their ratio.
	if c := o.Cache; len(c) != 3 || c["calls_known"] != 11 || c["hits"] != 2 || c["hit_rate"] != 2.0/11 {
		t.Errorf("overview cache = %v, want calls_known 11, hits 2, hit_rate 2/11", c)
	}
}

// TestAPIListBadParameters: a sort field or order the list does not know is a 400 that names the
// parameter and the allowed values, as a malformed filter is.
func TestAPIListBadParameters(t *testing.T) {
	base := indexedDemoViewer(t)
	for _, tc := range []struct {
		query    string
		status   int
		errorHas []string
	}{
		{"sort=bogus", 400, []string{`sort "bogus"`, "tokens_reasoning", "record."}},
		{"order=sideways", 400, []string{`order "sideways"`, "asc", "desc"}},
		{"sort=calls&order=DESC", 400, []string{`order "DESC"`}},
		{"filter=errors>x", 400, []string{"needs a number"}},
		{"filter=rewrd<1", 400, []string{`unknown field "rewrd"`, "did you mean reward?", "list fields: id,", "record fields: _ng_rollout_id"}},
		{"filter=calls>0%20record.nope>1", 400, []string{`filter "record.nope>1": unknown field "record.nope"`}},
		{"filter=record.reward>0%20_ng_task_index>=0%20Tokyo", 200, nil}, // record fields, bare and prefixed; a bare word
		{"limit=-1", 400, []string{"limit"}},
		{"offset=x", 400, []string{"offset"}},
		{"sort=reward&order=desc", 200, nil},       // a --rollouts record field
		{"sort=record.reward&order=asc", 200, nil}, // the same, written record.FIELD
		{"sort=tokens_reasoning", 200, nil},
		{"order=desc", 200, nil},
		{"sort=&order=", 200, nil}, // empty means the default
	} {
		status, body := capturetest.Get(t, base+"/api/rollouts?"+tc.query)
		if status != tc.status {
			t.Errorf("%s: status %d, want %d: %.300s", tc.query, status, tc.status, body)
			continue
		}
		if tc.status == 200 {
			continue
		}
		var e struct{ Error string }
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			t.Errorf("%s: %v: %s", tc.query, err, body)
		}
		// The API's JSON is not HTML-escaped: the filter's ">" reads as ">" in the body itself.
		if strings.Contains(body, `\u00`) || (strings.Contains(tc.query, ">") && !strings.Contains(body, ">")) {
			t.Errorf("%s: HTML-escaped body %s", tc.query, body)
		}
		for _, s := range tc.errorHas {
			if !strings.Contains(e.Error, s) {
				t.Errorf("%s: error %q does not contain %q", tc.query, e.Error, s)
			}
		}
	}
}
