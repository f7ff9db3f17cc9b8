package view_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/rollout"
	"github.com/modelcalls/modelcalls/view"
)

// largeLine is one capture line of about size bytes: a Chat Completions call whose user message
// fills it (distinct per call), and a short answer.
func largeLine(tb testing.TB, i, size int) []byte {
	tb.Helper()
	status := 200
	start := float64(1767225600 + i)
	text := fmt.Sprintf("call %d: ", i) + strings.Repeat("lorem ipsum ", size/12)
	req, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{
		map[string]any{"role": "system", "content": "You are terse."},
		map[string]any{"role": "user", "content": text[:size-300]},
	}})
	ex := &capture.Exchange{ModelCallID: fmt.Sprintf("%032x", i+1), Dialect: "chat",
		ModelRef:  &rollout.ModelServerRef{Type: rollout.ModelServerRefType, Name: "large"},
		StartedAt: start, CompletedAt: start + 0.5, LatencyMS: 500, StatusCode: &status,
		Request:  req,
		Response: json.RawMessage(`{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done ` + strconv.Itoa(i) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`),
	}
	line, err := capture.EncodeExchange(ex)
	if err != nil {
		tb.Fatal(err)
	}
	return line
}

// writeLargeRollout writes rollout id of n lines of about size bytes each into dir: largeLine's
// line for call 0 with the call's number written over its digits (the same width), so that a large
// file is written at the speed of copying it.
func writeLargeRollout(tb testing.TB, dir, id string, n, size int) {
	tb.Helper()
	tmpl := largeLine(tb, 0, size)
	at := []int{bytes.Index(tmpl, []byte(fmt.Sprintf(`"model_call_id":"%032x"`, 1))) + len(`"model_call_id":"`),
		bytes.Index(tmpl, []byte("call 0: ")), bytes.Index(tmpl, []byte(`"content":"done 0"`)) + len(`"content":"done `)}
	if at[0] < len(`"model_call_id":"`) || at[1] < 0 || at[2] < len(`"content":"done `) {
		tb.Fatalf("template fields not found: %v", at)
	}
	f, err := os.Create(filepath.Join(dir, id+capture.CaptureSuffix))
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 4<<20)
	line := bytes.Clone(tmpl)
	for i := range n {
		// Widths: 32 hex digits; "call 0: " and "done 0" take one digit, so the number is written
		// in base 36 over its first bytes (0-9a-z: 36 distinct calls per digit, enough when
		// combined with the id for the test's distinct messages).
		copy(line[at[0]:], fmt.Sprintf("%032x", i+1))
		d := strconv.FormatInt(int64(i%36), 36)
		line[at[1]+5], line[at[2]] = d[0], d[0]
		copy(line[at[1]+8:], fmt.Sprintf("%08d", i)) // the message's first words: distinct per call
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// heapPeak samples runtime.MemStats.HeapInuse every 2 ms while fn runs and returns the largest
// sample minus the one taken (after a GC) before fn: the heap fn added at its peak.
func heapPeak(fn func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapInuse, ms.HeapInuse
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	fn()
	close(stop)
	<-done
	runtime.ReadMemStats(&ms)
	return max(peak, ms.HeapInuse) - base
}

// fetch GETs url and returns the body's length; the body must be 200.
func fetch(url string) (int64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return n, fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	return n, err
}

// On a 300 MB rollout of 1 MiB lines a call's page reads its own line: one page adds less than
// 64 MiB to the heap at its peak and nine at once less than 256 MiB (the whole-file read took about
// four times the file per request). The rollout's page and the stored payload stay bounded too.
// With -short or under the race detector (whose instrumentation makes reading 300 MB take minutes)
// the rollout has 60 lines: the bounds are the same, the file a fifth.
func TestLargeRolloutMemory(t *testing.T) {
	const lines, size = 300, 1 << 20
	n := lines
	if testing.Short() || raceEnabled {
		n = 60
	}
	dir := t.TempDir()
	writeLargeRollout(t, dir, "big", n, size)
	writeLargeRollout(t, dir, "small", 2, 4096)
	_, ts, stop := serveViewer(t, view.Options{Dirs: []string{dir}, ScanInterval: time.Hour})
	defer stop()
	if o := waitIndexed(t, ts.URL); o.Calls != n+2 {
		t.Fatalf("indexed %d calls; want %d", o.Calls, n)
	}
	base := ts.URL + "/api/rollouts/big"

	var cold, rollout, raw uint64
	cold = heapPeak(func() {
		if _, err := fetch(base + "/calls/" + strconv.Itoa(n/2)); err != nil {
			t.Error(err)
		}
	})
	rollout = heapPeak(func() {
		if _, err := fetch(base); err != nil {
			t.Error(err)
		}
	})
	raw = heapPeak(func() {
		if got, err := fetch(base + "/calls/7/raw?part=request&indent=1"); err != nil || got < size/2 {
			t.Errorf("raw request: %d bytes, %v", got, err)
		}
	})
	// A search that finds nothing reads every line; the transcript writes every message (each
	// user message of 1 MiB is new); a diff summarises every call.
	search := heapPeak(func() {
		if _, err := fetch(ts.URL + "/api/search?q=not-in-any-line"); err != nil {
			t.Error(err)
		}
	})
	transcript := heapPeak(func() {
		if got, err := fetch(base + "/transcript"); err != nil || got < int64(n)*size/2 {
			t.Errorf("transcript: %d bytes, %v", got, err)
		}
	})
	diff := heapPeak(func() {
		if _, err := fetch(ts.URL + "/api/diff?a=big&b=small"); err != nil {
			t.Error(err)
		}
	})
	// The lineage holds every payload of a rollout, so the viewer refuses it for this one (413)
	// without reading a line, and derives it for a small rollout.
	lin := heapPeak(func() {
		if _, err := fetch(base + "/lineage"); err == nil || !strings.Contains(err.Error(), "status 413") {
			t.Errorf("lineage of a %d MiB rollout: %v; want status 413", n, err)
		}
		if _, err := fetch(ts.URL + "/api/rollouts/small/lineage"); err != nil {
			t.Error(err)
		}
	})
	if lin >= 16<<20 {
		t.Errorf("refusing a large lineage added %d MiB; want < 16 MiB", lin>>20)
	}
	var wg sync.WaitGroup
	nine := heapPeak(func() {
		for i := range 9 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := fetch(base + "/calls/" + strconv.Itoa(i*n/9)); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	})
	const mib = 1 << 20
	t.Logf("%d lines of 1 MiB: heap added at the peak: first call page %d MiB, rollout page %d MiB, raw request %d MiB, nine call pages at once %d MiB, search %d MiB, transcript %d MiB, diff %d MiB",
		n, cold/mib, rollout/mib, raw/mib, nine/mib, search/mib, transcript/mib, diff/mib)
	if search >= 64*mib || transcript >= 64*mib || diff >= 64*mib {
		t.Errorf("a search added %d MiB, the transcript %d MiB, a diff %d MiB; want < 64 MiB each", search/mib, transcript/mib, diff/mib)
	}
	if cold >= 64*mib {
		t.Errorf("one call page added %d MiB; want < 64 MiB", cold/mib)
	}
	if rollout >= 64*mib || raw >= 64*mib {
		t.Errorf("the rollout page added %d MiB, a raw payload %d MiB; want < 64 MiB each", rollout/mib, raw/mib)
	}
	if nine >= 256*mib {
		t.Errorf("nine call pages at once added %d MiB; want < 256 MiB", nine/mib)
	}
}

// A live update reads only what was appended to a capture file; a file rewritten or truncated is
// read again from its start.
func TestIndexReadsOnlyAppendedBytes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r"+capture.CaptureSuffix)
	var file []byte
	for i := range 5 {
		file = append(append(file, largeLine(t, i, 4096)...), '\n')
	}
	capturetest.WriteFile(t, path, file, 0o640)
	srv, ts, stop := serveViewer(t, view.Options{Dirs: []string{dir}, ScanInterval: 10 * time.Millisecond})
	defer stop()
	o := waitIndexed(t, ts.URL)
	if o.Calls != 5 {
		t.Fatalf("%d calls; want 5", o.Calls)
	}
	read := srv.Index().ScannedBytes()
	if want := int64(len(file) - 5); read != want {
		t.Fatalf("first read: %d bytes of lines; want %d", read, want)
	}
	waitCalls := func(want, damaged int) view.Overview {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var o view.Overview
			getJSON(t, ts.URL+"/api/overview", 200, &o)
			if o.Calls == want && o.DamagedLines == damaged {
				return o
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d calls, %d damaged lines; want %d, %d", o.Calls, o.DamagedLines, want, damaged)
			}
			var ch struct{ Version uint64 }
			getJSON(t, ts.URL+"/api/changes?timeout=5&since="+itoa(o.Version), 200, &ch)
		}
	}

	// Appended: one line, in two writes (the first without its newline).
	line := largeLine(t, 5, 4096)
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(line[:100])
	f.Close()
	waitCalls(5, 1) // the partial line counts as a (damaged) line
	f, _ = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(append(line[100:], '\n'))
	f.Close()
	waitCalls(6, 0)
	var d view.RolloutDetail
	for deadline := time.Now().Add(30 * time.Second); ; {
		getJSON(t, ts.URL+"/api/rollouts/r", 200, &d)
		if len(d.Calls) == 6 && len(d.Damaged) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(d.Calls) != 6 || len(d.Damaged) != 0 {
		t.Fatalf("after the line was completed: %d calls, %d damaged", len(d.Calls), len(d.Damaged))
	}
	if got, max := srv.Index().ScannedBytes()-read, int64(100+len(line)); got > max {
		t.Errorf("the append cost reading %d bytes of lines; want at most %d (the partial line, then the whole line)", got, max)
	}

	// Truncated to two lines and rewritten with other calls: read again from the start.
	var rewritten []byte
	for i := range 2 {
		rewritten = append(append(rewritten, largeLine(t, 10+i, 4096)...), '\n')
	}
	capturetest.WriteFile(t, path, rewritten, 0o640)
	waitCalls(2, 0)
	var c view.CallDetail
	getJSON(t, ts.URL+"/api/rollouts/r/calls/1", 200, &c)
	if !bytes.Contains(c.Record, []byte(fmt.Sprintf(`"model_call_id":"%032x"`, 12))) {
		t.Errorf("after the rewrite call 1 is %s", c.Record)
	}
}

// writeCallDetail, which writes a call's page a piece at a time, writes what encoding/json would.
func TestCallDetailStreamsTheSameJSON(t *testing.T) {
	prev := 3
	d := &view.CallDetail{Version: 7, RolloutID: "r<1>", Line: 4, Record: json.RawMessage(`{"a":1}`),
		Conversation: view.Conversation{Input: []view.Message{{Role: "user", Parts: []view.Part{{Kind: "text", Text: "a & b"}}, New: true}},
			Tools: []string{}, Output: []view.Message{}, Error: "boom"},
		Units: map[string]string{"x": "ms"}, Raw: map[string]int{"request": 9}, Prev: &prev}
	for _, withError := range []bool{true, false} {
		if !withError {
			d.Conversation.Error = ""
		}
		var b bytes.Buffer
		if err := view.WriteCallDetail(&b, d); err != nil {
			t.Fatal(err)
		}
		var got, want any
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatalf("%v: %s", err, b.Bytes())
		}
		w, _ := json.Marshal(d)
		json.Unmarshal(w, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("streamed:\n%s\nencoding/json:\n%s", b.Bytes(), w)
		}
	}
}
