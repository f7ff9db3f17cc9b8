package dialect

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// spill is a Stream's policy for long texts (joined content, reasoning and argument deltas): a
// text longer than threshold bytes moves to an unlinked temp file in dir, so a content-heavy
// stream does not keep its text in memory. The zero value (threshold 0) never spills.
type spill struct {
	dir       string
	threshold int
	files     []*os.File
	err       error // first spill failure: the reconstruction is incomplete
}

// textWriteBuf is how many bytes of a spilled text are gathered before a write to its file.
const textWriteBuf = 32 << 10

// text is a string under reconstruction: in memory, or once it passes the spill threshold in a
// temp file (plus a write buffer). The bytes are decoded text (valid UTF-8: payloads are
// repaired before decoding).
type text struct {
	mem []byte
	f   *os.File
	w   *bufio.Writer // buffers appends to f
	n   int64         // bytes written to f (including w's buffer)
}

func newText(b []byte) *text { return &text{mem: b} }

// size is the text's length in bytes.
func (t *text) size() int64 {
	if t.f != nil {
		return t.n
	}
	return int64(len(t.mem))
}

// append adds p, moving the text to a temp file when it passes sp's threshold. When the file
// cannot be made, the text stays in memory.
func (t *text) append(p []byte, sp *spill) {
	if t.f == nil {
		if sp == nil || sp.threshold <= 0 || len(t.mem)+len(p) <= sp.threshold || sp.err != nil {
			t.mem = append(t.mem, p...)
			return
		}
		f, err := os.CreateTemp(sp.dir, "modelcalls-text-*")
		if err != nil {
			sp.err = fmt.Errorf("spool reassembled text: %w", err)
			t.mem = append(t.mem, p...)
			return
		}
		os.Remove(f.Name()) // the open file stays; a crash leaves nothing behind
		sp.files = append(sp.files, f)
		t.f, t.w = f, bufio.NewWriterSize(f, textWriteBuf)
		t.write(t.mem, sp)
		t.mem = nil
	}
	t.write(p, sp)
}

func (t *text) write(p []byte, sp *spill) {
	n, err := t.w.Write(p)
	t.n += int64(n)
	if err != nil && sp.err == nil {
		sp.err = fmt.Errorf("spool reassembled text: %w", err)
	}
}

// string returns the text; only for short texts (types, ids) or tests: a spilled text is read
// back whole.
func (t *text) bytes() []byte {
	if t.f == nil {
		return t.mem
	}
	b := make([]byte, 0, t.n)
	t.each(func(p []byte) { b = append(b, p...) })
	return b
}

// each calls fn with the text's bytes in pieces, in order. A spilled text is read back from its
// file (after the buffered tail is written); fn must not keep a piece.
func (t *text) each(fn func([]byte)) error {
	if t.f == nil {
		fn(t.mem)
		return nil
	}
	if err := t.w.Flush(); err != nil {
		return fmt.Errorf("spool reassembled text: %w", err)
	}
	buf := make([]byte, 64<<10)
	r := io.NewSectionReader(t.f, 0, t.n)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			fn(buf[:n])
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read reassembled text: %w", err)
		}
	}
}

// head returns the text's first n bytes at most, without a UTF-8 sequence the cut would split.
func (t *text) head(n int) ([]byte, error) {
	if t.f == nil {
		b := t.mem[:min(n, len(t.mem))]
		return b[:len(b)-incompleteTail(b)], nil
	}
	if err := t.w.Flush(); err != nil {
		return nil, fmt.Errorf("spool reassembled text: %w", err)
	}
	b := make([]byte, min(int64(n), t.n))
	if _, err := t.f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("read reassembled text: %w", err)
	}
	return b[:len(b)-incompleteTail(b)], nil
}

// close releases sp's files.
func (sp *spill) close() {
	for _, f := range sp.files {
		f.Close()
	}
	sp.files = nil
}

// enc writes compact JSON: into b, and when w is set, on to w whenever b holds encFlush bytes,
// so a large reconstruction is never built whole in memory.
type enc struct {
	b   []byte
	w   io.Writer
	err error
	// elide cuts texts that spilled to a file to their first elideAt bytes (Stream.Summary): what
	// stays is small.
	elide   bool
	elideAt int
}

const encFlush = 32 << 10

func (e *enc) flush() {
	if e.w == nil || len(e.b) == 0 {
		return
	}
	if e.err == nil {
		_, e.err = e.w.Write(e.b)
	}
	e.b = e.b[:0]
}

// grow flushes b when it is big enough to go out.
func (e *enc) grow() {
	if e.w != nil && len(e.b) >= encFlush {
		e.flush()
	}
}

func (e *enc) raw(s string) { e.b = append(e.b, s...) }

// comma writes the "," that separates the i-th element (0-based) of a JSON array or object from the
// one before it: nothing for the first.
func (e *enc) comma(i int) {
	if i > 0 {
		e.raw(",")
	}
}

// bytes writes p as it is; a large p goes straight to w without a copy into b.
func (e *enc) bytes(p []byte) {
	if e.w != nil && len(p) >= encFlush {
		e.flush()
		if e.err == nil {
			_, e.err = e.w.Write(p)
		}
		return
	}
	e.b = append(e.b, p...)
	e.grow()
}

func (e *enc) str(s string) { e.b = jsonscan.AppendString(e.b, s) }

// text writes t as a JSON string literal, piece by piece; a UTF-8 sequence split between pieces
// is carried over to the next one.
func (e *enc) text(t *text) {
	if e.elide && t.f != nil {
		head, err := t.head(e.elideAt)
		if err != nil && e.err == nil {
			e.err = err
		}
		e.b = append(jsonscan.AppendEscaped(append(e.b, '"'), head), '"')
		return
	}
	e.b = append(e.b, '"')
	var carry []byte
	err := t.each(func(p []byte) {
		if len(carry) > 0 {
			need := utf8SeqLen(carry[0]) - len(carry)
			k := min(need, len(p))
			carry = append(carry, p[:k]...)
			p = p[k:]
			if len(carry) < utf8SeqLen(carry[0]) {
				return
			}
			e.b = jsonscan.AppendEscaped(e.b, carry)
			carry = carry[:0]
		}
		keep := incompleteTail(p)
		e.b = jsonscan.AppendEscaped(e.b, p[:len(p)-keep])
		carry = append(carry, p[len(p)-keep:]...)
		e.grow()
	})
	if len(carry) > 0 {
		e.b = jsonscan.AppendEscaped(e.b, carry)
	}
	if err != nil && e.err == nil {
		e.err = err
	}
	e.b = append(e.b, '"')
}

// utf8SeqLen is the length of the UTF-8 sequence lead byte c starts (1 for anything else).
func utf8SeqLen(c byte) int {
	switch {
	case c >= 0xF0:
		return 4
	case c >= 0xE0:
		return 3
	case c >= 0xC0:
		return 2
	}
	return 1
}

// incompleteTail returns how many bytes at the end of b start a UTF-8 sequence that the next
// piece completes (0 to 3).
func incompleteTail(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c < 0x80 {
			return 0
		}
		if c >= 0xC0 {
			if utf8SeqLen(c) > k {
				return k
			}
			return 0
		}
	}
	return 0
}
