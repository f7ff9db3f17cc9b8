//go:build unix

// These tests write capture dirs, which the store does on Linux and macOS only.

package capture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// gatherExchange is an exchange whose request, response and escaped response_raw are each past
// refMin, so AppendExchange writes them from where they are (lineBuf.ref) instead of copying them.
func gatherExchange(i int) *Exchange {
	req := json.RawMessage(fmt.Sprintf(`{"model":"m","n":%d,"messages":[{"role":"user","content":%q}]}`, i, strings.Repeat("ask ", 2000+i)))
	resp := json.RawMessage(fmt.Sprintf(`{"id":"r%d","output":[{"type":"message","text":%q}]}`, i, strings.Repeat("say ", 1500)))
	var esc TextEscaper
	raw := esc.Flush(esc.Append(nil, []byte(strings.Repeat("data: {\"x\":\"y\\n\"}\n\n", 400+i))))
	return &Exchange{ModelCallID: fmt.Sprintf("g-%d", i), Dialect: "responses", Request: req, RequestCompact: IsCompactJSON(req),
		Response: resp, ResponseRawEscaped: &EscapedText{Bytes: raw}, PayloadsChecked: true}
}

// wantLines is the file the exchanges should give, as EncodeExchange writes them (sorted: the
// concurrent cases append in any order).
func wantLines(t *testing.T, exs []*Exchange) []string {
	t.Helper()
	var lines []string
	for _, ex := range exs {
		b, err := EncodeExchange(ex)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	slices.Sort(lines)
	return lines
}

func fileLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("file does not end with a newline (%d bytes)", len(b))
	}
	lines := strings.Split(string(b[:len(b)-1]), "\n")
	slices.Sort(lines)
	return lines
}

// TestAppendGathersLargeParts: a line whose large parts are written by reference (one vectored
// write) is byte for byte the line EncodeExchange builds, through each way the store writes:
// pwritev2 with RWF_DSYNC (one writer), io_uring (many writers at once), a plain writev and a
// separate sync (syncHook), group commit into one file, and after a torn tail left by another
// writer (the repair newline goes first).
func TestAppendGathersLargeParts(t *testing.T) {
	lb := getLineBuf(0)
	if err := WriteExchange(lb, gatherExchange(0)); err != nil || len(lb.segs) < 3 {
		t.Fatalf("the line has %d segments (%v), want its three large parts referred to", len(lb.segs), err)
	}
	putLineBuf(lb)
	for _, tc := range []struct {
		name    string
		writers int
		oneFile bool
		plain   bool
		torn    bool
	}{
		{"one writer", 1, false, false, false},
		{"many writers, own files", 4 * runtime.GOMAXPROCS(0), false, false, false},
		{"many writers, one file", 4 * runtime.GOMAXPROCS(0), true, false, false},
		{"plain write and sync", 3, true, true, false},
		{"after a torn tail", 1, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if tc.plain {
				syncHook = func(f *os.File) error { return f.Sync() }
				defer func() { syncHook = nil }()
			}
			id := func(w int) string {
				if tc.oneFile {
					return "one"
				}
				return fmt.Sprintf("own-%d", w)
			}
			var torn string
			if tc.torn {
				torn = `{"model_call_id":"cut-off`
				p, _ := s.CapturePath("one")
				if err := os.WriteFile(p, []byte(torn), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			byFile := map[string][]*Exchange{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for w := range tc.writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := range 3 {
						ex := gatherExchange(w*3 + k)
						if err := s.AppendExchange(id(w), ex); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						byFile[id(w)] = append(byFile[id(w)], ex)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			for f, exs := range byFile {
				p, _ := s.CapturePath(f)
				want := wantLines(t, exs)
				if torn != "" {
					want = append(want, torn)
					slices.Sort(want)
				}
				got := fileLines(t, p)
				if !slices.Equal(got, want) {
					t.Errorf("%s: %d lines, want %d; first differing line starts %.80q", f, len(got), len(want), firstDiff(got, want))
				}
			}
		})
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return a[i]
		}
	}
	return ""
}

// TestPrettyPayloadNotReferred: a large payload that must be compacted goes through the line
// writer's scratch buffer piece by piece; those pieces are copied, never referred to (the scratch
// is reused for the next piece).
func TestPrettyPayloadNotReferred(t *testing.T) {
	s := newStore(t)
	pretty := json.RawMessage("{ \"a\" : " + strings.Repeat("[ 1 , 2 ] , ", 1) + "\"" + strings.Repeat("q r", 60<<10) + "\" , \"b\" : [ " + strings.Repeat("1 , ", 40<<10) + "1 ] }")
	ex := &Exchange{ModelCallID: "p", Dialect: "chat", Request: pretty, PayloadsChecked: true}
	if err := s.AppendExchange("pretty", ex); err != nil {
		t.Fatal(err)
	}
	want, err := EncodeExchange(ex)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := s.CapturePath("pretty")
	got, _ := os.ReadFile(p)
	if !bytes.Equal(got, append(want, '\n')) {
		t.Fatalf("line of %d bytes differs from the encoded %d", len(got), len(want)+1)
	}
}
