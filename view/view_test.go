package view_test

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/view"
)

func getJSON(t *testing.T, url string, wantStatus int, v any) {
	t.Helper()
	status, body := capturetest.Get(t, url)
	if status != wantStatus {
		t.Fatalf("GET %s: status %d, want %d: %s", url, status, wantStatus, body)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("GET %s: %v: %s", url, err, body)
		}
	}
}

// waitIndexed waits until the viewer's first pass is done, waking on its change token.
func waitIndexed(t *testing.T, base string) view.Overview {
	t.Helper()
	var o view.Overview
	deadline := time.Now().Add(30 * time.Second)
	for {
		getJSON(t, base+"/api/overview", 200, &o)
		if o.Progress.Complete {
			return o
		}
		if time.Now().After(deadline) {
			t.Fatal("index never completed")
		}
		var ch struct{ Version uint64 }
		getJSON(t, base+"/api/changes?timeout=5&since="+itoa(o.Version), 200, &ch)
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

func jsonNum(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// treeSnapshot records every path under dir with its size, mode and mtime.
func treeSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		snap[p] = info.Mode().String() + " " + jsonNum(uint64(info.Size())) + " " + info.ModTime().String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestAPIOnGatewayCaptures(t *testing.T) {
	f := newFixture(t)
	before := treeSnapshot(t, f.captureDir)
	ts := startViewer(t, []string{f.captureDir}, f.rolloutsFile)
	o := waitIndexed(t, ts.URL)

	if o.Calls != f.calls || o.Rollouts != f.rollouts || o.RolloutsNoCapture != 1 {
		t.Errorf("overview calls %d rollouts %d no-capture %d, want %d %d 1", o.Calls, o.Rollouts, o.RolloutsNoCapture, f.calls, f.rollouts)
	}
	if o.DamagedLines != 1 || !reflect.DeepEqual(o.Gaps.Unreadable, []string{tornRollout}) {
		t.Errorf("damaged %d unreadable %v, want 1 [%s]", o.DamagedLines, o.Gaps.Unreadable, tornRollout)
	}
	if len(o.Errors) != 1 || o.Errors[0].Name != "rate_limit" || o.Errors[0].Count != 1 {
		t.Errorf("errors %+v, want one rate_limit", o.Errors)
	}
	if o.Latency.Count != f.calls || sum(o.Latency.Counts) != f.calls {
		t.Errorf("latency histogram count %d sum %d, want %d", o.Latency.Count, sum(o.Latency.Counts), f.calls)
	}
	if len(o.Dialects) != 3 {
		t.Errorf("dialects %+v, want 3", o.Dialects)
	}

	var list view.ListResult
	getJSON(t, ts.URL+"/api/rollouts?sort=reward&order=desc&filter=dialect=messages+calls>0&limit=2", 200, &list)
	if list.Matched != 3 || len(list.Rows) != 2 || list.Total != f.rollouts {
		t.Errorf("list matched %d rows %d total %d, want 3 2 %d", list.Matched, len(list.Rows), list.Total, f.rollouts)
	}
	getJSON(t, ts.URL+"/api/rollouts?filter=errors>x", 400, nil)
	getJSON(t, ts.URL+"/api/rollouts?limit=-1", 400, nil)

	var d view.RolloutDetail
	getJSON(t, ts.URL+"/api/rollouts/"+tornRollout, 200, &d)
	if len(d.Calls) != 2 || len(d.Damaged) != 1 || d.Damaged[0].Line != 3 {
		t.Errorf("torn rollout: %d calls, damaged %+v; want 2 calls and line 3 damaged", len(d.Calls), d.Damaged)
	}
	getJSON(t, ts.URL+"/api/rollouts/no-such-rollout", 404, nil)
	getJSON(t, ts.URL+"/api/rollouts/bad%20id", 400, nil)

	var c view.CallDetail
	getJSON(t, ts.URL+"/api/rollouts/demo-messages-sse/calls/1", 200, &c)
	var newKinds []string
	for _, m := range c.Conversation.Input {
		if m.New {
			for _, p := range m.Parts {
				newKinds = append(newKinds, p.Kind)
			}
		}
	}
	if !reflect.DeepEqual(newKinds, []string{"tool_result"}) {
		t.Errorf("new parts on the second Messages call: %v, want [tool_result]", newKinds)
	}
	if _, ok := c.Raw["response_raw"]; !ok || c.Prev == nil || *c.Prev != 0 || c.Next != nil {
		t.Errorf("raw %v prev %v next %v", c.Raw, c.Prev, c.Next)
	}
	getJSON(t, ts.URL+"/api/rollouts/demo-messages-sse/calls/9", 404, nil)

	resp, err := http.Get(ts.URL + "/api/rollouts/demo-messages-sse/calls/1/raw?part=response_raw")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" || !strings.Contains(string(raw), "event: message_stop") {
		t.Errorf("raw: content type %q, body %.200q", ct, raw)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	getJSON(t, ts.URL+"/api/rollouts/demo-messages-sse/calls/1/raw?part=request_raw", 404, nil)
	// A wrong API path, /api/ itself included, lists the endpoints there are.
	for _, p := range []string{"/api/nope", "/api/"} {
		var e struct{ Error string }
		getJSON(t, ts.URL+p, 404, &e)
		if want := "no such API endpoint: " + p + "; the endpoints (GET): /api/overview, /api/rollouts, /api/rollouts/{id},"; !strings.HasPrefix(e.Error, want) ||
			!strings.HasSuffix(e.Error, "/api/diff, /api/changes") {
			t.Errorf("GET %s: error %q, want it to start %q and list every endpoint", p, e.Error, want)
		}
	}

	// The change token answers at once for an old token and holds for the current one.
	var ch struct{ Version uint64 }
	getJSON(t, ts.URL+"/api/changes?since=0", 200, &ch)
	if ch.Version == 0 {
		t.Error("changes: version 0 after indexing")
	}

	for _, p := range []string{"/", "/static/app.js", "/static/app.css"} {
		resp, err := http.Get(ts.URL + p)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", p, resp.StatusCode, err)
		}
		resp.Body.Close()
	}

	if after := treeSnapshot(t, f.captureDir); !reflect.DeepEqual(before, after) {
		t.Errorf("the viewer changed the capture dir:\nbefore %v\nafter  %v", before, after)
	}
}

func sum(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}

func TestParseFilter(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr bool
	}{
		{"", false},
		{"errors>0 model~gpt", false},
		{"reward>=0.5 record.stream=true", false},
		{"model=null", false},
		{"calls>many", true},
		{"tokens_in<=", true},
		{"just-a-word", false},
	} {
		_, err := view.ParseFilter(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseFilter(%q) error %v, want error %v", tc.in, err, tc.wantErr)
		}
	}
}

func TestMissingDir(t *testing.T) {
	if _, err := view.New(view.Options{Dirs: []string{filepath.Join(t.TempDir(), "missing")}}); err == nil {
		t.Fatal("New accepted a missing capture dir")
	}
	if _, err := view.New(view.Options{}); err == nil {
		t.Fatal("New accepted no capture dir")
	}
}

// TestRolloutsFileChanges: records appear when the --rollouts file changes, without a restart.
func TestRolloutsFileChanges(t *testing.T) {
	dir := t.TempDir()
	recs := filepath.Join(t.TempDir(), "rollouts.jsonl")
	os.WriteFile(recs, []byte(`{"_ng_rollout_id":"a","reward":0.25}`+"\n"), 0o644)
	ts := startViewer(t, []string{dir}, recs)
	waitIndexed(t, ts.URL)
	var list view.ListResult
	getJSON(t, ts.URL+"/api/rollouts?filter=reward<0.5", 200, &list)
	if list.Matched != 1 || list.Rows[0].ID != "a" || list.Rows[0].HasCapture {
		t.Fatalf("list %+v", list)
	}
	os.WriteFile(recs, []byte(`{"_ng_rollout_id":"a","reward":0.25}`+"\n"+`{"_ng_rollout_id":"b","reward":0.75}`+"\n"), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		getJSON(t, ts.URL+"/api/rollouts?filter=reward>0.5", 200, &list)
		if list.Matched == 1 && list.Rows[0].ID == "b" {
			return
		}
		var ch struct{ Version uint64 }
		getJSON(t, ts.URL+"/api/changes?timeout=5&since="+jsonNum(list.Version), 200, &ch)
	}
	t.Fatal("the second record never appeared")
}

// TestListenURL: the URL printed for a listener is one a browser opens: an unspecified address
// (0.0.0.0, ::) becomes 127.0.0.1 and is reported as all interfaces.
func TestListenURL(t *testing.T) {
	for _, tc := range []struct {
		listen string
		host   string
		all    bool
	}{
		{"0.0.0.0:0", "127.0.0.1", true},
		{"[::]:0", "127.0.0.1", true},
		{":0", "127.0.0.1", true},
		{"127.0.0.1:0", "127.0.0.1", false},
		{"[::1]:0", "[::1]", false},
	} {
		ln, err := net.Listen("tcp", tc.listen)
		if err != nil {
			t.Logf("%s: %v (skipped)", tc.listen, err)
			continue
		}
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		u, all := view.ListenURL(ln.Addr())
		if want := "http://" + tc.host + ":" + port + "/"; u != want || all != tc.all {
			t.Errorf("listen %s (addr %s): %q, all %v; want %q, all %v", tc.listen, ln.Addr(), u, all, want, tc.all)
		}
		if tc.all { // the printed URL reaches the listener
			c, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/"))
			if err != nil {
				t.Errorf("%s: %v", u, err)
			} else {
				c.Close()
			}
		}
		ln.Close()
	}
}
