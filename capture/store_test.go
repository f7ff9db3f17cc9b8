//go:build unix

// These tests write capture dirs, which the store does on Linux and macOS only.

package capture

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcalls/modelcalls/rollout"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "cap"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readFile(t *testing.T, s *Store, id string) string {
	t.Helper()
	p, err := s.CapturePath(id)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, s *Store, id, content string) {
	t.Helper()
	p, err := s.CapturePath(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
}

func TestPathsRejectInvalidIDs(t *testing.T) {
	s := newStore(t)
	for _, id := range []string{"", "a/b", "../a", "a b", "röllout", ".hidden", "abc\n", strings.Repeat("a", 201), "a\x00b", "%2F"} {
		if _, err := s.CapturePath(id); !errors.Is(err, rollout.ErrInvalidID) {
			t.Errorf("CapturePath(%q) err = %v, want ErrInvalidID", id, err)
		}
		if err := s.Append(id, []byte(`{}`)); !errors.Is(err, rollout.ErrInvalidID) {
			t.Errorf("Append(%q) err = %v, want ErrInvalidID", id, err)
		}
	}
	p, err := s.CapturePath("task-1_a.2")
	if err != nil || filepath.Base(p) != "task-1_a.2.capture.jsonl" {
		t.Errorf("CapturePath(task-1_a.2) = %q, %v", p, err)
	}
}

func TestAppendRoundTrip(t *testing.T) {
	s := newStore(t)
	lines := []string{`{"a":1,"s":"héllo \u2028"}`, `{"b":[1,2]}`}
	for _, l := range lines {
		if err := s.Append("r1", []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := readFile(t, s, "r1"), lines[0]+"\n"+lines[1]+"\n"; got != want {
		t.Fatalf("file = %q, want %q", got, want)
	}
	entries, err := s.Read("r1")
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		if e.Index != i || e.Line != i+1 || string(e.Data) != lines[i] {
			t.Errorf("entry %d = %+v", i, e)
		}
	}
	p, _ := s.CapturePath("r1")
	st, _ := os.Stat(p)
	if st.Mode().Perm()&0o007 != 0 {
		t.Errorf("capture file mode %v is world-accessible", st.Mode())
	}
}

func TestAppendRejectsNewline(t *testing.T) {
	s := newStore(t)
	if err := s.Append("r1", []byte("{}\n{}")); err == nil {
		t.Fatal("want error for a line with a newline")
	}
	if has, _, _ := s.Stat("r1"); has {
		t.Fatal("nothing should be written")
	}
}

func TestTornTailRepair(t *testing.T) {
	s := newStore(t)
	writeFile(t, s, "r1", "{\"a\":1}\n{\"torn\":")
	if err := s.Append("r1", []byte(`{"b":2}`)); err != nil {
		t.Fatal(err)
	}
	if got, want := readFile(t, s, "r1"), "{\"a\":1}\n{\"torn\":\n{\"b\":2}\n"; got != want {
		t.Fatalf("file = %q, want %q", got, want)
	}
	entries, damaged, err := s.ReadAvailable("r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[1].Index != 2 || len(damaged) != 1 || damaged[0].Line != 2 {
		t.Fatalf("entries=%+v damaged=%+v", entries, damaged)
	}
}

func TestReadAvailableIndices(t *testing.T) {
	// NeMo Gym's tolerant-read rule, on its own worked example at the line level: blank lines consume no index,
	// undecodable, non-object and NaN lines are damaged but consume one.
	s := newStore(t)
	content := strings.Join([]string{
		`{"i":0}`, ``, `{not json`, `[1,2]`, `{"i":3}`, `   `, `{"i":4}`, `{"x":NaN}`, `{"i":6}`, "{\"bad\":\"\xff\"}",
	}, "\n") + "\n"
	writeFile(t, s, "r1", content)
	entries, damaged, err := s.ReadAvailable("r1")
	if err != nil {
		t.Fatal(err)
	}
	var idx []int
	for _, e := range entries {
		idx = append(idx, e.Index)
	}
	if fmt.Sprint(idx) != "[0 3 4 6]" {
		t.Errorf("indices = %v, want [0 3 4 6]", idx)
	}
	var lines []int
	for _, d := range damaged {
		lines = append(lines, d.Line)
	}
	if fmt.Sprint(lines) != "[3 4 8 10]" {
		t.Errorf("damaged lines = %v, want [3 4 8 10]", lines)
	}
	if !errors.Is(damaged[1].Err, ErrNotObject) || !errors.Is(damaged[3].Err, ErrInvalidUTF8) {
		t.Errorf("damage errors = %v", damaged)
	}

	_, err = s.Read("r1")
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 || !strings.Contains(err.Error(), "r1.capture.jsonl:3:") {
		t.Fatalf("strict read err = %v, want LineError at line 3", err)
	}

	// ScanAvailable hands over the same non-blank lines with the same indices; with CheckLine as
	// the check it splits them as ReadAvailable does.
	var readable, bad []string
	if err := s.ScanAvailable("r1", func(index, line int, b []byte) {
		at := fmt.Sprintf("%d@%d", index, line)
		if CheckLine(b) != nil {
			bad = append(bad, at)
		} else {
			readable = append(readable, at)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(readable) != "[0@1 3@5 4@7 6@9]" || fmt.Sprint(bad) != "[1@3 2@4 5@8 7@10]" {
		t.Errorf("ScanAvailable: readable %v, damaged %v", readable, bad)
	}
	if err := s.ScanAvailable("missing", func(int, int, []byte) { t.Error("called for a missing file") }); err != nil {
		t.Errorf("ScanAvailable of a missing file: %v", err)
	}
}

func TestReadMissingAndDirectory(t *testing.T) {
	s := newStore(t)
	if e, err := s.Read("nope"); e != nil || err != nil {
		t.Errorf("Read missing = %v, %v", e, err)
	}
	if e, d, err := s.ReadAvailable("nope"); e != nil || d != nil || err != nil {
		t.Errorf("ReadAvailable missing = %v, %v, %v", e, d, err)
	}
	p, _ := s.CapturePath("dir")
	os.Mkdir(p, 0o750)
	if _, _, err := s.ReadAvailable("dir"); err == nil {
		t.Error("a directory in place of the capture file must be an error, not damage")
	}
}

func TestMarkerClearAndRollouts(t *testing.T) {
	s := newStore(t)
	if err := s.Append("a", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkIncomplete("b"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkIncomplete("b"); err != nil {
		t.Fatal("marker must be idempotent:", err)
	}
	c, err := s.Claim("a", NewModelCallID())
	if err != nil {
		t.Fatal(err)
	}
	ids, err := s.Rollouts()
	if err != nil || fmt.Sprint(ids) != "[a b]" {
		t.Fatalf("Rollouts = %v, %v", ids, err)
	}
	for _, id := range []string{"a", "b", "never"} {
		if err := s.Clear(id); err != nil {
			t.Fatalf("Clear(%s): %v", id, err)
		}
	}
	for _, id := range []string{"a", "b"} {
		hc, hm, err := s.Stat(id)
		if hc || hm || err != nil {
			t.Errorf("after Clear(%s): capture=%v marker=%v err=%v", id, hc, hm, err)
		}
	}
	// The claim was live: Clear leaves it, and it no longer counts for the rollout's next attempt.
	if n, _ := s.Claims("a"); n != (ClaimCount{Cleared: 1}) {
		t.Errorf("claims after Clear = %+v, want one cleared", n)
	}
	if err := c.Release(); err != nil {
		t.Errorf("releasing a cleared claim: %v", err)
	}
}

func TestClaims(t *testing.T) {
	s := newStore(t)
	c1, err := s.Claim("r", "aaaa")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim("r", "aaaa"); err == nil {
		t.Error("a second claim with the same model call id must fail")
	}
	if _, err := s.Claim("r", "../x"); err == nil {
		t.Error("a model call id with a slash must fail")
	}
	// A claim of a process that has exited is stale.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no `true` binary:", err)
	}
	// Per-call claim files (the form earlier versions wrote) are still read.
	dir, _ := s.ClaimsPath("r")
	os.MkdirAll(dir, 0o750)
	info, _ := json.Marshal(ClaimInfo{PID: cmd.Process.Pid, Host: localHost(), StartedAt: 1})
	os.WriteFile(filepath.Join(dir, "dead"), info, 0o640)
	// A claim from another host cannot be checked and stays live.
	info, _ = json.Marshal(ClaimInfo{PID: 1, Host: "elsewhere", StartedAt: 1})
	os.WriteFile(filepath.Join(dir, "remote"), info, 0o640)
	if n, err := s.Claims("r"); err != nil || n != (ClaimCount{Live: 2, Stale: 1}) {
		t.Fatalf("Claims = %+v, %v; want 2 live 1 stale", n, err)
	}
	if err := c1.Release(); err != nil {
		t.Fatal(err)
	}
	if err := c1.Release(); err != nil {
		t.Fatal("Release must be idempotent:", err)
	}
	if n, _ := s.Claims("r"); n != (ClaimCount{Live: 1, Stale: 1}) {
		t.Fatalf("Claims after release = %+v", n)
	}
}

func TestAppendFuncLargeLine(t *testing.T) {
	s := newStore(t)
	big := strings.Repeat("x", 3<<20)
	ex := &Exchange{ModelCallID: "m", Dialect: "chat", ResponseRawFrom: strings.NewReader(big)}
	if err := s.AppendExchange("r", ex); err != nil {
		t.Fatal(err)
	}
	entries, err := s.Read("r")
	if err != nil || len(entries) != 1 {
		t.Fatalf("read = %d entries, %v", len(entries), err)
	}
	var got struct {
		ResponseRaw string `json:"response_raw"`
	}
	if err := json.Unmarshal(entries[0].Data, &got); err != nil || got.ResponseRaw != big {
		t.Fatalf("response_raw round trip failed (len %d, err %v)", len(got.ResponseRaw), err)
	}
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("disk gone")
	}
	k := min(len(p), f.n)
	for i := range p[:k] {
		p[i] = 'y'
	}
	f.n -= k
	return k, nil
}

func TestAppendFuncFailureLeavesOneDamagedLine(t *testing.T) {
	s := newStore(t)
	if err := s.Append("r", []byte(`{"i":0}`)); err != nil {
		t.Fatal(err)
	}
	ex := &Exchange{ModelCallID: "m", Dialect: "chat", ResponseRawFrom: &failingReader{n: 2 << 20}}
	if err := s.AppendExchange("r", ex); err == nil {
		t.Fatal("want error from failing reader")
	}
	if err := s.Append("r", []byte(`{"i":2}`)); err != nil {
		t.Fatal(err)
	}
	entries, damaged, err := s.ReadAvailable("r")
	if err != nil || len(entries) != 2 || len(damaged) != 1 || entries[1].Index != 2 {
		t.Fatalf("entries=%d damaged=%d err=%v", len(entries), len(damaged), err)
	}
}

func TestConcurrentAppendGoroutines(t *testing.T) {
	s := newStore(t)
	const workers, per = 20, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				line := fmt.Sprintf(`{"w":%d,"i":%d,"pad":%q}`, w, i, strings.Repeat("p", 5000))
				if err := s.Append("shared", []byte(line)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	checkAllLines(t, s, "shared", workers, per)
}

// checkAllLines asserts that the rollout file holds exactly one intact line per (w, i).
func checkAllLines(t *testing.T, s *Store, id string, workers, per int) {
	t.Helper()
	entries, err := s.Read(id)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		var v struct{ W, I int }
		if err := json.Unmarshal(e.Data, &v); err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprint(v.W, "/", v.I)
		if seen[k] {
			t.Errorf("duplicate line %s", k)
		}
		seen[k] = true
	}
	if len(seen) != workers*per {
		t.Fatalf("got %d distinct lines, want %d", len(seen), workers*per)
	}
}

// TestMultiProcessAppend runs several copies of the test binary appending to one rollout file at
// once; the flock must keep every line whole.
func TestMultiProcessAppend(t *testing.T) {
	if dir := os.Getenv("CAPTURE_TEST_CHILD_DIR"); dir != "" {
		t.Skip("child process")
	}
	s := newStore(t)
	const procs, per = 4, 100
	var cmds []*exec.Cmd
	for w := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAppendChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "CAPTURE_TEST_CHILD_DIR="+s.Dir(), "CAPTURE_TEST_CHILD_W="+strconv.Itoa(w), "CAPTURE_TEST_CHILD_N="+strconv.Itoa(per))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		t.Cleanup(func() {
			if t.Failed() {
				t.Log(out.String())
			}
		})
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	checkAllLines(t, s, "shared", procs, per)
}

// TestAppendChild is the body of one child process of TestMultiProcessAppend.
func TestAppendChild(t *testing.T) {
	dir := os.Getenv("CAPTURE_TEST_CHILD_DIR")
	if dir == "" {
		t.Skip("only runs as a child of TestMultiProcessAppend")
	}
	w, _ := strconv.Atoi(os.Getenv("CAPTURE_TEST_CHILD_W"))
	n, _ := strconv.Atoi(os.Getenv("CAPTURE_TEST_CHILD_N"))
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		// Lines larger than a pipe buffer and a page, so a non-atomic write would interleave.
		line := fmt.Sprintf(`{"w":%d,"i":%d,"pad":%q}`, w, i, strings.Repeat(strconv.Itoa(w), 9000))
		if err := s.Append("shared", []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
}

var _ io.Reader = (*failingReader)(nil)

func TestCheckWritable(t *testing.T) {
	s := newStore(t)
	if err := s.CheckWritable(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(s.Dir()); len(ents) != 0 {
		t.Fatalf("the probe left %d entries behind", len(ents))
	}
	if os.Geteuid() == 0 {
		// root writes through a read-only mode; a dir replaced by a file still fails.
		os.RemoveAll(s.Dir())
		os.WriteFile(s.Dir(), nil, 0o640)
	} else {
		os.Chmod(s.Dir(), 0o500)
		t.Cleanup(func() { os.Chmod(s.Dir(), 0o750) })
	}
	if err := s.CheckWritable(); err == nil || !strings.Contains(err.Error(), "not writable") {
		t.Fatalf("CheckWritable on an unwritable dir = %v", err)
	}
}
