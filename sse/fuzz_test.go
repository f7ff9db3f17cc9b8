package sse

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzDecoder checks that decoding never panics, that the result does not depend on how the body
// is chunked, and that no line break survives inside a field.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte("event: a\r\ndata: x\r\n\r\n"), uint8(3))
	f.Add([]byte("data: 1\r\rdata: 2\n\r\n: c\n\ndata: 3"), uint8(1))
	f.Add([]byte("\ufeffdata:\u00a0x\ndata\n\n"), uint8(7))
	f.Add([]byte("id: 1\nretry: 5\nevent:\x1cdone\r"), uint8(2))
	f.Fuzz(func(t *testing.T, body []byte, step uint8) {
		whole := Parse(body)
		n := int(step)%13 + 1
		if got := feedEvery(body, n); !reflect.DeepEqual(got, whole) {
			t.Fatalf("chunks of %d differ from whole body:\n got %#v\nwant %#v", n, got, whole)
		}
		if got := feedEvery(body, 1); !reflect.DeepEqual(got, whole) {
			t.Fatalf("byte by byte differs from whole body:\n got %#v\nwant %#v", got, whole)
		}
		for _, ev := range whole {
			if strings.ContainsAny(ev.Type+ev.ID, "\r\n") || strings.ContainsRune(ev.Data, '\r') {
				t.Fatalf("line break inside a field: %#v", ev)
			}
			if !ev.HasData && ev.Data != "" {
				t.Fatalf("data without HasData: %#v", ev)
			}
		}
	})
}
