package dialect

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/sse"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.json from the current reassembly")

// chunkSizes are the chunkings every fixture is fed in; 0 means the whole body in one Write.
var chunkSizes = []int{1, 7, 97, 0}

// fixturesDir is the repository's one set of recorded provider bodies: real SSE streams of the
// dialects under <dialect>/<file>.sse (see ../testdata/fixtures/README.md).
var fixturesDir = filepath.Join("..", "testdata", "fixtures")

// streamFixtures lists every recorded stream in fixturesDir, sorted: ../testdata/fixtures/<dir>/<file>.sse.
func streamFixtures(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(fixturesDir, "*", "*.sse"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no stream fixtures: %v", err)
	}
	sort.Strings(files)
	return files
}

// fixtureName is a fixture stream's name in testdata/golden and in test names: <dir>__<file>.sse.
func fixtureName(file string) string {
	return filepath.Base(filepath.Dir(file)) + "__" + filepath.Base(file)
}

// fixtureDialect maps a fixture file to its dialect by its directory.
func fixtureDialect(t testing.TB, file string) Dialect {
	switch dir := filepath.Base(filepath.Dir(file)); dir {
	case "openai_responses":
		return Responses
	case "openai_chat":
		return Chat
	case "anthropic_messages":
		return Messages
	case "google_gemini":
		return Gemini
	}
	t.Fatalf("fixture %s is not in a dialect directory", file)
	return ""
}

// streamRun is what a Stream reported for one chunking of a body.
type streamRun struct {
	response []byte
	terminal Terminal
	hits     []int // indices of the Writes that returned true; len(chunks) stands for End
	chunks   int
}

// runStream feeds body in chunks of n bytes (n == 0: whole) and ends the stream.
func runStream(d Dialect, body []byte, n int) streamRun {
	if n <= 0 {
		n = max(len(body), 1)
	}
	s := NewStream(d)
	var r streamRun
	for off := 0; off < len(body); off += n {
		if s.Write(body[off:min(off+n, len(body))]) {
			r.hits = append(r.hits, r.chunks)
		}
		r.chunks++
	}
	if s.End() {
		r.hits = append(r.hits, r.chunks)
	}
	r.response = s.Response()
	r.terminal = s.Terminal()
	return r
}

// terminalOffset is an oracle for where the first terminal event completes, built from the
// decoder and TerminalOf alone: the length of the shortest prefix of body whose events (without
// Flush) include a terminal one, or -1 when no prefix does.
func terminalOffset(d Dialect, body []byte) int {
	hasTerminal := func(p int) bool {
		var dec sse.Decoder
		found := false
		dec.Feed(body[:p], func(ev sse.Event) {
			if d.TerminalOf(ev) != TerminalNone {
				found = true
			}
		})
		return found
	}
	if !hasTerminal(len(body)) {
		return -1
	}
	lo, hi := 0, len(body) // hasTerminal(lo) false, hasTerminal(hi) true
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if hasTerminal(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// golden is the reviewed form of a fixture's reassembly, stored indented in testdata/golden.
type golden struct {
	Terminal      string          `json:"terminal"`
	TerminalInEnd bool            `json:"terminal_in_end"`
	Response      json.RawMessage `json:"response"`
}

func goldenPath(file string) string {
	return filepath.Join("testdata", "golden", strings.TrimSuffix(fixtureName(file), ".sse")+".json")
}

// TestStreamGolden feeds every fixture in several chunkings, checks that the reassembly and the
// terminal do not depend on the chunking, that the terminal-completing chunk is reported exactly
// once and at the chunk that holds the terminal event's end, and compares the reassembly byte for
// byte with testdata/golden (go test ./dialect -run TestStreamGolden -update rewrites them).
func TestStreamGolden(t *testing.T) {
	for _, file := range streamFixtures(t) {
		t.Run(fixtureName(file), func(t *testing.T) {
			d := fixtureDialect(t, file)
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			off := terminalOffset(d, body)
			whole := runStream(d, body, 0)
			for _, n := range chunkSizes {
				r := runStream(d, body, n)
				if !bytes.Equal(r.response, whole.response) {
					t.Fatalf("chunks of %d: response differs from the whole-body one\n got %s\nwant %s", n, r.response, whole.response)
				}
				if r.terminal != whole.terminal {
					t.Fatalf("chunks of %d: terminal %v, whole body %v", n, r.terminal, whole.terminal)
				}
				size := n
				if size == 0 {
					size = max(len(body), 1)
				}
				var want []int
				switch {
				case off > 0:
					want = []int{(off - 1) / size} // the chunk holding byte off-1
				case r.terminal != TerminalNone:
					want = []int{r.chunks} // only End saw it
				}
				if fmt.Sprint(r.hits) != fmt.Sprint(want) {
					t.Fatalf("chunks of %d: terminal reported at chunks %v, want %v (terminal ends at byte %d, %d chunks)", n, r.hits, want, off, r.chunks)
				}
			}
			if whole.response != nil && !json.Valid(whole.response) {
				t.Fatalf("response is not JSON: %s", whole.response)
			}

			g := golden{Terminal: whole.terminal.String(), TerminalInEnd: off < 0 && whole.terminal != TerminalNone, Response: whole.response}
			if g.Response == nil {
				g.Response = json.RawMessage("null")
			}
			path := goldenPath(file)
			if *update {
				var b bytes.Buffer
				enc := json.NewEncoder(&b)
				enc.SetEscapeHTML(false) // keep <, > and & as the server sent them
				enc.SetIndent("", "  ")
				if err := enc.Encode(g); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := readGolden(t, path)
			if want.Terminal != g.Terminal || want.TerminalInEnd != g.TerminalInEnd {
				t.Fatalf("terminal %s (in End: %v), golden says %s (in End: %v)", g.Terminal, g.TerminalInEnd, want.Terminal, want.TerminalInEnd)
			}
			if !bytes.Equal(want.Response, g.Response) {
				t.Fatalf("response differs from %s\n got %s\nwant %s", path, g.Response, want.Response)
			}
		})
	}
}

// readGolden reads a golden file; its response is compacted back to the exact bytes Response
// returned (indenting and compacting are inverse for compact JSON).
func readGolden(t *testing.T, path string) golden {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("golden %s: %v", path, err)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, g.Response); err != nil {
		t.Fatalf("golden %s response: %v", path, err)
	}
	g.Response = c.Bytes()
	return g
}

// readFile reads a test file or fails the test. (The package's tests cannot use
// internal/capturetest: it builds records, and the record model imports this package.)
func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
