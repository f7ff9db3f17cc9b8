package tokenexport

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestGymDirStageCommitClose(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gym")
	g, err := OpenGymDir(dir, t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"../up", "a/b", ""} {
		if err := g.Stage(id, []byte("{}\n")); err == nil {
			t.Errorf("Stage(%q) took a rollout id that is no file name", id)
		}
	}
	if err := g.Stage("r1", []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	// Staged, not committed: only the lock and a hidden temp file; Close removes the temp file.
	if got := listDir(t, dir); len(got) != 2 || !slices.Contains(got, GymLockName) {
		t.Errorf("after Stage: %v", got)
	}
	g.Close()
	g.Close()
	if got := listDir(t, dir); !slices.Equal(got, []string{GymLockName}) {
		t.Errorf("after Close without Commit: %v", got)
	}

	g, err = OpenGymDir(dir, t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Stage("r1", []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if err := g.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{GymManifestName, GymLockName, "r1" + GymFileSuffix}) {
		t.Errorf("after Commit: %v", got)
	}
}
