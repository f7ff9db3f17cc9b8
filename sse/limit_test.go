package sse

import (
	"bytes"
	"strings"
	"testing"
)

// TestDecoderMax covers the Max limit: lines and event data up to Max are decoded whole; past it
// the event is emitted Truncated with only its first PrefixBytes, in every chunking, and the
// events around it are untouched.
func TestDecoderMax(t *testing.T) {
	const max = 8 << 10
	big := strings.Repeat("x", 3*max)
	tests := []struct {
		name      string
		in        string
		wantData  []string // Data of each event (prefix for a truncated one)
		wantTrunc []bool
		wantType  []string
	}{
		{"line at the limit is whole", "data: " + big[:max-6] + "\n\n",
			[]string{big[:max-6]}, []bool{false}, []string{""}},
		{"one over-long data line", "event: response.completed\ndata: {\"type\":\"response.completed\"," + big + "\n\ndata: after\n\n",
			[]string{(`{"type":"response.completed",` + big)[:PrefixBytes-6], "after"}, []bool{true, false}, []string{"response.completed", ""}},
		{"many data lines adding up past the limit", strings.Repeat("data: "+big[:max/4]+"\n", 6) + "\n" + "data: [DONE]\n\n",
			[]string{strings.Repeat(big[:max/4]+"\n", 6)[:PrefixBytes], "[DONE]"}, []bool{true, false}, []string{"", ""}},
		{"over-long event line", "event: " + big + "\ndata: x\n\n", []string{"x"}, []bool{true}, []string{big[:PrefixBytes-7]}},
		{"over-long comment is dropped", ":" + big + "\ndata: y\n\n", []string{"y"}, []bool{false}, []string{""}},
		{"unterminated over-long last line", "data: " + big, []string{big[:PrefixBytes-6]}, []bool{true}, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []int{1, 7, 4096, len(tt.in)} {
				d := Decoder{Max: max}
				var got []Event
				emit := func(ev Event) { got = append(got, ev) }
				in := []byte(tt.in)
				for off := 0; off < len(in); off += n {
					d.Feed(in[off:min(off+n, len(in))], emit)
					if cap(d.line) > 2*max || cap(d.data) > 2*max {
						t.Fatalf("chunks of %d: buffers grew to %d / %d bytes, Max is %d", n, cap(d.line), cap(d.data), max)
					}
				}
				d.Flush(emit)
				if len(got) != len(tt.wantData) {
					t.Fatalf("chunks of %d: %d events, want %d", n, len(got), len(tt.wantData))
				}
				for i, ev := range got {
					if ev.Data != tt.wantData[i] || ev.Truncated != tt.wantTrunc[i] || ev.Type != tt.wantType[i] {
						t.Fatalf("chunks of %d: event %d = {type %.40q, data %.40q (%d bytes), truncated %v}, want {%.40q, %.40q (%d bytes), %v}",
							n, i, ev.Type, ev.Data, len(ev.Data), ev.Truncated, tt.wantType[i], tt.wantData[i], len(tt.wantData[i]), tt.wantTrunc[i])
					}
				}
			}
		})
	}
}

// TestDecoderNoMax: without Max nothing is cut.
func TestDecoderNoMax(t *testing.T) {
	big := bytes.Repeat([]byte("y"), 1<<20)
	evs := Parse(append(append([]byte("data: "), big...), "\n\n"...))
	if len(evs) != 1 || len(evs[0].Data) != len(big) || evs[0].Truncated {
		t.Fatalf("got %d events", len(evs))
	}
}

// FuzzDecoderMax: a Max never adds, drops or merges events; an event within the limit is decoded
// exactly as without one, and a truncated event's data and type are prefixes of the full ones.
func FuzzDecoderMax(f *testing.F) {
	f.Add([]byte("event: a\ndata: 0123456789abcdef\n\ndata: x\r\n\r\n: comment that is long\ndata: y"), uint8(8), uint8(3))
	f.Add([]byte("data: 1\ndata: 22222222222\nid: 7\n\n\xef\xbb\xbfdata: z\n\n"), uint8(4), uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, max, chunk uint8) {
		want := Parse(body)
		d := Decoder{Max: int(max) + 1}
		var got []Event
		emit := func(ev Event) { got = append(got, ev) }
		n := int(chunk) + 1
		for off := 0; off < len(body); off += n {
			d.Feed(body[off:min(off+n, len(body))], emit)
		}
		d.Flush(emit)
		if len(got) != len(want) {
			t.Fatalf("%d events with Max %d, %d without", len(got), d.Max, len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if !g.Truncated {
				if g != w {
					t.Fatalf("event %d within the limit differs: %+v vs %+v", i, g, w)
				}
				continue
			}
			if !strings.HasPrefix(w.Data, g.Data) || !strings.HasPrefix(w.Type, g.Type) || g.HasData != w.HasData {
				t.Fatalf("truncated event %d is not a prefix: %+v vs %+v", i, g, w)
			}
		}
	})
}
