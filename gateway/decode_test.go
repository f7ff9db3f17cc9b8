package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestInflaterEmitsEachFlushedPart: after Write returns for the compressed bytes of a sync-flushed
// part, everything up to and including that part has been emitted, for every coding. This is what
// lets the gateway find the terminal event in the chunk that completes it.
func TestInflaterEmitsEachFlushedPart(t *testing.T) {
	parts := [][]byte{
		[]byte("event: a\ndata: {\"x\":1}\n\n"),
		[]byte(strings.Repeat("data: filler filler filler\n\n", 200)),
		[]byte("data: [DONE]\n\n"),
	}
	for _, coding := range capturetest.Codings {
		t.Run(coding, func(t *testing.T) {
			var got bytes.Buffer
			f, err := newInflater([]string{capturetest.ContentEncoding(coding)}, func(p []byte) { got.Write(p) })
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			for i, c := range capturetest.Compress(coding, parts) {
				f.Write(c)
				want += len(parts[i])
				if got.Len() != want {
					t.Fatalf("after the compressed chunk of part %d: %d bytes decoded, want %d", i, got.Len(), want)
				}
			}
			if err := f.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if !bytes.Equal(got.Bytes(), bytes.Join(parts, nil)) {
				t.Fatal("decoded bytes differ")
			}
		})
	}
}

// TestInflaterSplitChunks: compressed bytes split at arbitrary points decode to the original.
func TestInflaterSplitChunks(t *testing.T) {
	plain := bytes.Repeat([]byte("data: {\"delta\":\"héllo wörld\"}\n\n"), 500)
	for _, coding := range capturetest.Codings {
		for _, size := range []int{1, 7, 100, 4096} {
			t.Run(fmt.Sprintf("%s/%d", coding, size), func(t *testing.T) {
				wire := bytes.Join(capturetest.Compress(coding, [][]byte{plain}), nil)
				var got bytes.Buffer
				f, err := newInflater([]string{capturetest.ContentEncoding(coding)}, func(p []byte) { got.Write(p) })
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < len(wire); i += size {
					f.Write(wire[i:min(i+size, len(wire))])
				}
				if err := f.Close(); err != nil || !bytes.Equal(got.Bytes(), plain) {
					t.Fatalf("Close %v, decoded %d of %d bytes", err, got.Len(), len(plain))
				}
			})
		}
	}
}

func TestInflaterErrors(t *testing.T) {
	wire := capturetest.Compress("gzip", [][]byte{[]byte("hello hello hello")})[0]
	t.Run("truncated", func(t *testing.T) {
		f, _ := newInflater([]string{"gzip"}, func([]byte) {})
		f.Write(wire[:len(wire)-4])
		if err := f.Close(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("Close = %v, want unexpected EOF", err)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		f, _ := newInflater([]string{"gzip"}, func([]byte) {})
		f.Write([]byte("this is not gzip at all"))
		f.Write([]byte("more bytes after the failure are dropped"))
		if err := f.Close(); err == nil {
			t.Fatal("Close = nil for garbage")
		}
	})
	t.Run("unknown coding", func(t *testing.T) {
		if _, err := newInflater([]string{"compress"}, func([]byte) {}); !errors.Is(err, errUnknownCoding) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("close without input", func(t *testing.T) {
		f, _ := newInflater([]string{"br"}, func([]byte) {})
		f.Close()
		f.Close() // twice is fine
	})
}

func TestDecodeAllStacked(t *testing.T) {
	plain := []byte(`{"model":"m","input":"hi"}`)
	inner := capturetest.Compress("gzip", [][]byte{plain})[0]
	outer := capturetest.Compress("br", [][]byte{inner})[0]
	got, err := decodeAll([]string{"gzip", "br"}, outer, 1<<20)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("decodeAll = %q, %v", got, err)
	}
	if _, err := decodeAll([]string{"gzip"}, inner, 5); !errors.Is(err, errTooLarge) {
		t.Fatalf("limit: err = %v", err)
	}
}

func TestContentCodings(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   string
	}{
		{nil, ""},
		{[]string{"identity"}, ""},
		{[]string{"GZIP"}, "gzip"},
		{[]string{"gzip, br"}, "gzip,br"},
		{[]string{"gzip", " zstd "}, "gzip,zstd"},
		{[]string{"identity, deflate"}, "deflate"},
	} {
		h := http.Header{}
		for _, v := range tc.values {
			h.Add("Content-Encoding", v)
		}
		if got := strings.Join(contentCodings(h), ","); got != tc.want {
			t.Errorf("contentCodings(%q) = %q, want %q", tc.values, got, tc.want)
		}
	}
}

// FuzzInflater: any split of a gzip stream decodes to the original, and garbage never hangs.
func FuzzInflater(f *testing.F) {
	f.Add([]byte("data: hello\n\n"), uint8(3), false)
	f.Add([]byte{}, uint8(1), true)
	f.Fuzz(func(t *testing.T, plain []byte, step uint8, garbage bool) {
		size := int(step%64) + 1
		wire := capturetest.Compress("gzip", [][]byte{plain})[0]
		if garbage {
			wire = plain
		}
		var got bytes.Buffer
		inf, err := newInflater([]string{"gzip"}, func(p []byte) { got.Write(p) })
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(wire); i += size {
			inf.Write(wire[i:min(i+size, len(wire))])
		}
		err = inf.Close()
		if !garbage && (err != nil || !bytes.Equal(got.Bytes(), plain)) {
			t.Fatalf("Close %v, decoded %q, want %q", err, got.Bytes(), plain)
		}
	})
}
