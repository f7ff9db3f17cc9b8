// Package jsonl reads JSON Lines input line by line, of any line length, keeping each line's
// terminator apart so a writer can reproduce the input byte for byte.
package jsonl

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Line is one input line: its 1-based number, the content without the line terminator, and the
// terminator exactly as read ("\n", "\r\n", or "" for a last line without one).
type Line struct {
	Num  int
	Body []byte
	EOL  []byte
}

var (
	eolLF   = []byte("\n")
	eolCRLF = []byte("\r\n")
)

// Reader reads lines of any length from r (bufio.Reader, not Scanner: rollout records can be
// many megabytes) keeping the terminator apart so output can reproduce the input byte for byte.
type Reader struct {
	r    *bufio.Reader
	num  int
	read int64 // bytes consumed so far
}

// NewReader returns a Reader of r with a 1 MiB buffer.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 1<<20)}
}

// Lines returns how many lines have been read so far (the number of the last one).
func (lr *Reader) Lines() int { return lr.num }

// Offset returns how many bytes of input have been consumed so far.
func (lr *Reader) Offset() int64 { return lr.read }

// Next returns the next line; ok is false at the end of input. A read error names the line it
// happened in.
func (lr *Reader) Next() (Line, bool, error) {
	b, err := lr.r.ReadBytes('\n')
	if len(b) == 0 {
		if err == nil || errors.Is(err, io.EOF) {
			return Line{}, false, nil
		}
		return Line{}, false, fmt.Errorf("read line %d: %w", lr.num+1, err)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return Line{}, false, fmt.Errorf("read line %d: %w", lr.num+1, err)
	}
	lr.num++
	lr.read += int64(len(b))
	l := Line{Num: lr.num, Body: b}
	switch {
	case bytes.HasSuffix(b, eolCRLF):
		l.Body, l.EOL = b[:len(b)-2], eolCRLF
	case bytes.HasSuffix(b, eolLF):
		l.Body, l.EOL = b[:len(b)-1], eolLF
	}
	return l, true, nil
}
