package cli

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
)

// output is where merged lines go: stdout, or a temp file next to --out that replaces it on commit,
// so --out never holds a half-written result and may even name the --in file.
type output struct {
	w         *bufio.Writer
	file      *os.File
	target    string
	committed bool
}

func openOutput(s *Streams, name string) (*output, error) {
	if name == "" || name == "-" {
		return &output{w: bufio.NewWriterSize(s.Out, 1<<20)}, nil
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return nil, withExit(ExitFailure, fmt.Errorf("create --out: %w", err))
	}
	return &output{w: bufio.NewWriterSize(f, 1<<20), file: f, target: name}, nil
}

// commit flushes and, for a file, syncs it and renames it over the target.
func (o *output) commit() error {
	if err := o.w.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if o.file == nil {
		return nil
	}
	if err := o.file.Chmod(0o644); err != nil {
		return fmt.Errorf("chmod --out: %w", err)
	}
	if err := o.file.Sync(); err != nil {
		return fmt.Errorf("sync --out: %w", err)
	}
	if err := o.file.Close(); err != nil {
		return fmt.Errorf("close --out: %w", err)
	}
	if err := os.Rename(o.file.Name(), o.target); err != nil {
		return fmt.Errorf("replace --out: %w", err)
	}
	o.committed = true
	return nil
}

// abort removes the temp file of an output that was not committed.
func (o *output) abort() {
	if o.file != nil && !o.committed {
		o.file.Close()
		os.Remove(o.file.Name())
	}
}
