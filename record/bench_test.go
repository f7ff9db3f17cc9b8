package record

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
)

// benchCallsPerRollout is the calls of each rollout of a benchmark capture dir (a merge run's
// rollouts have 20).
const benchCallsPerRollout = 20

// benchLinePool returns fixture-shaped capture lines: every readable line NeMo Gym wrote for the
// fixtures (Responses, Chat and Messages; JSON and reassembled streams; errors; 0.4 to 21 KB).
func benchLinePool(b *testing.B) [][]byte {
	var pool [][]byte
	for _, l := range gymLines(b) {
		if _, err := BuildRecord(l, 0); err == nil {
			pool = append(pool, l)
		}
	}
	return pool
}

// writeBenchCapture writes rollouts capture files of callsPer lines each into dir, cycling through
// the pool with a fresh 32-hex model_call_id per line, and returns the rollout records (JSONL
// lines in Gym's style) and the total capture bytes.
func writeBenchCapture(b *testing.B, dir string, rollouts, callsPer int) ([][]byte, int64) {
	pool := benchLinePool(b)
	var total int64
	records := make([][]byte, rollouts)
	var buf bytes.Buffer
	n := 0
	for r := range rollouts {
		buf.Reset()
		for range callsPer {
			line := bytes.Clone(pool[n%len(pool)])
			if i := bytes.Index(line, []byte(`"model_call_id":"`)); i >= 0 && len(line) > i+17+32 {
				copy(line[i+17:], fmt.Sprintf("%032x", n))
			}
			n++
			buf.Write(line)
			buf.WriteByte('\n')
		}
		id := fmt.Sprintf("%d-%d", r/100, r%100)
		if err := os.WriteFile(filepath.Join(dir, id+".capture.jsonl"), buf.Bytes(), 0o640); err != nil {
			b.Fatal(err)
		}
		total += int64(buf.Len())
		records[r] = fmt.Appendf(nil, `{"_ng_task_index": %d, "_ng_rollout_index": %d, "responses_create_params": {"input": "task %d"}, "reward": 1.0}`, r/100, r%100, r)
	}
	return records, total
}

// BenchmarkBuildRecord builds a record from each fixture-shaped capture line in turn.
func BenchmarkBuildRecord(b *testing.B) {
	pool := benchLinePool(b)
	var size int64
	for _, l := range pool {
		size += int64(len(l))
	}
	b.SetBytes(size / int64(len(pool)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := BuildRecord(pool[i%len(pool)], i); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkRecordAppendJSON encodes records without payloads, as the merge attaches them.
func BenchmarkRecordAppendJSON(b *testing.B) {
	var recs []*ModelCallRecord
	for _, l := range benchLinePool(b) {
		r, _ := BuildRecord(l, 0)
		recs = append(recs, r)
	}
	b.ReportAllocs()
	var buf []byte
	i := 0
	for b.Loop() {
		buf = recs[i%len(recs)].AppendJSON(buf[:0], false)
		i++
	}
}

// BenchmarkReadAvailableRecords reads the records of every rollout of a 1,000 x 20 capture dir (one
// op = the whole dir), as the merge read of test/bench row 6 does: tolerant read, one record built
// per line, raw texts decoded. MB/s counts capture bytes read.
func BenchmarkReadAvailableRecords(b *testing.B) {
	rollouts := 1000
	if testing.Short() {
		rollouts = 100
	}
	dir := b.TempDir()
	writeBenchCapture(b, dir, rollouts, benchCallsPerRollout)
	store, err := capture.OpenExisting(dir)
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	ids := make([]string, rollouts)
	for r := range ids {
		ids[r] = fmt.Sprintf("%d-%d", r/100, r%100)
		st, err := os.Stat(filepath.Join(dir, ids[r]+capture.CaptureSuffix))
		if err != nil {
			b.Fatal(err)
		}
		size += st.Size()
	}
	b.SetBytes(size)
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		for _, id := range ids {
			recs, damaged, err := ReadAvailableRecords(store, id)
			if err != nil || damaged != 0 || len(recs) != benchCallsPerRollout {
				b.Fatalf("%s: %d records, %d damaged, %v", id, len(recs), damaged, err)
			}
		}
	}
	reportCPU(b, cpu, size)
}

// reportCPU reports "cpuMB/s", the bytes of each op per second of the process's CPU time since
// start (processCPU): steadier than MB/s on a busy machine, and what row 6 compares.
func reportCPU(b *testing.B, start time.Duration, bytes int64) {
	if d := processCPU() - start; d > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/1e6/d.Seconds(), "cpuMB/s")
	}
}
