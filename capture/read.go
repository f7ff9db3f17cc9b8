package capture

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"unicode/utf8"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// Entry is one readable exchange line.
type Entry struct {
	// Index is the capture index: the 0-based position of the line among the non-blank lines of the
	// file. Damaged lines consume an index, blank lines do not (as in NeMo Gym's tolerant read).
	Index int
	// Line is the 1-based line number in the file, for messages.
	Line int
	// Data is the JSON object, exactly as stored (without the newline). It aliases the read buffer.
	Data []byte
}

// Damage describes one damaged (unreadable) line found by ReadAvailable.
type Damage struct {
	Index int   // capture index the line consumed
	Line  int   // 1-based line number in the file
	Err   error // why it is damaged
}

// LineError is returned by the strict Read for the first damaged line: Path and the 1-based Line
// number locate it, Err says what is wrong.
type LineError struct {
	Path string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err) }

// Unwrap returns the underlying decode error.
func (e *LineError) Unwrap() error { return e.Err }

// ErrNotObject is the error of a line that is valid JSON but not a JSON object.
var ErrNotObject = errors.New("not a JSON object")

// ErrInvalidUTF8 is the error of a line that is not valid UTF-8 (NeMo Gym's orjson rejects those).
var ErrInvalidUTF8 = errors.New("invalid UTF-8")

// Read is the strict read: it returns every exchange of id in file order. A missing
// file gives no entries and no error. Blank lines are skipped; the first line that is not a valid
// UTF-8 JSON object stops the read with a *LineError naming the file and line. NaN and Infinity are
// not JSON. I/O errors and an invalid id are returned as is.
func (s *Store) Read(id string) ([]Entry, error) {
	p, data, err := s.readLocked(id)
	if err != nil || data == nil {
		return nil, err
	}
	var entries []Entry
	var lineErr error
	scanLines(data, func(index, line int, b []byte) bool {
		if err := CheckLine(b); err != nil {
			lineErr = &LineError{Path: p, Line: line, Err: err}
			return false
		}
		entries = append(entries, Entry{Index: index, Line: line, Data: b})
		return true
	})
	if lineErr != nil {
		return nil, lineErr
	}
	return entries, nil
}

// ReadAvailable is the tolerant read, as NeMo Gym's read_available: it returns every readable
// exchange of id with its capture index, and one Damage per line that is not a valid UTF-8 JSON
// object. A missing file gives nothing and no error. Only decode problems are tolerated: I/O errors,
// a path that is a directory and an invalid id are returned.
func (s *Store) ReadAvailable(id string) ([]Entry, []Damage, error) {
	_, data, err := s.readLocked(id)
	if err != nil || data == nil {
		return nil, nil, err
	}
	var entries []Entry
	var damaged []Damage
	scanLines(data, func(index, line int, b []byte) bool {
		if err := CheckLine(b); err != nil {
			damaged = append(damaged, Damage{Index: index, Line: line, Err: err})
			return true
		}
		entries = append(entries, Entry{Index: index, Line: line, Data: b})
		return true
	})
	return entries, damaged, nil
}

// ScanAvailable is the tolerant read for a reader that checks each line itself while it parses it,
// so that a line is walked once: it calls fn with every non-blank line of id in file order, with
// its capture index and 1-based line number, under the same shared lock as ReadAvailable. fn decides
// what is damaged; to agree with ReadAvailable a line is readable exactly when CheckLine accepts
// it. b aliases the read buffer, which the read keeps no other reference to. A missing file calls
// fn never and gives no error; I/O errors, a path that is a directory and an invalid id are
// returned.
func (s *Store) ScanAvailable(id string, fn func(index, line int, b []byte)) error {
	_, err := s.ScanAvailableBuffer(id, nil, fn)
	return err
}

// ScanAvailableBuffer is ScanAvailable reading the file into buf's memory (from its start, whatever
// its length) when its capacity holds the file, else into a new buffer; it returns the buffer the
// file was read into (buf when no file was read), so that a caller whose lines do not outlive fn's
// use of them (a merge, which drops a rollout's records once its line is written) reads every
// rollout into one buffer instead of allocating, zeroing and collecting one per file.
func (s *Store) ScanAvailableBuffer(id string, buf []byte, fn func(index, line int, b []byte)) ([]byte, error) {
	_, data, err := s.readLockedInto(id, buf)
	if err != nil || data == nil {
		return buf, err
	}
	scanLines(data, func(index, line int, b []byte) bool {
		fn(index, line, b)
		return true
	})
	return data, nil
}

// readLocked reads the whole capture file of id under a shared lock. A missing file gives nil data.
//
// A merge reads thousands of small files: the file is handled through its descriptor with plain
// system calls (open, flock, fstat, read until end of file, unlock, close) and no *os.File, whose
// setup (non-blocking mode probes, a cleanup registered per file) cost more system calls than the
// read itself. The descriptor is opened non-blocking so that a FIFO in the store cannot block the
// open; it is made blocking again only when the path is not a regular file.
func (s *Store) readLocked(id string) (string, []byte, error) {
	return s.readLockedInto(id, nil)
}

// readLockedInto is readLocked reading into buf's memory when its capacity holds the file (see
// ScanAvailableBuffer); a file that outgrows it is read into a new buffer.
func (s *Store) readLockedInto(id string, buf []byte) (string, []byte, error) {
	p, fd, st, err := s.openShared(id)
	if err != nil || fd == noFile {
		return p, nil, err
	}
	defer closeShared(fd)
	// One byte more than the file: the read that sees end of file needs no growth.
	if want := max(st.Size, 0) + 1; int64(cap(buf)) < want {
		buf = make([]byte, 0, want)
	}
	// A regular file is read up to its size: under the shared lock no writer that locks can
	// change it, so the read that would confirm end of file is skipped (a file that grew since
	// fstat fills the spare byte, and is read on to its end).
	until := int64(-1)
	if st.Regular {
		until = st.Size
	}
	data, err := readAll(fd, buf[:0], until)
	if err != nil {
		return p, nil, fmt.Errorf("read capture file: %w", &os.PathError{Op: "read", Path: p, Err: err})
	}
	return p, data, nil
}

// scanLines calls fn for each non-blank line of data with its capture index and 1-based line number;
// fn returns false to stop. A line is blank when only ASCII whitespace remains after trimming.
func scanLines(data []byte, fn func(index, line int, b []byte) bool) {
	index, lineNo := 0, 0
	for len(data) > 0 {
		lineNo++
		var b []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			b, data = data[:i], data[i+1:]
		} else {
			b, data = data, nil
		}
		if isBlank(b) {
			continue
		}
		if !fn(index, lineNo, b) {
			return
		}
		index++
	}
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '\v' && c != '\f' {
			return false
		}
	}
	return true
}

// CheckLine reports why b is not a readable exchange line: not valid UTF-8 (ErrInvalidUTF8), not
// valid strict JSON (a *jsonscan.SyntaxError with the byte offset; NaN and Infinity are invalid),
// or not a JSON object (ErrNotObject). nil means readable.
func CheckLine(b []byte) error {
	if err := jsonscan.Validate(b); err != nil {
		if !utf8.Valid(b) {
			return ErrInvalidUTF8
		}
		return err
	}
	if b[jsonscan.SkipWS(b, 0)] != '{' {
		return ErrNotObject
	}
	return nil
}

// fileStat is what readers use of an open capture file's status: its identity (device and inode,
// or on Windows volume serial number and file index), its size and whether it is a regular file.
type fileStat struct {
	Dev, Ino uint64
	Size     int64
	Regular  bool
}
