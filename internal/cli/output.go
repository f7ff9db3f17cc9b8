package cli

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
)

// output is where merged lines and exports go: stdout, or a temp file next to --out that replaces
// it on commit, so --out never holds a half-written result and may even name the --in file.
//
// An --out that exists and is not a regular file (/dev/null, /dev/stdout, a named pipe) is written
// in place instead: renaming a file over it would replace the device or pipe itself (as root,
// `--out /dev/null` would leave a regular file at /dev/null for every program on the machine). An
// --out that is a symbolic link is resolved first, so the file it points at is replaced and the
// link stays.
type output struct {
	w         *bufio.Writer
	file      *os.File // the temp file, renamed over target on commit
	direct    *os.File // an existing non-regular --out, written in place
	target    string
	committed bool
}

func openOutput(s *Streams, name string) (*output, error) {
	if name == "" || name == "-" {
		return &output{w: bufio.NewWriterSize(s.Out, 1<<20)}, nil
	}
	target := name
	if fi, err := os.Stat(name); err == nil {
		if !fi.Mode().IsRegular() {
			f, err := os.OpenFile(name, os.O_WRONLY, 0)
			if err != nil {
				return nil, withExit(ExitFailure, fmt.Errorf("open --out: %w", err))
			}
			return &output{w: bufio.NewWriterSize(f, 1<<20), direct: f, target: name}, nil
		}
		if resolved, err := filepath.EvalSymlinks(name); err == nil {
			target = resolved
		}
	}
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".tmp-*")
	if err != nil {
		return nil, withExit(ExitFailure, fmt.Errorf("create --out: %w", err))
	}
	return &output{w: bufio.NewWriterSize(f, 1<<20), file: f, target: target}, nil
}

// commit flushes and, for a file, syncs it and renames it over the target.
func (o *output) commit() error {
	if err := o.w.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if o.direct != nil {
		o.committed = true
		if err := o.direct.Close(); err != nil {
			return fmt.Errorf("close --out: %w", err)
		}
		return nil
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
	if o.direct != nil && !o.committed {
		o.direct.Close()
	}
	if o.file != nil && !o.committed {
		o.file.Close()
		os.Remove(o.file.Name())
	}
}
