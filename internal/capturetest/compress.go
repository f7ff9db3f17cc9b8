package capturetest

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// Codings are the content codings the gateway decodes for the capture: gzip, deflate (zlib-wrapped,
// what HTTP means by it), raw-deflate (bare DEFLATE, which some servers send as "deflate"), br and
// zstd.
var Codings = []string{"gzip", "deflate", "raw-deflate", "br", "zstd"}

// ContentEncoding is the Content-Encoding header value of one of Codings.
func ContentEncoding(coding string) string {
	if coding == "raw-deflate" {
		return "deflate"
	}
	return coding
}

type flushWriter interface {
	io.WriteCloser
	Flush() error // emit everything written so far (sync flush)
}

func newEncoder(coding string, w io.Writer) flushWriter {
	switch coding {
	case "gzip":
		return gzip.NewWriter(w)
	case "deflate":
		return zlib.NewWriter(w)
	case "raw-deflate":
		fw, _ := flate.NewWriter(w, flate.BestSpeed)
		return fw
	case "br":
		return brotli.NewWriter(w)
	case "zstd":
		zw, _ := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
		return zw
	}
	panic("capturetest: unknown coding " + coding)
}

// Compress compresses parts as one stream with coding, sync-flushing after each part and closing
// the stream after the last, and returns the compressed bytes produced for each part: what an
// upstream sends as one chunk per event.
func Compress(coding string, parts [][]byte) [][]byte {
	var buf bytes.Buffer
	w := newEncoder(coding, &buf)
	out := make([][]byte, len(parts))
	for i, p := range parts {
		w.Write(p)
		if i == len(parts)-1 {
			w.Close()
		} else {
			w.Flush()
		}
		out[i] = bytes.Clone(buf.Bytes())
		buf.Reset()
	}
	return out
}
