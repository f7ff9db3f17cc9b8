package modelcalls

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Benchmark sizes: the merge of a large run, 10,000 rollouts of 20 calls each (-short: 100).
const (
	benchRollouts        = 10000
	benchCallsPerRollout = 20
)

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

// BenchmarkMerge merges every rollout record of a 10,000 x 20 capture dir (one op = the whole run).
// MB/s counts capture bytes read; records/s counts calls attached. "sequential" is one goroutine,
// "parallel" uses GOMAXPROCS workers (as modelcalls merge does).
func BenchmarkMerge(b *testing.B) {
	rollouts := benchRollouts
	if testing.Short() {
		rollouts = 100
	}
	dir := b.TempDir()
	records, captureBytes := writeBenchCapture(b, dir, rollouts, benchCallsPerRollout)
	m, err := NewMerger([]string{dir}, MergeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	calls := rollouts * benchCallsPerRollout
	run := func(b *testing.B, m *Merger, workers int) {
		b.SetBytes(captureBytes)
		b.ReportAllocs()
		var outBytes int64
		start, cpu := time.Now(), processCPU()
		for b.Loop() {
			outBytes = mergeAll(b, m, records, workers)
		}
		elapsed := time.Since(start).Seconds()
		reportCPU(b, cpu, captureBytes)
		b.ReportMetric(float64(calls*b.N)/elapsed, "records/s")
		b.ReportMetric(float64(rollouts*b.N)/elapsed, "rollouts/s")
		b.ReportMetric(float64(outBytes)/float64(rollouts), "outB/rollout")
	}
	b.Run("sequential", func(b *testing.B) { run(b, m, 1) })
	b.Run("parallel", func(b *testing.B) { run(b, m, runtime.GOMAXPROCS(0)) })
	// "payloads" is the sequential run with IncludePayloads (request and response objects copied
	// into every attached call).
	b.Run("payloads", func(b *testing.B) {
		mp, err := NewMerger([]string{dir}, MergeOptions{IncludePayloads: true})
		if err != nil {
			b.Fatal(err)
		}
		run(b, mp, 1)
	})
}

func mergeAll(b *testing.B, m *Merger, records [][]byte, workers int) int64 {
	var total int64
	var mu sync.Mutex
	jobs := make(chan []byte)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			w := bufio.NewWriter(discard{})
			var n int64
			for rec := range jobs {
				out, res, err := m.Merge(context.Background(), rec)
				if err != nil || !res.Attached || res.Calls != benchCallsPerRollout || len(res.Gaps) != 0 {
					b.Errorf("merge: %v %+v", err, res)
				}
				w.Write(out)
				n += int64(len(out))
			}
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	for _, r := range records {
		jobs <- r
	}
	close(jobs)
	wg.Wait()
	return total
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// reportCPU reports "cpuMB/s", the bytes of each op per second of the process's CPU time since
// start (processCPU): steadier than MB/s on a busy machine, and what row 6 compares.
func reportCPU(b *testing.B, start time.Duration, bytes int64) {
	if d := processCPU() - start; d > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/1e6/d.Seconds(), "cpuMB/s")
	}
}
