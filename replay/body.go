package replay

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// maxRequestBytes bounds a request body read for matching, before and after decoding (the
// gateway's default limit).
const maxRequestBytes = 64 << 20

// readBody reads the request body and undoes its Content-Encoding (gzip, x-gzip, deflate as zlib,
// br, zstd, stacked codings in reverse order), since the capture stores a request decoded: the
// decoded bytes are what is matched. The raw bytes are returned too, for forwarding.
func readBody(r *http.Request) (decoded, raw []byte, err error) {
	if r.Body == nil {
		return nil, nil, nil
	}
	raw, err = io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
	if err != nil {
		return nil, nil, err
	}
	if len(raw) > maxRequestBytes {
		return nil, nil, fmt.Errorf("larger than %d bytes", maxRequestBytes)
	}
	var codings []string
	for _, v := range r.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	decoded = raw
	for _, c := range slices.Backward(codings) {
		if decoded, err = decode(c, decoded); err != nil {
			return nil, nil, fmt.Errorf("Content-Encoding %s: %w", c, err)
		}
	}
	return decoded, raw, nil
}

func decode(coding string, b []byte) ([]byte, error) {
	var r io.Reader
	switch coding {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		r = zr
	case "deflate":
		zr, err := zlib.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		r = zr
	case "br":
		r = brotli.NewReader(bytes.NewReader(b))
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	default:
		return nil, fmt.Errorf("unsupported coding")
	}
	out, err := io.ReadAll(io.LimitReader(r, maxRequestBytes+1))
	if err == nil && len(out) > maxRequestBytes {
		err = fmt.Errorf("decodes to more than %d bytes", maxRequestBytes)
	}
	return out, err
}
