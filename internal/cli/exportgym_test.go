package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/tokens/tokenexport"
)

// buildTokenCapture (re)creates a capture directory at dir holding, per rollout, one line per
// golden case named.
func buildTokenCapture(t *testing.T, dir string, rollouts map[string][]string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	st, err := capture.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, len(rollouts))
	for id := range rollouts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	n := 0
	for _, id := range ids {
		for _, c := range rollouts[id] {
			n++
			if err := st.Append(id, tokenLine(t, c, strings.Repeat("0", 30)+string(rune('0'+n/10))+string(rune('0'+n%10)))); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// dirFiles returns every file of dir with its content.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = string(b)
	}
	return m
}

func names(m map[string]string) string {
	s := make([]string, 0, len(m))
	for n := range m {
		s = append(s, n)
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

func TestExportGymReexport(t *testing.T) {
	caps, other, out := filepath.Join(t.TempDir(), "caps"), filepath.Join(t.TempDir(), "other"), t.TempDir()
	// Files that are not the export's: never changed, never removed.
	foreign := map[string]string{"notes.txt": "mine\n", "x9.tokens.jsonl": "{\"written_by\":\"someone else\"}\n"}
	for n, c := range foreign {
		if err := os.WriteFile(filepath.Join(out, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	export := func(t *testing.T, captureDir, in string) string {
		t.Helper()
		args := []string{"export", "tokens", "--capture-dir", captureDir, "--format", "gym", "--out", out}
		if in != "" {
			args = append(args, "--in", "-")
		}
		stdout, errOut, code := runCLI(t, in, args...)
		if code != ExitOK && code != ExitFailure || strings.Contains(errOut, "Error") {
			t.Fatalf("exit %d, out %q, err %q", code, stdout, errOut)
		}
		return stdout
	}
	lines := func(t *testing.T, name string) int {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "\n")
	}
	manifest := func(t *testing.T) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(out, tokenexport.GymManifestName))
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Files map[string]json.RawMessage `json:"files"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var s []string
		for n := range m.Files {
			s = append(s, n)
		}
		sort.Strings(s)
		return strings.Join(s, " ")
	}

	buildTokenCapture(t, caps, map[string][]string{"r1": {"vllm_chat_json"}, "r2": {"vllm_chat_json"}, "r3": {"vllm_chat_json"}})
	// A temp file an interrupted export left behind is removed.
	if err := os.WriteFile(filepath.Join(out, ".r1.tokens.jsonl.tmp-123"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	export(t, caps, "")
	first := dirFiles(t, out)
	if got, want := names(first), ".modelcalls-tokens-export.json .modelcalls-tokens-export.lock notes.txt r1.tokens.jsonl r2.tokens.jsonl r3.tokens.jsonl x9.tokens.jsonl"; got != want {
		t.Fatalf("files %q, want %q", got, want)
	}

	t.Run("re-export of the same capture gives the same files", func(t *testing.T) {
		export(t, caps, "")
		again := dirFiles(t, out)
		if names(again) != names(first) {
			t.Fatalf("files %q, want %q", names(again), names(first))
		}
		for n, c := range first {
			if again[n] != c {
				t.Errorf("%s changed:\n%s\nwas\n%s", n, again[n], c)
			}
		}
	})
	t.Run("changed capture: replaced, emptied and gone rollouts", func(t *testing.T) {
		// r1 gained a call, r2 has no call with token data any more, r3 is gone.
		buildTokenCapture(t, caps, map[string][]string{"r1": {"vllm_chat_json", "llamacpp_chat_json"}, "r2": {"messages_plain"}})
		if stdout := export(t, caps, ""); !strings.Contains(stdout, ", 2 stale Gym files of earlier exports removed") {
			t.Errorf("summary %q", stdout)
		}
		got := dirFiles(t, out)
		if n, want := names(got), ".modelcalls-tokens-export.json .modelcalls-tokens-export.lock notes.txt r1.tokens.jsonl x9.tokens.jsonl"; n != want {
			t.Errorf("files %q, want %q", n, want)
		}
		if n := lines(t, "r1.tokens.jsonl"); n != 2 {
			t.Errorf("r1: %d lines, want 2", n)
		}
		if m := manifest(t); m != "r1.tokens.jsonl" {
			t.Errorf("manifest lists %q", m)
		}
	})
	t.Run("exports of other rollouts leave a rollout's file alone", func(t *testing.T) {
		buildTokenCapture(t, other, map[string][]string{"q1": {"vllm_chat_json"}})
		export(t, other, "")
		// --in exports only its rollouts: r1's file stays.
		buildTokenCapture(t, caps, map[string][]string{"r1": {"vllm_chat_json", "llamacpp_chat_json"}, "r2": {"vllm_chat_json"}})
		export(t, caps, `{"_ng_rollout_id":"r2"}`+"\n")
		// The whole of caps again: q1, from another capture directory, stays.
		export(t, caps, "")
		if n, want := names(dirFiles(t, out)), ".modelcalls-tokens-export.json .modelcalls-tokens-export.lock notes.txt q1.tokens.jsonl r1.tokens.jsonl r2.tokens.jsonl x9.tokens.jsonl"; n != want {
			t.Errorf("files %q, want %q", n, want)
		}
		// A listed rollout that has no token data now loses its file; the others stay.
		buildTokenCapture(t, caps, map[string][]string{"r1": {"vllm_chat_json", "llamacpp_chat_json"}, "r2": {"messages_plain"}})
		export(t, caps, `{"_ng_rollout_id":"r2"}`+"\n")
		if n, want := names(dirFiles(t, out)), ".modelcalls-tokens-export.json .modelcalls-tokens-export.lock notes.txt q1.tokens.jsonl r1.tokens.jsonl x9.tokens.jsonl"; n != want {
			t.Errorf("files %q, want %q", n, want)
		}
	})
	t.Run("foreign files are untouched", func(t *testing.T) {
		got := dirFiles(t, out)
		for n, c := range foreign {
			if got[n] != c {
				t.Errorf("%s is %q, want %q", n, got[n], c)
			}
		}
	})
}

func TestExportGymRefusesFilesNotOurs(t *testing.T) {
	caps, out := filepath.Join(t.TempDir(), "caps"), t.TempDir()
	buildTokenCapture(t, caps, map[string][]string{"r1": {"vllm_chat_json"}, "r2": {"vllm_chat_json"}})
	// r2's name is taken by a file no export wrote (an earlier tool, NeMo Gym itself).
	if err := os.WriteFile(filepath.Join(out, "r2.tokens.jsonl"), []byte("theirs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, "", "export", "tokens", "--capture-dir", caps, "--format", "gym", "--out", out)
	if code != ExitFailure || !strings.Contains(errOut, "r2.tokens.jsonl exists and no export into") {
		t.Errorf("exit %d, err %q", code, errOut)
	}
	// Nothing changed: r1 was staged but not put in place, no temp file and no manifest is left
	// (the empty lock file stays).
	if got := dirFiles(t, out); names(got) != ".modelcalls-tokens-export.lock r2.tokens.jsonl" || got["r2.tokens.jsonl"] != "theirs\n" {
		t.Errorf("directory after the refused export: %v", got)
	}
}

func TestExportGymManifestNamesOutsideTheDirectory(t *testing.T) {
	caps, root := filepath.Join(t.TempDir(), "caps"), t.TempDir()
	out := filepath.Join(root, "out")
	buildTokenCapture(t, caps, map[string][]string{"r1": {"vllm_chat_json"}})
	// An edited manifest naming files outside the directory, or hidden ones: never removed.
	victim := filepath.Join(root, "victim.tokens.jsonl")
	if err := os.WriteFile(victim, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	m := `{"files":{"../victim.tokens.jsonl":{"rollout_id":"r1","capture_dir":"` + caps + `"},".x.tokens.jsonl":{"rollout_id":"r1"}}}`
	if err := os.WriteFile(filepath.Join(out, tokenexport.GymManifestName), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, "", "export", "tokens", "--capture-dir", caps, "--format", "gym", "--out", out); code != ExitOK {
		t.Fatalf("exit %d, err %q", code, errOut)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep\n" {
		t.Errorf("a file outside --out was touched: %q, %v", b, err)
	}
	if got := names(dirFiles(t, out)); got != ".modelcalls-tokens-export.json .modelcalls-tokens-export.lock r1.tokens.jsonl" {
		t.Errorf("files %q", got)
	}
}

// Two exports into one directory at once run one after the other: the result is one export's.
func TestExportGymConcurrent(t *testing.T) {
	caps, out := filepath.Join(t.TempDir(), "caps"), t.TempDir()
	buildTokenCapture(t, caps, map[string][]string{"r1": {"vllm_chat_json"}, "r2": {"vllm_chat_json", "llamacpp_chat_json"}})
	codes := make(chan int, 2)
	for range 2 {
		go func() {
			_, _, code := runCLI(t, "", "export", "tokens", "--capture-dir", caps, "--format", "gym", "--out", out)
			codes <- code
		}()
	}
	for range 2 {
		if code := <-codes; code != ExitOK {
			t.Errorf("exit %d", code)
		}
	}
	got := dirFiles(t, out)
	if n := names(got); n != ".modelcalls-tokens-export.json .modelcalls-tokens-export.lock r1.tokens.jsonl r2.tokens.jsonl" {
		t.Errorf("files %q", n)
	}
	if strings.Count(got["r2.tokens.jsonl"], "\n") != 2 {
		t.Errorf("r2.tokens.jsonl:\n%s", got["r2.tokens.jsonl"])
	}
}
