package record

import (
	"testing"

	"github.com/modelcalls/modelcalls/internal/jsonscan"
)

// BenchmarkBuildMembers builds the record of each fixture-shaped capture line in turn from a
// validating pass done once beforehand (each line keeps its own scanner): the record builder alone,
// as ReadAvailableRecords runs it (strings sharing the line, one box per record).
func BenchmarkBuildMembers(b *testing.B) {
	pool := benchLinePool(b)
	type scanned struct {
		line    []byte
		members []jsonscan.Member
		sc      *jsonscan.Scanner
	}
	lines := make([]scanned, len(pool))
	var size int64
	for i, l := range pool {
		l = jsonscan.TrimWS(l)
		sc := &jsonscan.Scanner{Nested: "response"}
		m, err := sc.Members(l, nil)
		if err != nil {
			b.Fatal(err)
		}
		lines[i] = scanned{l, m, sc}
		size += int64(len(l))
	}
	b.SetBytes(size / int64(len(lines)))
	b.ReportAllocs()
	recs := make([]ModelCallRecord, 1)
	i := 0
	for b.Loop() {
		s := &lines[i%len(lines)]
		recs[0] = ModelCallRecord{}
		if err := buildRecordMembers(&recs[0], s.line, s.members, s.sc, i, true, nil); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
