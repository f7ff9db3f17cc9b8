package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// checkCaptureDirs returns an ExitUsage error when no dir was given and an ExitNotFound error when
// one does not exist or is not a directory.
func checkCaptureDirs(dirs []string) error {
	if len(dirs) == 0 {
		return usageErrorf("--capture-dir is required (the directory the proxy writes <rollout_id>.capture.jsonl files to)")
	}
	for _, d := range dirs {
		if d == "" {
			return usageErrorf("--capture-dir must not be empty")
		}
		if err := checkDir(d); err != nil {
			return err
		}
	}
	return nil
}

// checkDir returns an ExitNotFound error naming dir when it does not exist or is not a directory.
func checkDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return withExit(ExitNotFound, fmt.Errorf("capture dir %s does not exist", dir))
	case err != nil:
		return withExit(ExitNotFound, fmt.Errorf("capture dir: %w", err))
	case !st.IsDir():
		return withExit(ExitNotFound, fmt.Errorf("capture dir %s is not a directory", dir))
	}
	return nil
}

// openInput opens --in ("" or "-": stdin). size is the size of a regular file, else -1. When the
// input is stdin and stdin is a terminal, it tells the user on stderr that it is waiting for input
// (prog names the command), so a forgotten --in does not look like a hang.
func openInput(s *Streams, prog, name string) (r io.Reader, size int64, closeFn func(), err error) {
	regularSize := func(f *os.File) int64 {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			return st.Size()
		}
		return -1
	}
	if name == "" || name == "-" {
		size = -1
		if f, ok := s.In.(*os.File); ok {
			size = regularSize(f)
			if isTerminal(f) {
				fmt.Fprintf(s.ErrOut, "modelcalls %s: reading rollout records from stdin (Ctrl-D to end)\n", prog)
			}
		}
		return s.In, size, func() {}, nil
	}
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil, withExit(ExitNotFound, fmt.Errorf("--in %s does not exist", name))
	}
	if err != nil {
		return nil, 0, nil, withExit(ExitFailure, fmt.Errorf("open --in: %w", err))
	}
	return f, regularSize(f), func() { f.Close() }, nil
}
