package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// spool holds one body: in memory up to limit bytes, then in an anonymous temp file (created in dir,
// unlinked at once where the OS allows, so a crash leaves nothing behind). Not safe for concurrent use.
type spool struct {
	limit int64
	dir   string

	mem      []byte
	f        *os.File
	unlinked bool  // the temp file's name is already gone
	size     int64 // bytes written so far
	err      error // first write error; the spool is then unusable
}

func newSpool(limit int64, dir string) *spool { return &spool{limit: limit, dir: dir} }

// Write appends p. After the first failure it keeps failing with the same error.
func (s *spool) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.f == nil && s.size+int64(len(p)) <= s.limit {
		s.mem = append(s.mem, p...)
		s.size += int64(len(p))
		return len(p), nil
	}
	if s.f == nil {
		if err := s.toFile(); err != nil {
			s.err = err
			return 0, err
		}
	}
	n, err := s.f.Write(p)
	s.size += int64(n)
	if err != nil {
		s.err = fmt.Errorf("write body spool: %w", err)
		return n, s.err
	}
	return n, nil
}

// toFile moves the in-memory bytes to a new temp file.
func (s *spool) toFile() error {
	f, err := os.CreateTemp(s.dir, "modelcalls-body-*")
	if err != nil {
		return fmt.Errorf("create body spool: %w", err)
	}
	s.unlinked = os.Remove(f.Name()) == nil
	s.f = f
	if _, err := f.Write(s.mem); err != nil {
		return fmt.Errorf("write body spool: %w", err)
	}
	s.mem = nil
	return nil
}

// Size is the number of bytes written.
func (s *spool) Size() int64 { return s.size }

// Err is the first write error, if any.
func (s *spool) Err() error { return s.err }

// Memory returns the body when it is all in memory (ok false once spooled to the file).
func (s *spool) Memory() (b []byte, ok bool) { return s.mem, s.f == nil }

// Bytes returns the whole body, reading it back from the file when spooled; max bounds what a
// spooled body may cost in memory (errTooLarge beyond it).
func (s *spool) Bytes(max int64) ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.f == nil {
		return s.mem, nil
	}
	if s.size > max {
		return nil, errTooLarge
	}
	b := make([]byte, s.size)
	if _, err := s.f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read body spool: %w", err)
	}
	return b, nil
}

var errTooLarge = errors.New("body too large to parse in memory")

// Reader returns a reader over the whole body from its start; it does not disturb later Writes.
func (s *spool) Reader() io.Reader {
	if s.f == nil {
		return bytes.NewReader(s.mem)
	}
	return io.NewSectionReader(s.f, 0, s.size)
}

// Close releases the temp file (and memory); the spool must not be used afterwards.
func (s *spool) Close() error {
	s.mem = nil
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	if !s.unlinked {
		if rerr := os.Remove(s.f.Name()); rerr != nil && err == nil && !errors.Is(rerr, os.ErrNotExist) {
			err = rerr
		}
	}
	s.f = nil
	return err
}
