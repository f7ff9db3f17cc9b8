package modelcalls

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// WriteJSON writes r to w exactly as AppendJSON(nil, payloads) would, without building the line
// in memory: the payloads (request, response, request_raw, response_raw, which can be hundreds
// of MiB for a streamed response) go to w as they are, or escaped in 64 KiB pieces, so writing a
// record costs no copy of its payloads. Readers that print records use it to stay within about
// twice the largest capture line they read.
func (r *ModelCallRecord) WriteJSON(w io.Writer, payloads bool) error {
	b := r.AppendJSON(nil, false)
	if !payloads {
		_, err := w.Write(b)
		return err
	}
	// The payload members sit just before "tool_calls". A JSON string never holds an unescaped
	// quote, so the first `,"tool_calls":` of the line is that key.
	i := bytes.Index(b, []byte(`,"tool_calls":`))
	if i < 0 {
		return fmt.Errorf("write record: no tool_calls member in %.80s", b)
	}
	pw := &pieceWriter{w: w}
	pw.write(b[:i])
	pw.raw(`,"request":`)
	pw.value(r.Request)
	pw.raw(`,"response":`)
	pw.value(r.Response)
	pw.raw(`,"request_raw":`)
	pw.optString(r.RequestRaw)
	pw.raw(`,"response_raw":`)
	pw.optString(r.ResponseRaw)
	pw.write(b[i:])
	return pw.err
}

// pieceWriter writes to w and remembers the first error.
type pieceWriter struct {
	w   io.Writer
	err error
	buf []byte
}

func (p *pieceWriter) write(b []byte) {
	if p.err == nil {
		_, p.err = p.w.Write(b)
	}
}

func (p *pieceWriter) raw(s string) { p.write([]byte(s)) }

// value writes a raw JSON payload as appendRaw does: as it is unless it spans lines.
func (p *pieceWriter) value(v []byte) {
	if len(v) > 0 && bytes.IndexByte(v, '\n') < 0 && bytes.IndexByte(v, '\r') < 0 {
		p.write(v)
		return
	}
	p.write(appendRaw(nil, v))
}

// optString writes s as a JSON string (null when nil), escaping it piece by piece; pieces end on
// rune boundaries, so a multi-byte character is never split.
func (p *pieceWriter) optString(s *string) {
	if s == nil {
		p.raw("null")
		return
	}
	const piece = 64 << 10
	t := *s
	p.raw(`"`)
	for len(t) > 0 && p.err == nil {
		n := min(len(t), piece)
		for n < len(t) && n > 0 && !utf8.RuneStart(t[n]) {
			n--
		}
		if n == 0 {
			n = min(len(t), piece)
		}
		p.buf = jsonscan.AppendEscaped(p.buf[:0], t[:n])
		p.write(p.buf)
		t = t[n:]
	}
	p.raw(`"`)
}
