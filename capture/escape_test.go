package capture

import (
	"bytes"
	"testing"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// escapeInPieces escapes text with a TextEscaper, cut at the given offsets.
func escapeInPieces(text []byte, cuts []int) []byte {
	var t TextEscaper
	var out []byte
	prev := 0
	for _, c := range cuts {
		c = min(max(c, prev), len(text))
		out = t.Append(out, text[prev:c])
		prev = c
	}
	out = t.Append(out, text[prev:])
	return t.Flush(out)
}

// TestTextEscaperPieces checks that escaping in pieces gives the bytes the line writer gives for
// the whole text, wherever the cuts fall: inside multi-byte sequences, inside invalid ones, and
// at a truncated end.
func TestTextEscaperPieces(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
	}{
		{"ascii and escapes", "data: {\"a\":\"b\\\\c\"}\n\n\t\r\x01"},
		{"two, three and four byte sequences", "é€😀 é€😀"},
		{"invalid bytes", "a\xffb\xc0\x80c\xe0\x80\x80d\xed\xa0\x80e"},
		{"truncated at the end", "x€"[:3]},
		{"lone continuation bytes", "\x80\x80\x80\x80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := []byte(tc.text)
			want := jsonscan.AppendEscaped(nil, text)
			for a := 0; a <= len(text); a++ {
				for b := a; b <= len(text); b++ {
					if got := escapeInPieces(text, []int{a, b}); !bytes.Equal(got, want) {
						t.Fatalf("cut at %d and %d: %q, want %q", a, b, got, want)
					}
				}
			}
		})
	}
}

// FuzzTextEscaper checks the same for any text and any three cuts.
func FuzzTextEscaper(f *testing.F) {
	f.Add([]byte("é€😀\xff\xe2\x82"), 1, 2, 5)
	f.Add([]byte("data: {\"x\":\"\\n\"}\n\n"), 0, 7, 30)
	f.Fuzz(func(t *testing.T, text []byte, a, b, c int) {
		cuts := []int{abs(a) % (len(text) + 1), abs(b) % (len(text) + 1), abs(c) % (len(text) + 1)}
		want := jsonscan.AppendEscaped(nil, text)
		if got := escapeInPieces(text, cuts); !bytes.Equal(got, want) {
			t.Fatalf("cuts %v: %q, want %q", cuts, got, want)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
