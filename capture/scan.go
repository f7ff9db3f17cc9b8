package capture

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
)

// Incremental reads: a reader that keeps a capture file's lines indexed (a viewer) reads each line
// once, as it is appended, and later reads one line by its offset, instead of reading the whole file
// again for every change and every look at one call.

// Resume is where an incremental read (ScanFrom) of a capture file goes on: after the last complete
// line it read. It also identifies the file and the bytes before that point, so that a file cleared,
// replaced or rewritten since is reported (ErrRewritten) rather than read from the middle of another
// file's line. The zero Resume reads from the start.
type Resume struct {
	Offset int64 // bytes of the complete lines read
	Index  int   // capture index of the next non-blank line
	Line   int   // lines read (the next line's 1-based number is Line+1)

	dev, ino uint64
	tail     uint64 // FNV-1a of the up to tailBytes bytes before Offset
}

// tailBytes is how much of the file before a Resume's offset is compared to tell an appended file
// from a rewritten one: the end of the last line read (its model_call_id, timestamps and payloads).
const tailBytes = 4096

// scanChunk is the first size of ScanFrom's buffer; it grows to hold the longest line.
const scanChunk = 64 << 10

// ErrRewritten is returned by ScanFrom and ReadLineAt when the capture file is no longer the one
// the Resume or offset came from: it was removed, replaced, truncated or rewritten. Read it again
// from the zero Resume.
var ErrRewritten = errors.New("capture file changed other than by appending")

// ScannedLine is one non-blank line found by ScanFrom.
type ScannedLine struct {
	Index  int   // capture index (as in Entry)
	Line   int   // 1-based line number
	Offset int64 // offset of the line's first byte in the file
	// Data is the line without its newline. It aliases ScanFrom's buffer: valid only during fn.
	Data []byte
	// Complete is false for a last line without a newline (yet): the tolerant read counts it, but
	// the returned Resume stays before it, so the next ScanFrom reads it again, whole or not.
	Complete bool
}

// ScanFrom is the incremental form of ScanAvailable: under the same shared lock it calls fn with
// every non-blank line of id from from on, in file order, and returns where the next scan goes on.
// Memory is one buffer as large as the longest line read, whatever the file size. Lines are not
// checked: fn decides what is damaged (CheckLine is the tolerant read's rule). A missing file gives
// nothing and the zero Resume when from is the zero Resume, ErrRewritten otherwise; ErrRewritten
// also when the file is another (device and inode), shorter than from.Offset, or holds other bytes
// before it. I/O errors, a directory and an invalid id are returned as by ScanAvailable.
func (s *Store) ScanFrom(id string, from Resume, fn func(l ScannedLine)) (Resume, error) {
	p, fd, st, err := s.openShared(id)
	if err != nil {
		return from, err
	}
	if fd == noFile {
		if from.Offset > 0 || from.Line > 0 {
			return Resume{}, ErrRewritten
		}
		return Resume{}, nil
	}
	defer closeShared(fd)
	dev, ino := st.Dev, st.Ino
	if from.Offset > 0 || from.Line > 0 {
		if dev != from.dev || ino != from.ino || st.Size < from.Offset {
			return Resume{}, ErrRewritten
		}
		h, err := tailHash(fd, from.Offset)
		if err != nil {
			return from, readError(p, err)
		}
		if h != from.tail {
			return Resume{}, ErrRewritten
		}
	}
	at := from
	buf := make([]byte, 0, scanChunk)
	off := from.Offset // file offset of buf[0]
	eof := false
	for {
		// Hand out every complete line in buf.
		start := 0
		for {
			i := bytes.IndexByte(buf[start:], '\n')
			if i < 0 {
				break
			}
			b := buf[start : start+i]
			at.Line++
			if !isBlank(b) {
				fn(ScannedLine{Index: at.Index, Line: at.Line, Offset: off + int64(start), Data: b, Complete: true})
				at.Index++
			}
			start += i + 1
		}
		at.Offset = off + int64(start)
		if eof {
			if b := buf[start:]; len(b) > 0 && !isBlank(b) {
				fn(ScannedLine{Index: at.Index, Line: at.Line + 1, Offset: at.Offset, Data: b})
			}
			break
		}
		// Keep the partial line at the front, grow when it fills the buffer, read on.
		n := copy(buf, buf[start:])
		buf, off = buf[:n], at.Offset
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:n]
		}
		m, err := preadSome(fd, buf[n:cap(buf)], off+int64(n))
		if err != nil {
			return from, readError(p, err)
		}
		if m == 0 {
			eof = true
		}
		buf = buf[:n+m]
	}
	at.dev, at.ino = dev, ino
	if at.tail, err = tailHash(fd, at.Offset); err != nil {
		return from, readError(p, err)
	}
	return at, nil
}

// ReadLineAt reads the n bytes of the line of id at offset off, as ScanFrom reported it
// (ScannedLine.Offset and len(Data)), under the shared lock. The bytes must still be one whole
// line there: at the start of the file or after a newline, and followed by a newline or the end of
// the file; otherwise the file was rewritten and the error is ErrRewritten (also for a missing
// file). The line is not checked.
func (s *Store) ReadLineAt(id string, off int64, n int) ([]byte, error) {
	p, fd, st, err := s.openShared(id)
	if err != nil {
		return nil, err
	}
	if fd == noFile {
		return nil, ErrRewritten
	}
	defer closeShared(fd)
	if off < 0 || n < 0 || off+int64(n) > st.Size {
		return nil, ErrRewritten
	}
	// One byte before the line and one after it come with it, to check its boundaries.
	from := max(off-1, 0)
	buf := make([]byte, int(off-from)+n+1)
	got, err := preadFull(fd, buf, from)
	if err != nil {
		return nil, readError(p, err)
	}
	buf = buf[:got]
	if off > 0 && buf[0] != '\n' {
		return nil, ErrRewritten
	}
	line := buf[off-from:]
	switch {
	case len(line) == n: // the end of the file
	case len(line) == n+1 && line[n] == '\n':
		line = line[:n]
	default:
		return nil, ErrRewritten
	}
	return line, nil
}

// tailHash hashes the up to tailBytes bytes of fd before off.
func tailHash(fd rfile, off int64) (uint64, error) {
	from := max(off-tailBytes, 0)
	var b [tailBytes]byte
	got, err := preadFull(fd, b[:off-from], from)
	if err != nil {
		return 0, err
	}
	h := fnv.New64a()
	h.Write(b[:got])
	return h.Sum64(), nil
}

// preadFull reads until b is full or the file ends, and returns how much it read.
func preadFull(fd rfile, b []byte, off int64) (int, error) {
	got := 0
	for got < len(b) {
		n, err := preadSome(fd, b[got:], off+int64(got))
		if err != nil {
			return got, err
		}
		if n == 0 {
			break
		}
		got += n
	}
	return got, nil
}

func readError(p string, err error) error {
	return fmt.Errorf("read capture file: %w", &os.PathError{Op: "read", Path: p, Err: err})
}
