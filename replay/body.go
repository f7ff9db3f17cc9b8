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
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/modelcalls/modelcalls/gateway"
)

// readBody reads the request body with the request hygiene of the capture gateway
// (gateway.ReadRequestBody: at most limit bytes, each read under timeout) and undoes its
// Content-Encoding (gzip, x-gzip, deflate as zlib, br, zstd, stacked codings in reverse order), since
// the capture stores a request decoded: the decoded bytes are what is matched, at most limit of them
// too. The raw bytes are returned too, for forwarding.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) (decoded, raw []byte, err error) {
	raw, err = gateway.ReadRequestBody(w, r, limit, timeout)
	if err != nil {
		return nil, nil, err
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
		if decoded, err = decode(c, decoded, limit); err != nil {
			return nil, nil, fmt.Errorf("Content-Encoding %s: %w", c, err)
		}
	}
	return decoded, raw, nil
}

// decode undoes one coding, reading at most limit decoded bytes (negative: no limit).
func decode(coding string, b []byte, limit int64) ([]byte, error) {
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
	if limit < 0 {
		return io.ReadAll(r)
	}
	out, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err == nil && int64(len(out)) > limit {
		err = fmt.Errorf("decodes to more than %d bytes", limit)
	}
	return out, err
}
