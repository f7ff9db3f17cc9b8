package modelcalls

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
	"github.com/modelcalls/modelcalls/record"
)

// writeScratchRollouts writes rollout 0-0 with 80 lines (more than a box chunk and a scratch's
// first records, damaged fixture lines included), 0-1 with 3 and no file for 0-2, and returns the
// rollout record lines of all three.
func writeScratchRollouts(t *testing.T, dir string) [][]byte {
	t.Helper()
	lines := capturefile.GymLines(t, "testdata")
	for id, n := range map[string]int{"0-0": 80, "0-1": 3} {
		var buf bytes.Buffer
		for k := range n {
			buf.Write(lines[(k*7+len(id))%len(lines)])
			buf.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, id+capture.CaptureSuffix), buf.Bytes(), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	var recs [][]byte
	for i := range 3 {
		recs = append(recs, fmt.Appendf(nil, `{"_ng_task_index": 0, "_ng_rollout_index": %d, "reward": 1.0}`, i))
	}
	return recs
}

// TestMergerScratchReuse: a Merger reuses pooled records, boxes and attachment buffers across
// lines; a rollout merged after a larger one, or beside others on other goroutines, comes out
// byte for byte as when it is merged alone, with and without payloads.
func TestMergerScratchReuse(t *testing.T) {
	dir := t.TempDir()
	recs := writeScratchRollouts(t, dir)
	for _, payloads := range []bool{false, true} {
		m, err := NewMerger([]string{dir}, MergeOptions{IncludePayloads: payloads, DrainTimeout: -1})
		if err != nil {
			t.Fatal(err)
		}
		merge := func(rec []byte) string {
			out, res, err := m.Merge(context.Background(), rec)
			if err != nil || !res.Attached {
				t.Errorf("merge %s: %+v, %v", rec, res, err)
			}
			return string(out)
		}
		// Each rollout once, in turn: the output every later merge of it must repeat.
		want := make([]string, len(recs))
		for i, rec := range recs {
			want[i] = merge(rec)
		}
		order := []int{1, 0, 1, 2, 0, 2, 1, 0, 1}
		for _, i := range order {
			if got := merge(recs[i]); got != want[i] {
				t.Fatalf("payloads=%v: rollout %d merged after others differs:\n%.300s\nwant\n%.300s", payloads, i, got, want[i])
			}
		}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for k := range 20 {
					i := order[(g+k)%len(order)]
					if got := merge(recs[i]); got != want[i] {
						t.Errorf("payloads=%v: rollout %d merged concurrently differs", payloads, i)
						return
					}
				}
			})
		}
		wg.Wait()
	}
}

// TestMergeScratchRelease: a scratch handed back holds no records, boxes or attachment bytes
// that could keep a capture buffer alive; it keeps its own file buffer (empty) for the next merge.
func TestMergeScratchRelease(t *testing.T) {
	dir := t.TempDir()
	writeScratchRollouts(t, dir)
	store, err := capture.OpenExisting(dir)
	if err != nil {
		t.Fatal(err)
	}
	sc := new(mergeScratch)
	recs, damaged, err := record.ReadAvailableInto(store, "0-0", sc.records[:0], &sc.boxes, &sc.file)
	if err != nil || len(recs)+damaged != 80 || len(recs) == 0 {
		t.Fatalf("read: %d records, %d damaged, %v", len(recs), damaged, err)
	}
	if file, err := os.ReadFile(filepath.Join(dir, "0-0"+capture.CaptureSuffix)); err != nil || !bytes.Equal(sc.file, file) {
		t.Fatalf("the file was not read into the scratch's buffer (%d bytes): %v", len(sc.file), err)
	}
	sc.records = recs
	sc.small = append(sc.small, "attachment"...)
	sc.release()
	for i, r := range sc.records[:cap(sc.records)] {
		if r.ModelCallID != nil || r.Request != nil || r.Response != nil || r.ResponseRaw != nil || r.ToolCalls != nil {
			t.Fatalf("record %d (model_call_id %s) kept after release", i, capturefile.StrOrNil(r.ModelCallID))
		}
	}
	if len(sc.records) != 0 || len(sc.small) != 0 || len(sc.file) != 0 {
		t.Fatalf("release left lengths %d, %d, %d", len(sc.records), len(sc.small), len(sc.file))
	}
}
