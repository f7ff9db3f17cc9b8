package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/rollout"
)

// Micro-benchmarks of the per-call hot paths that have none in their own package: the capture
// line's encoding, append (and its fsync floor), claims, and one rollout's read + build. SSE
// decoding, stream reassembly, record building and merge have theirs in sse, dialect and the root
// package (docs/benchmarks.md lists all). Run: go test -run '^$' -bench . -benchmem ./test/bench

func benchFixtures(b *testing.B) *fixtures {
	b.Helper()
	fx, err := loadFixtures()
	if err != nil {
		b.Fatal(err)
	}
	return fx
}

// benchExchange is the exchange of one non-streaming call of the harness: a real agent's request
// and a recorded response.
func benchExchange(b *testing.B, fx *fixtures) *capture.Exchange {
	b.Helper()
	var resp bytes.Buffer
	if err := json.Compact(&resp, fx.jsonResponse); err != nil {
		b.Fatal(err)
	}
	status, ttft := 200, 1.23
	src, attempted := "upstream", true
	return &capture.Exchange{
		ModelCallID: capture.NewModelCallID(), Dialect: "responses",
		ModelRef:  &rollout.ModelServerRef{Type: rollout.ModelServerRefType, Name: "bench"},
		StartedAt: 1764432000.123456, CompletedAt: 1764432000.234567, LatencyMS: 111.11, LatencyTTFTMS: &ttft,
		StatusCode: &status, Request: fx.jsonRequest, Response: resp.Bytes(),
		ResponseSource: &src, UpstreamAttempted: &attempted, UpstreamStatusCode: &status,
	}
}

// benchLine is benchExchange over the harness's fixtures, and its capture line.
func benchLine(b *testing.B) (*capture.Exchange, []byte) {
	b.Helper()
	ex := benchExchange(b, benchFixtures(b))
	line, err := capture.EncodeExchange(ex)
	if err != nil {
		b.Fatal(err)
	}
	return ex, line
}

// BenchmarkEncodeExchange encodes that exchange into its capture line.
func BenchmarkEncodeExchange(b *testing.B) {
	ex, line := benchLine(b)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := capture.EncodeExchange(ex); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStoreAppend appends that line to one rollout file: open, flock, tail check, write,
// fsync, close. The fsync dominates; compare with BenchmarkFsync on the same disk.
func BenchmarkStoreAppend(b *testing.B) {
	_, line := benchLine(b)
	s, err := capture.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Append("bench", line); err != nil { // file exists: no directory sync in the loop
		b.Fatal(err)
	}
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Append("bench", line); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFsync is the floor of BenchmarkStoreAppend: write the same number of bytes to an open
// file and fsync it.
func BenchmarkFsync(b *testing.B) {
	_, line := benchLine(b)
	p, err := newFsyncProbe(b.TempDir(), len(line)+1)
	if err != nil {
		b.Fatal(err)
	}
	defer p.close()
	b.SetBytes(int64(len(line) + 1))
	for b.Loop() {
		if _, _, err := p.run(1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadAvailableRecords reads one rollout of 20 calls (NeMo Gym lines) and builds its
// records: the per-rollout step of merge.
func BenchmarkReadAvailableRecords(b *testing.B) {
	fx := benchFixtures(b)
	d, err := writeMergeData(b.TempDir(), fx, 1, 20)
	if err != nil {
		b.Fatal(err)
	}
	s, err := capture.OpenExisting(d.dir)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(d.bytes)
	b.ReportAllocs()
	for b.Loop() {
		recs, damaged, err := modelcalls.ReadAvailableRecords(s, d.ids[0])
		if err != nil || damaged != 0 || len(recs) != 20 {
			b.Fatal(fmt.Sprint(len(recs), damaged, err))
		}
	}
}

// BenchmarkClaimRelease creates and removes the claim of one call (the marker that a capture write is
// outstanding, which merge waits for; docs/format.md section 5), which the gateway does
// around every captured call; parallel runs one rollout per goroutine.
func BenchmarkClaimRelease(b *testing.B) {
	s, err := capture.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, err := s.Claim("bench", capture.NewModelCallID())
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Release(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			id := fmt.Sprintf("bench-%d", n.Add(1))
			for pb.Next() {
				c, err := s.Claim(id, capture.NewModelCallID())
				if err != nil {
					b.Error(err)
					return
				}
				if err := c.Release(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
