package record

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
	"github.com/modelcalls/modelcalls/internal/cputime"
)

// benchCallsPerRollout is the calls of each rollout of a benchmark capture dir (a merge run's
// rollouts have 20).
const benchCallsPerRollout = 20

// benchLinePool returns fixture-shaped capture lines: every readable line NeMo Gym wrote for the
// fixtures (Responses, Chat and Messages; JSON and reassembled streams; errors; 0.4 to 21 KB).
func benchLinePool(b *testing.B) [][]byte {
	var pool [][]byte
	for _, l := range capturefile.GymLines(b, "../testdata") {
		if _, err := BuildRecord(l, 0); err == nil {
			pool = append(pool, l)
		}
	}
	return pool
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
	capturefile.WriteBenchCapture(b, dir, benchLinePool(b), rollouts, benchCallsPerRollout)
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
	cpu := cputime.Process()
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
// start (cputime.Process): steadier than MB/s on a busy machine, and what row 6 compares.
func reportCPU(b *testing.B, start time.Duration, bytes int64) {
	if d := cputime.Process() - start; d > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/1e6/d.Seconds(), "cpuMB/s")
	}
}
