package jsonl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestReaderKeepsBytes(t *testing.T) {
	big := strings.Repeat("x", 3<<20) // larger than the reader's buffer
	tests := []struct {
		name  string
		in    string
		lines []string // body|eol
	}{
		{"empty input", "", nil},
		{"lf lines", "a\nb\n", []string{"a|\n", "b|\n"}},
		{"crlf kept", "a\r\nb\n", []string{"a|\r\n", "b|\n"}},
		{"no final newline", "a\nb", []string{"a|\n", "b|"}},
		{"blank lines count", "\n\na\n", []string{"|\n", "|\n", "a|\n"}},
		{"lone cr stays in the body", "a\rb\n", []string{"a\rb|\n"}},
		{"huge line", big + "\n{}\n", []string{big + "|\n", "{}|\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lr := NewReader(strings.NewReader(tc.in))
			var got []string
			var round bytes.Buffer
			for {
				l, ok, err := lr.Next()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				if l.Num != len(got)+1 {
					t.Errorf("line number %d; want %d", l.Num, len(got)+1)
				}
				got = append(got, string(l.Body)+"|"+string(l.EOL))
				round.Write(l.Body)
				round.Write(l.EOL)
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.lines) {
				if len(tc.in) < 100 {
					t.Errorf("lines = %q; want %q", got, tc.lines)
				} else {
					t.Errorf("got %d lines; want %d", len(got), len(tc.lines))
				}
			}
			if round.String() != tc.in {
				t.Errorf("body+eol does not reproduce the input")
			}
			if lr.Offset() != int64(len(tc.in)) {
				t.Errorf("read = %d; want %d", lr.Offset(), len(tc.in))
			}
		})
	}
}

type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

func TestReaderError(t *testing.T) {
	bad := errors.New("eio")
	lr := NewReader(io.MultiReader(strings.NewReader("a\n"), failingReader{bad}))
	if _, ok, err := lr.Next(); !ok || err != nil {
		t.Fatalf("first line: ok %v err %v", ok, err)
	}
	if _, _, err := lr.Next(); !errors.Is(err, bad) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("err = %v; want the read error naming line 2", err)
	}
}

// FuzzReader: the lines' bodies and terminators reproduce the input exactly, bodies hold no
// '\n', and numbering is 1, 2, 3, ...
func FuzzReader(f *testing.F) {
	for _, s := range []string{"", "\n", "a\r\nb", "{}\n\n{\"a\":1}\r\n", "\r\r\n\n\r"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		lr := NewReader(bytes.NewReader(in))
		var round []byte
		for n := 1; ; n++ {
			l, ok, err := lr.Next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if l.Num != n || bytes.IndexByte(l.Body, '\n') >= 0 {
				t.Fatalf("line %d: num %d body %q", n, l.Num, l.Body)
			}
			if len(l.EOL) == 0 && lr.Offset() != int64(len(in)) {
				t.Fatalf("line %d has no terminator but is not the last", n)
			}
			round = append(append(round, l.Body...), l.EOL...)
		}
		if !bytes.Equal(round, in) {
			t.Fatalf("lines reproduce %q; input %q", round, in)
		}
	})
}
