package record

import (
	"bytes"
	"fmt"
	"io"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
	"github.com/modelcalls/modelcalls/internal/schema"
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
	i := PayloadsAt(b)
	if i < 0 {
		return fmt.Errorf("write record: no tool_calls member in %.80s", b)
	}
	pw := &pieceWriter{w: w}
	pw.write(b[:i])
	pw.raw(`,"` + schema.Request + `":`)
	pw.value(r.Request)
	pw.raw(`,"` + schema.Response + `":`)
	pw.value(r.Response)
	pw.raw(`,"` + schema.RequestRaw + `":`)
	pw.rawText(r.RequestRaw)
	pw.raw(`,"` + schema.ResponseRaw + `":`)
	pw.rawText(r.ResponseRaw)
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

// rawText writes t as RawText.appendJSON does (null when nil), piece by piece: the token's body is
// cut into pieces of about 64 KiB just before an escape (never between the halves of an escaped
// surrogate pair), and each piece is written in AppendString's form.
func (p *pieceWriter) rawText(t RawText) {
	if t == nil {
		p.raw("null")
		return
	}
	if len(t) < 2 {
		p.write(appendStringToken(p.buf[:0], t))
		return
	}
	const piece = 64 << 10
	body := t[1 : len(t)-1]
	p.raw(`"`)
	for len(body) > 0 && p.err == nil {
		n := tokenPiece(body, piece)
		p.buf = appendTokenBody(p.buf[:0], body[:n])
		p.write(p.buf)
		body = body[n:]
	}
	p.raw(`"`)
}

// tokenPiece returns the length of the first piece of the token body s: all of s when it is at most
// size bytes, else the offset of the first escape at or past size (or len(s)), an escaped surrogate
// pair counting as one escape.
func tokenPiece(s []byte, size int) int {
	if len(s) <= size {
		return len(s)
	}
	i := 0
	for {
		k := bytes.IndexByte(s[i:], '\\')
		if k < 0 {
			return len(s)
		}
		i += k
		if i >= size {
			return i
		}
		switch {
		case i+1 < len(s) && s[i+1] == 'u':
			i += 6
			if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' && isHighSurrogate(s[i-6:]) {
				i += 6
			}
		default:
			i += 2
		}
		if i >= len(s) {
			return len(s)
		}
	}
}

// isHighSurrogate reports whether s starts with a \u escape of a UTF-16 high surrogate.
func isHighSurrogate(s []byte) bool {
	r, ok := jsonscan.Hex4(s, 2)
	return ok && r >= 0xD800 && r <= 0xDBFF
}
