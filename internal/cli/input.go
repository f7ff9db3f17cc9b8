package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/editdist"
	"github.com/modelcalls/modelcalls/rollout"
	"github.com/spf13/pflag"
)

// recordsOptions are the flags merge and clear share: the capture dirs, the rollout records to read
// (--in) and how long to wait for capture writes still in flight (--wait).
type recordsOptions struct {
	captureDirs []string
	in          string
	wait        time.Duration
}

// addFlags registers the shared flags; dirHelp and waitHelp are the command's own help texts.
func (r *recordsOptions) addFlags(f *pflag.FlagSet, dirHelp, waitHelp string) {
	f.StringArrayVar(&r.captureDirs, "capture-dir", nil, dirHelp)
	f.StringVar(&r.in, "in", "", "JSONL rollout records to read (default: stdin; - is stdin)")
	f.DurationVar(&r.wait, "wait", modelcalls.CaptureDrainTimeout, waitHelp)
}

// check returns the usage or not-found error of bad shared flags.
func (r *recordsOptions) check() error {
	if err := checkCaptureDirs(r.captureDirs); err != nil {
		return err
	}
	if r.wait < 0 {
		return usageErrorf("--wait %s: must be >= 0 (0: look once, do not wait)", r.wait)
	}
	return nil
}

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
		return withExit(ExitNotFound, fmt.Errorf("capture dir %s does not exist%s", dir, didYouMean(similarPaths(dir, true))))
	case err != nil:
		return withExit(ExitNotFound, fmt.Errorf("capture dir: %w", err))
	case !st.IsDir():
		return withExit(ExitNotFound, fmt.Errorf("capture dir %s is not a directory", dir))
	}
	return nil
}

// checkInputFile returns an ExitNotFound error when the file named by flag (--in, --rollouts,
// --config) does not exist or is a directory, in the words every command uses: "--in FILE does not
// exist", "--in FILE is a directory, not a file", FILE as given on the command line.
func checkInputFile(flag, name string) error {
	st, err := os.Stat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return withExit(ExitNotFound, fmt.Errorf("%s %s does not exist%s", flag, name, didYouMean(similarPaths(name, false))))
	case err != nil:
		return withExit(ExitNotFound, fmt.Errorf("%s: %w", flag, err))
	case st.IsDir():
		return withExit(ExitNotFound, fmt.Errorf("%s %s is a directory, not a file", flag, name))
	}
	return nil
}

// isDir reports whether path names a directory (following a symlink).
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// maxPathEntries bounds how many entries of a directory similarPaths looks at.
const maxPathEntries = 10000

// similarPaths returns up to maxSuggestions paths next to name that a typo could have meant:
// entries of name's directory (directories when dir, else files) near its base name by
// editdist.Nearest, closest first (then by name), each written as name was (same directory part). Hidden entries count only when name's own base is hidden. A
// directory that cannot be read gives none.
func similarPaths(name string, dir bool) []string {
	trimmed := strings.TrimRight(name, string(os.PathSeparator))
	if trimmed == "" {
		return nil
	}
	base := filepath.Base(trimmed)
	prefix := strings.TrimSuffix(trimmed, base)
	f, err := os.Open(filepath.Dir(trimmed))
	if err != nil {
		return nil
	}
	defer f.Close()
	ents, _ := f.ReadDir(maxPathEntries)
	var names []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".") && !strings.HasPrefix(base, ".") {
			continue
		}
		isDir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 {
			st, err := os.Stat(filepath.Join(filepath.Dir(trimmed), n))
			isDir = err == nil && st.IsDir()
		}
		if isDir == dir {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	like := editdist.Nearest(base, names, maxSuggestions)
	for i := range like {
		like[i] = prefix + like[i]
	}
	return like
}

// similarNames returns up to maxSuggestions of names near name (editdist.Nearest), closest first.
func similarNames(name string, names []string) []string {
	return editdist.Nearest(name, names, maxSuggestions)
}

// didYouMean is the "; did you mean A or B?" an error adds for the names like, "" for none.
func didYouMean(like []string) string {
	if len(like) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(like, " or ") + "?"
}

// openCaptureDir opens the existing capture dir named on the command line, creating nothing: an
// ExitNotFound error when it does not exist or is not a directory.
func openCaptureDir(dir string) (*capture.Store, error) {
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	store, err := capture.OpenExisting(dir)
	if err != nil {
		return nil, withExit(ExitNotFound, err)
	}
	return store, nil
}

// checkRolloutID returns an ExitUsage error naming what (the flag or argument) when id is not a
// valid rollout id.
func checkRolloutID(what, id string) error {
	if err := rollout.Validate(id); err != nil {
		return usageErrorf("%s: %w (rule: ^[A-Za-z0-9][A-Za-z0-9._-]*$, at most %d bytes)", what, err, rollout.MaxIDLen)
	}
	return nil
}

// loadRollout reads rollout id for show and calls from the first of dirs that holds its capture
// file or incomplete marker, as merge selects a dir; claims and orphan files are counted in every
// dir, and the later dirs that hold the rollout too are listed in shadowed. An ExitNotFound error
// when a dir does not exist or no dir holds the rollout (naming capture writes still in progress
// or abandoned, and orphan files, which explain an empty rollout).
func loadRollout(dirs []string, id string) (*rolloutCalls, error) {
	if err := checkCaptureDirs(dirs); err != nil {
		return nil, err
	}
	var rc *rolloutCalls
	var claims capture.ClaimCount
	var orphans []orphanFile
	for _, dir := range dirs {
		store, err := openCaptureDir(dir)
		if err != nil {
			return nil, err
		}
		hasCapture, marker, err := store.Stat(id)
		if err != nil {
			return nil, withExit(ExitFailure, fmt.Errorf("read rollout %s: %w", id, err))
		}
		switch {
		case rc == nil && (hasCapture || marker || dir == dirs[len(dirs)-1]):
			// The first dir that holds it; or, when none does, the last, for the message below.
			if rc, err = readRolloutCalls(store, id); err != nil {
				return nil, withExit(ExitFailure, fmt.Errorf("read rollout %s: %w", id, err))
			}
			rc.dir = dir
			claims.Add(rc.claims)
			orphans = append(orphans, rc.orphans...)
			continue
		case rc != nil && (hasCapture || marker):
			rc.shadowed = append(rc.shadowed, dir)
		}
		c, err := store.Claims(id)
		if err != nil {
			return nil, withExit(ExitFailure, fmt.Errorf("read rollout %s: %w", id, err))
		}
		claims.Add(c)
		o, ok, err := readOrphan(store, id)
		if err != nil {
			return nil, withExit(ExitFailure, fmt.Errorf("read rollout %s: %w", id, err))
		}
		if ok {
			orphans = append(orphans, o)
		}
	}
	rc.claims, rc.orphans = claims, orphans
	if !rc.hasCapture && !rc.incomplete {
		msg := fmt.Sprintf("rollout %s has no capture in %s (no %s%s)", id, strings.Join(dirs, ", "), id, capture.CaptureSuffix)
		if rc.claims.Live > 0 {
			msg += fmt.Sprintf("; %d capture writes are still in progress", rc.claims.Live)
		}
		if rc.claims.Stale > 0 {
			msg += fmt.Sprintf("; %d capture writes were abandoned (stale claims: the writing process is gone)", rc.claims.Stale)
		}
		for _, o := range rc.orphans {
			msg += fmt.Sprintf("; %s holds %s of calls in flight when it was cleared (clear --force)", o.path, plural(o.lines, "line", "lines"))
		}
		if rc.claims.Live == 0 && rc.claims.Stale == 0 && len(rc.orphans) == 0 {
			msg += unknownRolloutHint("calls", dirs, id)
		}
		return nil, withExit(ExitNotFound, errors.New(msg))
	}
	return rc, nil
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
	if err := checkInputFile("--in", name); err != nil {
		return nil, 0, nil, err
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
