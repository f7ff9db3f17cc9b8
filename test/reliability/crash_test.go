//go:build unix

package reliability

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// Item 1: crash mid-write. Writer processes are SIGKILLed while appending, over and over, while a
// steady writer process keeps appending to the same rollout. Afterwards every line acknowledged
// before a kill is intact, each kill tore at most one line (counted as damaged), and the next
// append always started a fresh line (torn-tail repair: before appending, a writer that finds the
// file not ending in a newline writes one, so a torn line never swallows the next).

// Line shapes of the writer role. Every line is an exchange whose model_call_id encodes (writer,
// seq), so a torn or glued line can be traced to the append it came from, and whose response_raw is
// a pattern that depends on writer, seq and position, so any interleaving changes bytes.
const (
	tearYield = 2 << 20 // bytes of response_raw a stalling line hands out before it stalls (> the 1 MiB buffer)
	tearFull  = 3 << 20 // the size that line would have had
)

// crashModelCallID is the model_call_id of line seq of writer w: 8 + 24 hex digits.
func crashModelCallID(w, seq int) string { return fmt.Sprintf("%08x%024x", w, seq) }

// parseCrashID reads (writer, seq) back from the start of a line, if the line got that far.
func parseCrashID(line []byte) (w, seq int, ok bool) {
	const head = `{"model_call_id":"`
	if !bytes.HasPrefix(line, []byte(head)) || len(line) < len(head)+32 {
		return 0, 0, false
	}
	id := line[len(head) : len(head)+32]
	if _, err := hex.DecodeString(string(id)); err != nil {
		return 0, 0, false
	}
	a, _ := strconv.ParseInt(string(id[:8]), 16, 64)
	b, _ := strconv.ParseInt(string(id[8:]), 16, 64)
	return int(a), int(b), true
}

// isLineStart reports whether b could be a line torn before its model_call_id was complete: a
// prefix of `{"model_call_id":"` followed by up to 31 hex digits.
func isLineStart(b []byte) bool {
	const head = `{"model_call_id":"`
	if len(b) <= len(head) {
		return bytes.HasPrefix([]byte(head), b)
	}
	rest := b[len(head):]
	if !bytes.HasPrefix(b, []byte(head)) || len(rest) >= 32 {
		return false
	}
	_, err := hex.DecodeString(string(rest[:len(rest)/2*2]))
	return err == nil
}

// crashSize is the response_raw size of line seq of a writer in mode: steady lines are small,
// random-kill victims mix small, medium (one write) and large (written in pieces) lines.
func crashSize(mode string, w, seq int) int {
	switch mode {
	case "steady":
		return 200 + (w*7+seq*13)%2000
	case "random":
		switch seq % 6 {
		case 5:
			return 1<<20 + 300<<10 // larger than the append buffer: several writes under the lock
		case 2, 4:
			return 64<<10 + seq*997%(192<<10)
		}
		return 100 + seq*31%4000
	}
	return tearFull
}

// crashPattern returns n bytes of response_raw for line seq of writer w. The letter changes every
// 512 bytes and depends on writer and seq, so bytes from another line never match.
func crashPattern(w, seq, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + (i/512+w*5+seq*3)%26)
	}
	return b
}

// crashExchange is the exchange of line seq of writer w with n bytes of response_raw from raw (nil:
// the pattern, held in memory).
func crashExchange(w, seq, n int, raw io.Reader) *capture.Exchange {
	status := 200
	ex := &capture.Exchange{
		ModelCallID: crashModelCallID(w, seq),
		Dialect:     "chat",
		StartedAt:   1.7e9 + float64(seq),
		CompletedAt: 1.7e9 + float64(seq) + 0.5,
		LatencyMS:   500,
		StatusCode:  &status,
		Request:     json.RawMessage(fmt.Sprintf(`{"writer":%d,"seq":%d}`, w, seq)),
	}
	if raw != nil {
		ex.ResponseRawFrom = raw
	} else {
		s := string(crashPattern(w, seq, n))
		ex.ResponseRaw = &s
	}
	return ex
}

// crashLine is the exact line (without '\n') line seq of writer w in mode must read back as.
func crashLine(t testing.TB, mode string, w, seq int) []byte {
	b, err := capture.EncodeExchange(crashExchange(w, seq, crashSize(mode, w, seq), nil))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writerRole appends lines to rollout MR_ROLLOUT in MR_DIR as writer MR_WRITER, printing "ok <seq>"
// after each append returned (the line is durable). MR_MODE:
//   - steady: small lines until stdin closes, then exit 0;
//   - random: lines of mixed sizes until killed;
//   - tear: MR_TEAR_AFTER ordinary lines, then one large line whose response_raw reader stalls after
//     tearYield bytes; "stalled <seq>" is printed once those bytes passed the append buffer (part of
//     the line is in the file, the exclusive lock is held), and the writer blocks until killed.
func writerRole() int {
	store, err := capture.Open(os.Getenv("MR_DIR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	id, mode := os.Getenv("MR_ROLLOUT"), os.Getenv("MR_MODE")
	w, _ := strconv.Atoi(os.Getenv("MR_WRITER"))
	tearAfter, _ := strconv.Atoi(os.Getenv("MR_TEAR_AFTER"))
	stdinClosed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	for seq := 0; ; seq++ {
		if mode == "steady" {
			select {
			case <-stdinClosed:
				return 0
			default:
			}
		}
		var ex *capture.Exchange
		if mode == "tear" && seq == tearAfter {
			raw := &stallReader{src: bytes.NewReader(crashPattern(w, seq, tearFull)), yield: tearYield, seq: seq, block: stdinClosed}
			ex = crashExchange(w, seq, tearFull, raw)
		} else {
			lineMode := mode
			if mode == "tear" {
				lineMode = "random"
			}
			n := crashSize(lineMode, w, seq)
			var raw io.Reader
			if n > 1<<20 {
				raw = bytes.NewReader(crashPattern(w, seq, n)) // streamed like a spooled body
			}
			ex = crashExchange(w, seq, n, raw)
		}
		if err := store.AppendExchange(id, ex); err != nil {
			fmt.Fprintln(os.Stderr, "append:", err)
			return 1
		}
		fmt.Printf("ok %d\n", seq)
	}
}

// stallReader hands out yield bytes of src, then reports "stalled <seq>" on stdout and blocks until
// block is closed (it never is while the test runs: the process is killed).
type stallReader struct {
	src    io.Reader
	yield  int
	seq    int
	block  <-chan struct{}
	given  int
	called bool
}

func (r *stallReader) Read(p []byte) (int, error) {
	if r.given >= r.yield {
		if !r.called {
			r.called = true
			fmt.Printf("stalled %d\n", r.seq)
		}
		<-r.block
		return 0, errors.New("stdin closed while stalled")
	}
	p = p[:min(len(p), r.yield-r.given)]
	n, err := r.src.Read(p)
	r.given += n
	return n, err
}

func TestCrashMidWrite(t *testing.T) {
	rounds := 24
	if testing.Short() {
		rounds = 6
	}
	dir := t.TempDir()
	store := openStore(t, capture.Open, dir)
	const id = "crash-0"
	rng := rand.New(rand.NewPCG(1, 2))

	acked := map[[2]int]bool{} // (writer, seq) whose append returned before the kill
	mode := map[int]string{}   // writer -> mode
	var victims []victim

	steady := startHelper(t, "writer", "MR_DIR="+dir, "MR_ROLLOUT="+id, "MR_MODE=steady", "MR_WRITER=0")
	mode[0] = "steady"
	steadyAcks := make(chan int, 1<<16)
	steadyDone := make(chan struct{})
	go func() {
		defer close(steadyDone)
		for line := range steady.lines {
			if s, ok := strings.CutPrefix(line, "ok "); ok {
				n, _ := strconv.Atoi(s)
				steadyAcks <- n
			}
		}
	}()

	kills, tornKills := 0, 0
	for r := 0; r < rounds; r++ {
		w := r + 1
		last := r == rounds-1
		if last {
			// The final round runs alone, so the torn tail it leaves is the file's last byte.
			steady.stdin.Close()
			<-steadyDone
			if err := steady.wait(); err != nil {
				t.Fatalf("steady writer: %v\n%s", err, steady.stderr.String())
			}
		}
		if r%2 == 0 || last {
			after := rng.IntN(4)
			p := startHelper(t, "writer", "MR_DIR="+dir, "MR_ROLLOUT="+id, "MR_MODE=tear", "MR_WRITER="+strconv.Itoa(w), "MR_TEAR_AFTER="+strconv.Itoa(after))
			mode[w] = "tear"
			for {
				line := p.expect("")
				if s, ok := strings.CutPrefix(line, "ok "); ok {
					n, _ := strconv.Atoi(s)
					acked[[2]int{w, n}] = true
					continue
				}
				if strings.HasPrefix(line, "stalled ") {
					break
				}
			}
			p.kill()
			victims = append(victims, victim{w: w, tearSeq: after, mode: "tear"})
			tornKills++
		} else {
			k := rng.IntN(9)
			p := startHelper(t, "writer", "MR_DIR="+dir, "MR_ROLLOUT="+id, "MR_MODE=random", "MR_WRITER="+strconv.Itoa(w))
			mode[w] = "random"
			for got := 0; got < k; got++ {
				n, _ := strconv.Atoi(strings.TrimPrefix(p.expect("ok "), "ok "))
				acked[[2]int{w, n}] = true
			}
			p.kill()
			victims = append(victims, victim{w: w, tearSeq: -1, mode: "random"})
		}
		kills++
	}
	close(steadyAcks)
	for n := range steadyAcks {
		acked[[2]int{0, n}] = true
	}

	// The last victim stalled mid-line and nothing wrote after it: the file ends torn.
	path, _ := store.CapturePath(id)
	data := capturetest.ReadFile(t, path)
	if len(data) == 0 || data[len(data)-1] == '\n' {
		t.Fatalf("the last kill left no torn tail (file of %d bytes): the test did not exercise a torn line", len(data))
	}
	// The next append starts a fresh line.
	fresh := crashLine(t, "steady", 999, 0)
	if err := store.Append(id, fresh); err != nil {
		t.Fatal(err)
	}
	acked[[2]int{999, 0}] = true
	mode[999] = "steady"

	entries, damages, err := store.ReadAvailable(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 || !bytes.Equal(entries[len(entries)-1].Data, fresh) {
		t.Fatal("the append after a torn tail is not the last readable line")
	}
	seen := map[[2]int]bool{}
	var lineBytes int64
	for _, e := range entries {
		w, seq, ok := parseCrashID(e.Data)
		if !ok {
			t.Fatalf("line %d: not a line any writer wrote: %.80q", e.Line, e.Data)
		}
		key := [2]int{w, seq}
		if seen[key] {
			t.Fatalf("line %d: writer %d seq %d appears twice", e.Line, w, seq)
		}
		seen[key] = true
		m := mode[w]
		if m == "tear" {
			m = "random"
		}
		if want := crashLine(t, m, w, seq); !bytes.Equal(e.Data, want) {
			t.Fatalf("line %d (writer %d seq %d): %d bytes differ from the %d bytes written", e.Line, w, seq, len(e.Data), len(want))
		}
		lineBytes += int64(len(e.Data)) + 1
	}
	for key := range acked {
		if !seen[key] {
			t.Errorf("acknowledged line writer %d seq %d is lost", key[0], key[1])
		}
	}

	// Every damaged line is the torn start of a line a killed writer was writing, one per victim at
	// most, and every victim that stalled mid-line left exactly its torn line.
	lines := bytes.Split(data, []byte("\n"))
	tornBy := map[int]int{}
	for _, d := range damages {
		b := lines[d.Line-1]
		w, seq, ok := parseCrashID(b)
		if !ok {
			if !isLineStart(b) {
				t.Fatalf("damaged line %d is not the start of a capture line: %.80q", d.Line, b)
			}
			tornBy[-1]++
			continue
		}
		if mode[w] == "steady" || seen[[2]int{w, seq}] {
			t.Fatalf("damaged line %d belongs to writer %d seq %d, which was not killed mid-line", d.Line, w, seq)
		}
		m := "random"
		if mode[w] == "tear" && seq == victimTearSeq(victims, w) {
			m = "tear"
		}
		full := crashLine(t, m, w, seq)
		if len(b) >= len(full) || !bytes.Equal(full[:len(b)], b) {
			t.Fatalf("damaged line %d (writer %d seq %d) is not a prefix of the line being written", d.Line, w, seq)
		}
		tornBy[w]++
	}
	for w, n := range tornBy {
		if n > 1 && w >= 0 {
			t.Errorf("writer %d tore %d lines; a kill tears at most one", w, n)
		}
	}
	if tornBy[-1] > kills {
		t.Errorf("%d unattributable damaged lines for %d kills", tornBy[-1], kills)
	}
	for _, v := range victims {
		if v.mode == "tear" && tornBy[v.w] != 1 {
			t.Errorf("writer %d was killed mid-line but left %d damaged lines, want 1", v.w, tornBy[v.w])
		}
	}
	if len(damages) > kills {
		t.Errorf("%d damaged lines for %d kills", len(damages), kills)
	}

	// The strict read refuses the file and names the first torn line.
	_, err = store.Read(id)
	var le *capture.LineError
	if !errors.As(err, &le) || le.Line != damages[0].Line || le.Path != path {
		t.Errorf("strict read: %v, want a LineError at %s:%d", err, path, damages[0].Line)
	}
	t.Logf("%d kills (%d stalled mid-line), %d intact lines (%d acknowledged, %d bytes), %d damaged, 0 lost; file %d bytes",
		kills, tornKills, len(entries), len(acked), lineBytes, len(damages), len(data))
}

// victim is a killed writer: its id, the seq of the line it stalled in (-1 for a random kill), and
// its mode.
type victim struct {
	w, tearSeq int
	mode       string
}

// victimTearSeq is the seq writer w stalled in, or -1.
func victimTearSeq(victims []victim, w int) int {
	for _, v := range victims {
		if v.w == w {
			return v.tearSeq
		}
	}
	return -1
}
