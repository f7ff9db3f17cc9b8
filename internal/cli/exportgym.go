package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/modelcalls/modelcalls/internal/fsutil"
	"github.com/modelcalls/modelcalls/tokens/tokenexport"
)

// gymManifestName is the file in a `--format gym` directory that lists the files exports wrote
// there, so a later export knows which files are its own: it replaces and removes only those.
const gymManifestName = ".modelcalls-tokens-export.json"

// gymLockName is the file in a `--format gym` directory whose exclusive lock an export holds from
// reading the manifest to writing it, so two exports into one directory run one after the other.
const gymLockName = ".modelcalls-tokens-export.lock"

// gymSuffix ends every file a Gym export writes: <rollout_id>.tokens.jsonl.
const gymSuffix = ".tokens.jsonl"

// gymManifest is the manifest's JSON form: each file an export wrote, by name, with the rollout
// and the capture directory (absolute) it was exported from.
type gymManifest struct {
	Files map[string]gymManifestFile `json:"files"`
}

type gymManifestFile struct {
	RolloutID  string `json:"rollout_id"`
	CaptureDir string `json:"capture_dir"`
}

// gymSink writes DIR/<rollout_id>.tokens.jsonl per rollout. The directory holds, per rollout, what
// the latest export of that rollout gave:
//
//   - Each rollout's lines go to a temp file in DIR (synced); nothing in DIR changes until every
//     rollout is read, so a failed export leaves DIR as it was.
//   - On commit the manifest first lists the old and the new files, then each temp file is renamed
//     over its target, then the files of the manifest that this export replaces by nothing are
//     removed: those of a rollout it exported that now has no Gym record, and, when the export
//     covers the whole capture directory (no --in), those exported from the same capture directory
//     whose rollout is gone. Then the manifest lists what is left.
//   - A file the manifest does not list is not ours: an export refuses to overwrite it and never
//     removes it.
type gymSink struct {
	dir        string
	captureDir string // absolute
	wholeDir   bool   // the export covers every rollout of captureDir
	manifest   gymManifest
	exported   map[string]bool // rollout ids this export read
	staged     map[string]string
	lines      []byte
	lock       *os.File
}

func newGymSink(dir, captureDir string, wholeDir bool) (*gymSink, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, withExit(ExitFailure, fmt.Errorf("create --out directory: %w", err))
	}
	abs, err := filepath.Abs(captureDir)
	if err != nil {
		return nil, withExit(ExitFailure, fmt.Errorf("--capture-dir: %w", err))
	}
	g := &gymSink{dir: dir, captureDir: abs, wholeDir: wholeDir, exported: map[string]bool{}, staged: map[string]string{}}
	if g.lock, err = os.OpenFile(filepath.Join(dir, gymLockName), os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return nil, withExit(ExitFailure, fmt.Errorf("lock --out directory: %w", err))
	}
	if err := fsutil.Lock(g.lock, true); err != nil {
		g.lock.Close()
		return nil, withExit(ExitFailure, fmt.Errorf("lock --out directory: %w", err))
	}
	ok := false
	defer func() {
		if !ok {
			g.lock.Close()
		}
	}()
	b, err := os.ReadFile(filepath.Join(dir, gymManifestName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, withExit(ExitFailure, fmt.Errorf("read %s: %w", filepath.Join(dir, gymManifestName), err))
	default:
		if err := json.Unmarshal(b, &g.manifest); err != nil {
			return nil, withExit(ExitFailure, fmt.Errorf("read %s: %w (it lists the files earlier exports wrote; remove it and the files it named to start over)",
				filepath.Join(dir, gymManifestName), err))
		}
	}
	if g.manifest.Files == nil {
		g.manifest.Files = map[string]gymManifestFile{}
	}
	for n := range g.manifest.Files {
		if !isGymFileName(n) {
			// Not a name an export writes (an edited manifest): never act on it.
			delete(g.manifest.Files, n)
		}
	}
	// Temp files an interrupted export left behind are ours by their name.
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			n := e.Name()
			ours := (strings.HasPrefix(n, ".") && strings.Contains(n, gymSuffix+".tmp-")) || strings.HasPrefix(n, gymManifestName+".tmp-")
			if ours && e.Type().IsRegular() {
				os.Remove(filepath.Join(dir, n))
			}
		}
	}
	ok = true
	return g, nil
}

// isGymFileName reports whether n is a name an export writes in its directory: <id>.tokens.jsonl,
// no directory part, not hidden.
func isGymFileName(n string) bool {
	return strings.HasSuffix(n, gymSuffix) && len(n) > len(gymSuffix) && !strings.HasPrefix(n, ".") &&
		filepath.Base(n) == n && !strings.ContainsAny(n, `/\`) && filepath.IsLocal(n)
}

func (g *gymSink) write(r *tokenexport.Row) (bool, error) {
	rec, ok := r.Gym()
	if !ok {
		return false, nil
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return false, fmt.Errorf("encode Gym record: %w", err)
	}
	g.lines = append(append(g.lines, b...), '\n')
	return true, nil
}

// endRollout stages the rollout's lines in a synced temp file; commit renames it into place.
func (g *gymSink) endRollout(id string) error {
	defer func() { g.lines = g.lines[:0] }()
	g.exported[id] = true
	name := id + gymSuffix
	target := filepath.Join(g.dir, name)
	if old, ok := g.staged[name]; ok { // the rollout was listed twice: the later export wins
		os.Remove(old)
		delete(g.staged, name)
	}
	if len(g.lines) == 0 {
		return nil
	}
	if _, ours := g.manifest.Files[name]; !ours {
		if _, err := os.Lstat(target); err == nil {
			return fmt.Errorf("%s exists and no export into %s wrote it (%s does not list it); not overwriting it: move it away or export into another directory",
				target, g.dir, gymManifestName)
		}
	}
	tmp, err := writeSyncedTemp(g.dir, "."+name+".tmp-*", g.lines)
	if err != nil {
		return fmt.Errorf("write %s: %w", target, err)
	}
	g.staged[name] = tmp
	return nil
}

func (g *gymSink) commit() error {
	names := make([]string, 0, len(g.staged))
	for n := range g.staged {
		names = append(names, n)
	}
	sort.Strings(names)
	// Claim the new names before any file appears under them, so an export killed half-way still
	// knows them as its own.
	claimed := false
	for _, n := range names {
		if _, ok := g.manifest.Files[n]; !ok {
			g.manifest.Files[n] = gymManifestFile{RolloutID: strings.TrimSuffix(n, gymSuffix), CaptureDir: g.captureDir}
			claimed = true
		}
	}
	if claimed {
		if err := g.writeManifest(); err != nil {
			return err
		}
	}
	for _, n := range names {
		if err := os.Rename(g.staged[n], filepath.Join(g.dir, n)); err != nil {
			return fmt.Errorf("replace %s: %w", filepath.Join(g.dir, n), err)
		}
		delete(g.staged, n)
		g.manifest.Files[n] = gymManifestFile{RolloutID: strings.TrimSuffix(n, gymSuffix), CaptureDir: g.captureDir}
	}
	written := map[string]bool{}
	for _, n := range names {
		written[n] = true
	}
	for n, f := range g.manifest.Files {
		if written[n] || !(g.exported[f.RolloutID] || (g.wholeDir && f.CaptureDir == g.captureDir)) {
			continue
		}
		if err := os.Remove(filepath.Join(g.dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the stale %s: %w", filepath.Join(g.dir, n), err)
		}
		delete(g.manifest.Files, n)
	}
	return g.writeManifest()
}

// writeManifest replaces the manifest atomically and makes the directory's entries durable.
func (g *gymSink) writeManifest() error {
	b, err := json.MarshalIndent(g.manifest, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", gymManifestName, err)
	}
	target := filepath.Join(g.dir, gymManifestName)
	tmp, err := writeSyncedTemp(g.dir, gymManifestName+".tmp-*", append(b, '\n'))
	if err == nil {
		if err = os.Rename(tmp, target); err != nil {
			os.Remove(tmp)
		}
	}
	if err == nil {
		err = fsutil.SyncDir(g.dir)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", target, err)
	}
	return nil
}

// abort removes the temp files of an export that did not commit, and releases the directory's
// lock; it runs after commit too.
func (g *gymSink) abort() {
	for n, tmp := range g.staged {
		os.Remove(tmp)
		delete(g.staged, n)
	}
	if g.lock != nil {
		g.lock.Close()
		g.lock = nil
	}
}

// writeSyncedTemp writes b to a new file in dir named by pattern (os.CreateTemp), mode 0644, and
// syncs it; it returns the file's path, or removes it and fails.
func writeSyncedTemp(dir, pattern string, b []byte) (string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
