package gateway

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// contentCodings returns the Content-Encoding codings of h in the order they were applied,
// lower-cased, with "identity" dropped (RFC 9110 section 8.4). nil means the body is not encoded.
func contentCodings(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if c != "" && c != "identity" {
				out = append(out, c)
			}
		}
	}
	return out
}

// errUnknownCoding reports a content coding the gateway cannot decode for capture.
var errUnknownCoding = errors.New("unsupported content coding")

// decodeReader returns a reader of src with codings (as applied, first to last) undone, and a
// function that releases decoder resources. Decoders are built lazily, so header reads (gzip) happen
// on the first Read, in the goroutine that reads.
func decodeReader(codings []string, src io.Reader) (io.Reader, func(), error) {
	for _, c := range codings {
		switch c {
		case "gzip", "x-gzip", "deflate", "br", "zstd":
		default:
			return nil, nil, fmt.Errorf("%w %q", errUnknownCoding, c)
		}
	}
	var closers []func()
	r := src
	for i := len(codings) - 1; i >= 0; i-- {
		r = &lazyDecoder{coding: codings[i], src: r, closers: &closers}
	}
	return r, func() {
		for _, c := range closers {
			c()
		}
	}, nil
}

// lazyDecoder opens its decoder on first Read.
type lazyDecoder struct {
	coding  string
	src     io.Reader
	closers *[]func()
	dec     io.Reader
	err     error
}

func (d *lazyDecoder) Read(p []byte) (int, error) {
	if d.dec == nil && d.err == nil {
		d.dec, d.err = d.open()
	}
	if d.err != nil {
		return 0, d.err
	}
	return d.dec.Read(p)
}

func (d *lazyDecoder) open() (io.Reader, error) {
	switch d.coding {
	case "gzip", "x-gzip":
		g := &gzipMembers{src: bufio.NewReader(d.src)}
		if err := g.next(); err != nil {
			return nil, fmt.Errorf("gzip: %w", noEOF(err))
		}
		*d.closers = append(*d.closers, func() { g.zr.Close() })
		return g, nil
	case "deflate":
		// RFC 9110 says zlib-wrapped; some servers send raw deflate. A zlib header is a CMF byte
		// with method 8 whose 16-bit big-endian value with FLG is a multiple of 31.
		br := bufio.NewReader(d.src)
		hdr, err := br.Peek(2)
		if err != nil {
			return nil, fmt.Errorf("deflate: %w", noEOF(err))
		}
		if hdr[0]&0x0f == 8 && (uint16(hdr[0])<<8|uint16(hdr[1]))%31 == 0 {
			zr, err := zlib.NewReader(br)
			if err != nil {
				return nil, fmt.Errorf("deflate: %w", err)
			}
			*d.closers = append(*d.closers, func() { zr.Close() })
			return zr, nil
		}
		fr := flate.NewReader(br)
		*d.closers = append(*d.closers, func() { fr.Close() })
		return fr, nil
	case "br":
		return brotli.NewReader(d.src), nil
	case "zstd":
		// One goroutine, bounded window: the decoder only serves the capture copy.
		zr, err := zstd.NewReader(d.src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(128<<20))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		*d.closers = append(*d.closers, zr.Close)
		return zr, nil
	}
	return nil, fmt.Errorf("%w %q", errUnknownCoding, d.coding)
}

// gzipMembers reads a gzip stream member by member. gzip.Reader's own multistream mode reads the
// next member's header before it returns the last bytes of the current one; with a live stream that
// would keep decoded bytes (a terminal event) back until more input arrives. Here each member ends
// with its bytes returned, and the next header is read only on the next Read.
type gzipMembers struct {
	src *bufio.Reader
	zr  *gzip.Reader
	eof bool // the current member is done
}

func (g *gzipMembers) next() error {
	if g.zr == nil {
		zr, err := gzip.NewReader(g.src)
		if err != nil {
			return err
		}
		g.zr = zr
	} else if err := g.zr.Reset(g.src); err != nil {
		return err
	}
	g.zr.Multistream(false)
	g.eof = false
	return nil
}

func (g *gzipMembers) Read(p []byte) (int, error) {
	if g.eof {
		if err := g.next(); err != nil {
			if err == io.EOF {
				return 0, io.EOF // no further member: a clean end
			}
			return 0, fmt.Errorf("gzip: %w", err)
		}
	}
	n, err := g.zr.Read(p)
	if err == io.EOF {
		g.eof = true
		err = nil
		if n == 0 {
			return g.Read(p)
		}
	}
	return n, err
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// decodeAll undoes codings on a whole body, reading at most max decoded bytes (errTooLarge beyond).
func decodeAll(codings []string, body []byte, max int64) ([]byte, error) {
	r, release, err := decodeReader(codings, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	defer release()
	out, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("decode body: %w", err)
	}
	if int64(len(out)) > max {
		return nil, errTooLarge
	}
	return out, nil
}

// inflater decodes a compressed body incrementally, for capture only: Write hands it the bytes of
// one upstream read and returns once the decoder has consumed them and emitted (through out) every
// decoded byte it can produce without more input. Decoders pull from a reader, so one runs in its
// own goroutine; Write and that goroutine take turns (never run at once), so out needs no locking.
type inflater struct {
	in   chan []byte   // compressed chunks, caller -> decoder
	ack  chan struct{} // decoder consumed its chunk and wants more
	done chan struct{} // decoder goroutine has exited
	err  error         // decode error, readable after done
	out  func([]byte)

	cur     []byte
	started bool
	closed  bool
}

// newInflater starts decoding codings; out receives decoded bytes in order.
func newInflater(codings []string, out func([]byte)) (*inflater, error) {
	// ack has room for one signal, so the decoder never blocks on it: every chunk gets exactly one
	// ack (or done), which the Write that sent the chunk receives.
	f := &inflater{in: make(chan []byte), ack: make(chan struct{}, 1), done: make(chan struct{}), out: out}
	dec, release, err := decodeReader(codings, feedReader{f})
	if err != nil {
		return nil, err
	}
	go f.run(dec, release)
	return f, nil
}

func (f *inflater) run(dec io.Reader, release func()) {
	defer close(f.done)
	defer release()
	buf := make([]byte, 32<<10)
	for {
		n, err := dec.Read(buf)
		if n > 0 {
			f.out(buf[:n])
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			f.err = err
			return
		}
	}
}

// feedReader is the decoder's source: the chunks handed to Write.
type feedReader struct{ f *inflater }

func (r feedReader) Read(p []byte) (int, error) {
	f := r.f
	for len(f.cur) == 0 {
		if f.started {
			f.ack <- struct{}{}
		}
		chunk, ok := <-f.in
		if !ok {
			return 0, io.EOF
		}
		f.started = true
		f.cur = chunk
	}
	n := copy(p, f.cur)
	f.cur = f.cur[n:]
	return n, nil
}

// Write feeds one chunk (not retained after Write returns). After the decoder failed, chunks are
// dropped; Close reports the failure.
func (f *inflater) Write(p []byte) {
	if len(p) == 0 || f.closed {
		return
	}
	select {
	case f.in <- p:
	case <-f.done:
		return
	}
	select {
	case <-f.ack:
	case <-f.done:
	}
}

// Close ends the input and waits for the decoder to finish; it returns the decode error, if any (a
// body cut short gives io.ErrUnexpectedEOF). Safe to call twice.
func (f *inflater) Close() error {
	if !f.closed {
		f.closed = true
		close(f.in)
	}
	<-f.done
	return f.err
}
