//go:build unix

package reliability

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/rollout"
)

// Item 8: fuzz targets the owning packages do not already have (docs/reliability.md lists all of
// them with the command to run each). Without -fuzz, `go test` runs their seeds as tests.

// FuzzEncodeExchange: whatever text a call carries (raw bodies with invalid UTF-8, control
// characters, quotes, line breaks; odd ids), the encoded exchange is one readable line, a record
// builds from it, response_raw reads back as the text with each invalid byte replaced by U+FFFD, and
// streaming response_raw from a reader (a spooled body) in reads of any size gives the same bytes
// as encoding it from memory, even when a read splits a UTF-8 sequence.
func FuzzEncodeExchange(f *testing.F) {
	f.Add([]byte("data: {\"a\":\"\u00e9\"}\n\n"), "sess\u2028ion", uint8(1))
	f.Add([]byte{0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80, 0xff, 0xc3}, "", uint8(2))
	f.Add([]byte("\x00\x1f\"\\\r\n\t</script>\u2028"), "\xff", uint8(3))
	f.Add([]byte{0xf0, 0x9f, 0x98}, "a\"b", uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, session string, step uint8) {
		ex := okExchange(capture.NewModelCallID(), 3)
		text := string(raw)
		ex.ResponseRaw = &text
		ex.RequestRaw = &session
		ex.ClientSessionID = &session
		mem, err := capture.EncodeExchange(ex)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.ContainsAny(mem, "\n\r") {
			t.Fatalf("line contains a line break: %q", mem)
		}
		if err := capture.CheckLine(mem); err != nil {
			t.Fatalf("encoded line is not readable: %v\n%q", err, mem)
		}
		rec, err := modelcalls.BuildRecord(mem, 0)
		if err != nil {
			t.Fatalf("record from encoded line: %v", err)
		}
		if want := string([]rune(text)); rec.ResponseRaw == nil || rec.ResponseRaw.Text() != want {
			t.Fatalf("response_raw reads back as %q, want %q", rec.ResponseRaw.Text(), want)
		}
		if want := string([]rune(session)); rec.ClientSessionID == nil || *rec.ClientSessionID != want {
			t.Fatalf("client_session_id reads back as %q, want %q", deref(rec.ClientSessionID), want)
		}
		ex.ResponseRaw = nil
		ex.ResponseRawFrom = &chunkReader{b: raw, n: int(step)%7 + 1}
		streamed, err := capture.EncodeExchange(ex)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(streamed, mem) {
			t.Fatalf("streamed in reads of %d bytes:\n%q\nfrom memory:\n%q", int(step)%7+1, streamed, mem)
		}
	})
}

// chunkReader hands out b in reads of at most n bytes, the last one together with io.EOF when
// n is odd (readers may do either).
type chunkReader struct {
	b []byte
	n int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.b)
	r.b = r.b[k:]
	if len(r.b) == 0 && r.n%2 == 1 {
		return k, io.EOF
	}
	return k, nil
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// FuzzAppendAfterAnyTail: whatever a crash or another program left in a capture file, an append
// changes none of the lines already there, and its own line reads back whole as the last entry. An
// AppendFunc whose writer fails part-way (a body spool that broke) costs at most that one line, and
// the next append is whole again.
func FuzzAppendAfterAnyTail(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"torn"), []byte(`{"b":2}`), uint16(3))
	f.Add([]byte("{\"a\":1}\n"), []byte(`{"b":"\u00e9"}`), uint16(0))
	f.Add([]byte("\n\n \r"), []byte(`{}`), uint16(2000))
	f.Add([]byte("{\"a\":1}\r"), []byte(`{"c":[1,2,3]}`), uint16(1))
	f.Add([]byte{}, []byte(`{"x":"y"}`), uint16(5))
	f.Fuzz(func(t *testing.T, prior, line []byte, failAfter uint16) {
		if capture.CheckLine(line) != nil || bytes.ContainsAny(line, "\n") {
			return // Append's contract: one JSON object without a newline
		}
		dir := t.TempDir()
		store, _ := capture.Open(dir)
		path, _ := store.CapturePath("f")
		capturetest.WriteFile(t, path, prior, 0o640)
		before, _, err := store.ReadAvailable("f")
		if err != nil {
			t.Fatal(err)
		}
		keep := func(es []capture.Entry) [][]byte {
			var out [][]byte
			for _, e := range es {
				out = append(out, bytes.Clone(e.Data))
			}
			return out
		}
		want := append(keep(before), line)
		if err := store.Append("f", line); err != nil {
			t.Fatal(err)
		}
		assertEntries(t, store, want)

		// A streamed line that fails after failAfter bytes, then a whole one.
		werr := errors.New("spool read failed")
		err = store.AppendFunc("f", func(w io.Writer) error {
			full := append([]byte(`{"partial":"`), bytes.Repeat([]byte("x"), 4096)...)
			n := min(int(failAfter), len(full))
			if _, err := w.Write(full[:n]); err != nil {
				return err
			}
			return werr
		})
		if !errors.Is(err, werr) {
			t.Fatalf("AppendFunc returned %v, want the writer's error", err)
		}
		if err := store.Append("f", line); err != nil {
			t.Fatal(err)
		}
		want = append(want, line)
		assertEntries(t, store, want)
	})
}

// assertEntries checks that the readable lines of rollout "f" are exactly want, in order.
func assertEntries(t *testing.T, store *capture.Store, want [][]byte) {
	t.Helper()
	got, _, err := store.ReadAvailable("f")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d readable lines, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].Data, want[i]) {
			t.Fatalf("line %d is %q, want %q", i, got[i].Data, want[i])
		}
	}
}

// FuzzRolloutIDPath: an id is either refused (by the store and by the merge, with an error wrapping
// rollout.ErrInvalidID) or it names files directly inside the capture dir whose names are the id
// plus the store's suffixes: no id reaches another directory, a hidden file, or a name the id does
// not spell.
func FuzzRolloutIDPath(f *testing.F) {
	for _, id := range []string{"0-1", "..", ".", "a/../b", "%2F", "a\x00b", "r\u00f6llout", strings.Repeat("a", 10240),
		"a\n", "-x", "a.b_c-d", "CON", "a\\b", " a", "a..b", "x.capture.jsonl"} {
		f.Add(id)
	}
	dir := f.TempDir()
	store := openStore(f, capture.Open, dir)
	merger, err := modelcalls.NewMerger([]string{dir}, modelcalls.MergeOptions{DrainTimeout: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id string) {
		verr := rollout.Validate(id)
		p, perr := store.CapturePath(id)
		if (verr == nil) != (perr == nil) {
			t.Fatalf("Validate says %v, CapturePath says %v", verr, perr)
		}
		rec, _ := json.Marshal(map[string]string{"_ng_rollout_id": id})
		_, res, merr := merger.Merge(t.Context(), rec)
		if verr != nil {
			if !errors.Is(perr, rollout.ErrInvalidID) || !errors.Is(store.Append(id, []byte(`{}`)), rollout.ErrInvalidID) {
				t.Fatalf("invalid id %q: path error %v", id, perr)
			}
			if utf8.ValidString(id) && (!errors.Is(merr, modelcalls.ErrNotRolloutRecord) || res.Attached) {
				t.Fatalf("merge of invalid id %q: %v, attached %v", id, merr, res.Attached)
			}
			return
		}
		if merr != nil || !res.Attached || res.RolloutID != id {
			t.Fatalf("merge of valid id %q: %v, %+v", id, merr, res)
		}
		if filepath.Dir(p) != filepath.Clean(dir) || filepath.Base(p) != id+capture.CaptureSuffix ||
			strings.HasPrefix(id, ".") || strings.ContainsAny(id, "/\\\x00") || len(id) > rollout.MaxIDLen {
			t.Fatalf("valid id %q gives path %q", id, p)
		}
		got, rest, ok := rollout.SplitPath(rollout.PathPrefix(id) + "/v1/responses")
		if !ok || got != id || rest != "/v1/responses" {
			t.Fatalf("SplitPath(PathPrefix(%q)) = %q, %q, %v", id, got, rest, ok)
		}
	})
}

// FuzzGatewayRelay: whatever an upstream answers (any bytes, as an event stream or not, any status,
// cut into any chunks), the client gets exactly those bytes and that status, and exactly one line
// lands for the call, readable by the strict reader, from which a record builds; a non-empty
// streamed body is kept whole in response_raw.
func FuzzGatewayRelay(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n"), true, uint8(0), uint8(7))
	f.Add([]byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), true, uint8(2), uint8(1))
	f.Add([]byte(`{"id":"x","output":[{"type":"message","content":[{"type":"output_text","text":"\u00e9"}]}]}`), false, uint8(1), uint8(200))
	f.Add([]byte("data: {\"type\":\"response.completed\",\"response\":{\"output\":[]}}\r\r\xff\xfe"), true, uint8(1), uint8(3))
	f.Add([]byte("<html>oops</html>"), false, uint8(0), uint8(250))
	f.Add([]byte{}, true, uint8(2), uint8(0))

	var bodies sync.Map // case id -> fuzzAnswer
	up := capturetest.NewServer(f, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		v, _ := bodies.Load(r.Header.Get("X-Fuzz-Case"))
		a := v.(fuzzAnswer)
		if a.sse {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(a.status)
		for b := a.body; len(b) > 0; {
			n := min(len(b), a.chunk)
			w.Write(b[:n])
			w.(http.Flusher).Flush()
			b = b[n:]
		}
	})
	dir := f.TempDir()
	store := openStore(f, capture.Open, dir)
	u, _ := url.Parse(up.URL)
	tr := &http.Transport{DisableCompression: true}
	h := &gateway.Handler{Upstream: u, Store: store, Transport: tr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	gw := httptest.NewServer(h)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	f.Cleanup(func() {
		gw.Close()
		tr.CloseIdleConnections()
		client.CloseIdleConnections()
	})
	paths := []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"}
	statuses := []int{200, 200, 200, 400, 429, 500, 201}
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, body []byte, sse bool, pathSel, chunk uint8) {
		k := strconv.FormatInt(n.Add(1), 10)
		a := fuzzAnswer{body: body, sse: sse, status: statuses[int(chunk)%len(statuses)], chunk: int(chunk)%64 + 1}
		bodies.Store(k, a)
		defer bodies.Delete(k)
		id := "fuzz-" + k
		req, _ := http.NewRequest(http.MethodPost, gw.URL+rollout.PathPrefix(id)+paths[int(pathSel)%3], strings.NewReader(`{"model":"m","stream":true}`))
		req.Header.Set("X-Fuzz-Case", k)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != a.status || !bytes.Equal(got, body) {
			t.Fatalf("client got %d %q (%v), upstream sent %d %q", res.StatusCode, got, err, a.status, body)
		}
		entries, err := store.Read(id)
		if err != nil || len(entries) != 1 {
			t.Fatalf("%d lines (%v), want 1", len(entries), err)
		}
		rec, err := modelcalls.BuildRecord(entries[0].Data, 0)
		if err != nil {
			t.Fatalf("no record from the line: %v", err)
		}
		if sse && len(body) > 0 {
			// The line is written when the terminal event is seen, before the client gets it: response_raw is the
			// body up to there, plus whatever arrived in the same read; all of it without one.
			k := rawPrefix(body, rec.ResponseRaw)
			if k < 0 || (k < len(body) && deref(rec.ErrorCategory) == "stream_truncated") {
				t.Fatalf("response_raw %q is not the body's text %q up to its terminal event", rec.ResponseRaw.Text(), body)
			}
		}
		if !sse && rec.ResponseRaw != nil && rec.ResponseRaw.Text() != string([]rune(string(body))) {
			t.Fatalf("response_raw %q, body %q", rec.ResponseRaw.Text(), body)
		}
		if rec.StatusCode == nil || *rec.StatusCode != a.status {
			t.Fatalf("status_code %v, want %d", rec.StatusCode, a.status)
		}
	})
}

// rawPrefix returns the k for which raw is the text of body[:k] (invalid UTF-8 replaced), the
// longest one, or -1 when there is none (or raw is nil).
func rawPrefix(body []byte, raw modelcalls.RawText) int {
	if raw == nil {
		return -1
	}
	text := raw.Text()
	for k := len(body); k >= 0; k-- {
		if string([]rune(string(body[:k]))) == text {
			return k
		}
	}
	return -1
}

// fuzzAnswer is what the fuzzed upstream sends for one case.
type fuzzAnswer struct {
	body   []byte
	sse    bool
	status int
	chunk  int
}
