package tokens

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestReadWorkLinear: Read's time grows with its input's size, not faster, for the shapes where a
// loop over chunks could compare each with all before it: 32 times the input may take at most 250
// times as long (the best of five runs each; linear reading measures 30 to 90 on a loaded
// 2-core machine, up to about 110 while other tests run; the quadratic prompt dedup it replaced
// about 340).
func TestReadWorkLinear(t *testing.T) {
	shapes := map[string]func(n int) Call{
		"sse, a prompt per chunk": func(n int) Call {
			var b strings.Builder
			for i := 0; i < n; i++ {
				fmt.Fprintf(&b, "data: {\"prompt_token_ids\":[%d,1,2,3,4,5,6,7,8,9],\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"token_ids\":[%d]}]}\n\n", i, i)
			}
			return Call{ResponseRaw: []byte(b.String())}
		},
		"sse, a choice per chunk": func(n int) Call {
			var b strings.Builder
			for i := 0; i < n; i++ {
				fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":%d,\"delta\":{\"content\":\"x\"},\"token_ids\":[%d],\"logprobs\":{\"content\":[{\"token\":\"x\",\"logprob\":-1}]}}]}\n\n", i*7919, i)
			}
			return Call{ResponseRaw: []byte(b.String())}
		},
		"json, logprob entries": func(n int) Call {
			var b strings.Builder
			b.WriteString(`{"choices":[{"index":0,"token_ids":[`)
			for i := 0; i < n; i++ {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, "%d", i)
			}
			b.WriteString(`],"logprobs":{"content":[`)
			for i := 0; i < n; i++ {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"token":"token_id:%d","logprob":-0.5,"top_logprobs":[{"token":"a","logprob":-1}]}`, i)
			}
			b.WriteString(`]}}],"usage":{"completion_tokens":3}}`)
			return Call{Response: []byte(b.String())}
		},
		"legacy top_logprobs": func(n int) Call {
			var b strings.Builder
			b.WriteString(`{"choices":[{"index":0,"logprobs":{"tokens":[`)
			for i := 0; i < n; i++ {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(`"a"`)
			}
			b.WriteString(`],"token_logprobs":[],"top_logprobs":[`)
			for i := 0; i < n; i++ {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(`{"a":-1,"b":-2}`)
			}
			b.WriteString(`]}}]}`)
			return Call{Response: []byte(b.String())}
		},
		"sglext output_ids lists": func(n int) Call {
			var b strings.Builder
			b.WriteString("data: {\"sglext\":{\"output_ids\":[")
			for i := 0; i < n; i++ {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString("[1]")
			}
			b.WriteString("]}}\n\n")
			return Call{ResponseRaw: []byte(b.String())}
		},
		"malformed fields": func(n int) Call {
			var b strings.Builder
			for i := 0; i < n; i++ {
				fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"token_ids\":\"x\",\"logprobs\":{\"content\":[1,2]}}],\"prompt_token_ids\":\"y\"}\n\n")
			}
			return Call{ResponseRaw: []byte(b.String())}
		},
	}
	// The best of five runs of each size, the sizes taken in turn, so that a busy moment of a
	// shared machine does not fall on one size only.
	timed := func(small, large Call) (ts, tl time.Duration) {
		ts, tl = time.Duration(1<<63-1), time.Duration(1<<63-1)
		// The collector is off while timing: under a loaded machine's contention it costs the
		// large input more than its share, which no reading of the input does.
		run := func(c Call) time.Duration {
			runtime.GC()
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			start := time.Now()
			Read(c)
			return time.Since(start)
		}
		for range 5 {
			ts, tl = min(ts, run(small)), min(tl, run(large))
		}
		return ts, tl
	}
	for name, mk := range shapes {
		small, large := mk(500), mk(16000)
		ts, tl := timed(small, large)
		ratio := float64(tl) / float64(ts)
		t.Logf("%-26s %8d bytes %10v, %9d bytes %10v: %.1f times", name, len(small.Response)+len(small.ResponseRaw), ts,
			len(large.Response)+len(large.ResponseRaw), tl, ratio)
		if ratio > 250 {
			t.Errorf("%s: 32 times the input took %.0f times as long", name, ratio)
		}
	}
}
