package tokenexport

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
)

// GymManifestName is the file in a Gym export directory that lists the files exports wrote there,
// so a later export knows which files are its own: it replaces and removes only those.
const GymManifestName = ".modelcalls-tokens-export.json"

// GymLockName is the file in a Gym export directory whose exclusive lock an export holds from
// reading the manifest to writing it (OpenGymDir to Close), so two exports into one directory run
// one after the other. The empty file stays.
const GymLockName = ".modelcalls-tokens-export.lock"

// GymFileSuffix ends every file a Gym export writes: <rollout_id>.tokens.jsonl, NeMo Gym's name
// for a rollout's token records.
const GymFileSuffix = ".tokens.jsonl"

// gymManifest is the manifest's JSON form: each file an export wrote, by name, with the rollout
// and the capture directory (absolute) it was exported from.
type gymManifest struct {
	Files map[string]gymManifestFile `json:"files"`
}

type gymManifestFile struct {
	RolloutID  string `json:"rollout_id"`
	CaptureDir string `json:"capture_dir"`
}

// GymDir writes NeMo Gym token files, DIR/<rollout_id>.tokens.jsonl, one per rollout, so that DIR
// holds, per rollout, what the latest export of that rollout gave:
//
//   - Stage writes a rollout's lines to a temp file in DIR (synced); nothing under a final name
//     changes until Commit, so an export that fails before it leaves DIR as it was.
//   - Commit first lists the old and the new files in the manifest (GymManifestName), then renames
//     each temp file over its target, then removes the files of the manifest that this export
//     replaces by nothing: those of a rollout it staged with no lines, and, when the export covers
//     its whole capture directory, those exported from the same capture directory whose rollout it
//     did not stage. Then the manifest lists what is left.
//   - A file the manifest does not list is not the export's: Stage refuses to overwrite it and
//     nothing removes it.
//
// A GymDir holds DIR's lock (GymLockName) from OpenGymDir to Close; Close also removes the temp
// files of an export that did not commit. It is not safe for concurrent use.
type GymDir struct {
	dir        string
	captureDir string // absolute
	wholeDir   bool   // the export covers every rollout of captureDir
	manifest   gymManifest
	exported   map[string]bool // rollout ids this export read
	staged     map[string]string
	lock       *os.File
	removed    int
}

// OpenGymDir creates dir when missing, takes its lock (waiting for an export that holds it), reads
// its manifest and removes the temp files an interrupted export left behind. captureDir is the
// capture directory exported (recorded in the manifest); wholeDir says the export covers every
// rollout of it, so files of its rollouts that Commit did not see staged are stale.
func OpenGymDir(dir, captureDir string, wholeDir bool) (*GymDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	abs, err := filepath.Abs(captureDir)
	if err != nil {
		return nil, fmt.Errorf("capture directory %s: %w", captureDir, err)
	}
	g := &GymDir{dir: dir, captureDir: abs, wholeDir: wholeDir, exported: map[string]bool{}, staged: map[string]string{}}
	if g.lock, err = os.OpenFile(filepath.Join(dir, GymLockName), os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := fsutil.Lock(g.lock, true); err != nil {
		g.lock.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	ok := false
	defer func() {
		if !ok {
			g.lock.Close()
		}
	}()
	b, err := os.ReadFile(filepath.Join(dir, GymManifestName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, GymManifestName), err)
	default:
		if err := json.Unmarshal(b, &g.manifest); err != nil {
			return nil, fmt.Errorf("read %s: %w (it lists the files earlier exports wrote; remove it and the files it named to start over)",
				filepath.Join(dir, GymManifestName), err)
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
			ours := (strings.HasPrefix(n, ".") && strings.Contains(n, GymFileSuffix+".tmp-")) || strings.HasPrefix(n, GymManifestName+".tmp-")
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
	return strings.HasSuffix(n, GymFileSuffix) && len(n) > len(GymFileSuffix) && !strings.HasPrefix(n, ".") &&
		filepath.Base(n) == n && !strings.ContainsAny(n, `/\`) && filepath.IsLocal(n)
}

// Stage records that rolloutID was exported and stages its records, lines (JSON lines, each ending
// in "\n"; empty when the rollout has no Gym record, so that Commit removes its earlier file) in a
// synced temp file that Commit renames into place. Staging a rollout again replaces what was staged.
// It fails, staging nothing, when the target's name is taken by a file the manifest does not list.
func (g *GymDir) Stage(rolloutID string, lines []byte) error {
	id := rolloutID
	if !isGymFileName(id + GymFileSuffix) {
		return fmt.Errorf("rollout id %q does not make a file name in %s", id, g.dir)
	}
	g.exported[id] = true
	name := id + GymFileSuffix
	target := filepath.Join(g.dir, name)
	if old, ok := g.staged[name]; ok { // the rollout was listed twice: the later export wins
		os.Remove(old)
		delete(g.staged, name)
	}
	if len(lines) == 0 {
		return nil
	}
	if _, ours := g.manifest.Files[name]; !ours {
		if _, err := os.Lstat(target); err == nil {
			return fmt.Errorf("%s exists and no export into %s wrote it (%s does not list it); not overwriting it: move it away or export into another directory",
				target, g.dir, GymManifestName)
		}
	}
	tmp, err := writeSyncedTemp(g.dir, "."+name+".tmp-*", lines)
	if err != nil {
		return fmt.Errorf("write %s: %w", target, err)
	}
	g.staged[name] = tmp
	return nil
}

// Commit puts every staged file in place and removes the stale ones (above), then rewrites the
// manifest. The lock stays held until Close.
func (g *GymDir) Commit() error {
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
			g.manifest.Files[n] = gymManifestFile{RolloutID: strings.TrimSuffix(n, GymFileSuffix), CaptureDir: g.captureDir}
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
		g.manifest.Files[n] = gymManifestFile{RolloutID: strings.TrimSuffix(n, GymFileSuffix), CaptureDir: g.captureDir}
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
		g.removed++
	}
	return g.writeManifest()
}

// Removed is how many files of earlier exports Commit removed as stale.
func (g *GymDir) Removed() int { return g.removed }

// writeManifest replaces the manifest atomically and makes the directory's entries durable.
func (g *GymDir) writeManifest() error {
	b, err := json.MarshalIndent(g.manifest, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", GymManifestName, err)
	}
	target := filepath.Join(g.dir, GymManifestName)
	tmp, err := writeSyncedTemp(g.dir, GymManifestName+".tmp-*", append(b, '\n'))
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

// Close removes the temp files of an export that did not commit and releases the directory's lock.
// It may be called more than once, after Commit too.
func (g *GymDir) Close() {
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
