package record

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/modelcalls/modelcalls/capture"
)

// TestAppendFloatFast: appendFloat writes what capture.AppendFloat writes for the floats a record
// holds (timestamps with up to 7 decimals, latencies with up to 3, their neighbours one ulp away)
// and for random doubles of every magnitude and sign.
func TestAppendFloatFast(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	check := func(f float64) {
		t.Helper()
		got, want := string(appendFloat(nil, f)), string(capture.AppendFloat(nil, f))
		if got != want {
			t.Fatalf("appendFloat(%v) = %s, capture.AppendFloat %s", f, got, want)
		}
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 0.02, 0.01, 1e-4, 9.999e-5, 1e15, 1e16, 1<<52 - 0.5, 1 << 52,
		1795968571.513956, 1795968571.5139756, 123.0, 400, 0.30000000000000004, math.MaxFloat64, math.SmallestNonzeroFloat64,
		math.Inf(1), math.NaN()} {
		check(f)
		check(-f)
	}
	for range 300000 {
		decimals := r.IntN(8)
		var f float64
		switch r.IntN(4) {
		case 0: // a timestamp
			f = float64(1_700_000_000+r.IntN(200_000_000)) + float64(r.IntN(int(math.Pow10(decimals))))/math.Pow10(decimals)
		case 1: // a latency in milliseconds
			f = float64(r.IntN(1_000_000)) / math.Pow10(r.IntN(4))
		case 2: // any double
			f = math.Float64frombits(r.Uint64())
		default: // any magnitude in the fast path's range
			f = math.Ldexp(r.Float64()+0.5, r.IntN(70)-16)
		}
		check(f)
		check(math.Nextafter(f, math.Inf(1)))
		check(math.Nextafter(f, math.Inf(-1)))
	}
}

func BenchmarkAppendFloat(b *testing.B) {
	fs := []float64{1795968571.513956, 1795968571.5139756, 0.02, 12.5, 1234.57}
	var buf []byte
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			for _, f := range fs {
				buf = appendFloat(buf[:0], f)
			}
		}
	})
	b.Run("capture", func(b *testing.B) {
		for b.Loop() {
			for _, f := range fs {
				buf = capture.AppendFloat(buf[:0], f)
			}
		}
	})
}

// FuzzAppendFloat: appendFloat writes what capture.AppendFloat writes for any double.
func FuzzAppendFloat(f *testing.F) {
	for _, v := range []float64{1795968571.513956, 1795968571.5139756, 0.02, 1e-4, 1 << 52, -3.5} {
		f.Add(math.Float64bits(v))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		v := math.Float64frombits(bits)
		if got, want := string(appendFloat(nil, v)), string(capture.AppendFloat(nil, v)); got != want {
			t.Fatalf("appendFloat(%v) = %s, capture.AppendFloat %s", v, got, want)
		}
	})
}
