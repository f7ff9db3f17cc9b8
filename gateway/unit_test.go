package gateway

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/modelcalls/modelcalls/dialect"
)

func TestErrorCategory(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    verdict
		want string // "" means null
	}{
		{"clean json", verdict{status: 200, bodyLen: 10, parsed: true}, ""},
		{"empty 200", verdict{status: 200}, ""},
		{"429", verdict{status: 429, bodyLen: 10, parsed: true}, "rate_limit"},
		{"500 unparsed", verdict{status: 500, bodyLen: 10}, "upstream_error"},
		{"stream complete", verdict{status: 200, streaming: true, terminal: dialect.TerminalComplete, bodyLen: 10, parsed: true}, ""},
		{"stream error event", verdict{status: 200, streaming: true, terminal: dialect.TerminalError, bodyLen: 10, parsed: true}, "upstream_error"},
		{"stream incomplete", verdict{status: 200, streaming: true, terminal: dialect.TerminalIncomplete, parsed: true, bodyLen: 1}, "incomplete"},
		{"stream truncated", verdict{status: 200, streaming: true, bodyLen: 10, parsed: true}, "stream_truncated"},
		{"stream truncated nothing parsed", verdict{status: 200, streaming: true, bodyLen: 10}, "stream_truncated"},
		{"status beats terminal", verdict{status: 400, streaming: true, terminal: dialect.TerminalError}, "client_error"},
		{"parse error", verdict{status: 200, bodyLen: 5}, "capture_parse_error"},
		{"decode failed", verdict{status: 200, bodyLen: 5, decodeFailed: true}, "capture_parse_error"},
		{"decode failed stream", verdict{status: 200, streaming: true, decodeFailed: true}, "capture_parse_error"},
		{"cancelled beats status", verdict{status: 429, failure: failCancelled}, "cancelled"},
		{"cancelled before headers", verdict{failure: failCancelled}, "cancelled"},
		{"connection mid-body", verdict{status: 200, failure: failConnection, bodyLen: 3}, "connection"},
		{"timeout mid-body", verdict{status: 200, failure: failTimeout}, "timeout"},
		{"failure keeps status category", verdict{status: 403, failure: failConnection}, "auth"},
		{"exception", verdict{failure: failException}, "exception"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := errorCategory(tc.v)
			if (got == nil) != (tc.want == "") || got != nil && *got != tc.want {
				t.Errorf("errorCategory(%+v) = %v, want %q", tc.v, deref(got), tc.want)
			}
		})
	}
}

func deref(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestRelayedProvenance(t *testing.T) {
	h := http.Header{}
	p := relayed(h, 201)
	if *p.source != SourceUpstream || !*p.attempted || *p.upstreamCode != 201 || p.localReason != nil {
		t.Errorf("undeclared: %+v", p)
	}
	h.Set(HeaderLocalResponseReason, "request_too_large")
	p = relayed(h, 413)
	if p.source != nil || p.attempted != nil || p.upstreamCode != nil || *p.localReason != "request_too_large" {
		t.Errorf("only a reason declared: source %v attempted %v code %v", p.source, p.attempted, p.upstreamCode)
	}
	h.Set(HeaderLocalResponseReason, string(bytes.Repeat([]byte("x"), 201)))
	h.Set(HeaderUpstreamStatusCode, "1000")
	h.Set(HeaderUpstreamAttempted, "FALSE")
	p = relayed(h, 500)
	if p.localReason != nil || p.upstreamCode != nil || p.attempted == nil || *p.attempted {
		t.Errorf("bounds: reason %v code %v attempted %v", p.localReason, p.upstreamCode, p.attempted)
	}
}

func TestClientIDs(t *testing.T) {
	for _, tc := range []struct {
		h                http.Header
		session, message any
	}{
		{http.Header{}, nil, nil},
		{http.Header{"X-Session-Id": {""}, "Session-Id": {"s2"}}, "s2", nil},
		{http.Header{"X-Session-Id": {"", "s1"}}, "s1", nil},
		{http.Header{"X-Claude-Code-Session-Id": {"a", "b"}, "Session_id": {"c"}}, nil, nil},
		{http.Header{"X-Assistant-Message-Id": {"m", "m"}}, nil, "m"},
	} {
		s, m := clientIDs(tc.h)
		if deref(s) != tc.session || deref(m) != tc.message {
			t.Errorf("clientIDs(%v) = %v, %v; want %v, %v", tc.h, deref(s), deref(m), tc.session, tc.message)
		}
	}
}

func TestIsUpgrade(t *testing.T) {
	for _, tc := range []struct {
		h    http.Header
		want bool
	}{
		{http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}, true},
		{http.Header{"Connection": {"keep-alive, upgrade"}, "Upgrade": {"websocket"}}, true},
		{http.Header{"Connection": {"keep-alive"}, "Upgrade": {"websocket"}}, false},
		{http.Header{"Connection": {"Upgrade"}}, false},
		{http.Header{}, false},
	} {
		if got := isUpgrade(tc.h); got != tc.want {
			t.Errorf("isUpgrade(%v) = %v", tc.h, got)
		}
	}
}

func TestIsEventStream(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream": true, "text/event-stream; charset=utf-8": true, "Text/Event-Stream": true,
		"application/json": false, "": false, "text/event-streams": false,
	} {
		if got := isEventStream(ct); got != want {
			t.Errorf("isEventStream(%q) = %v", ct, got)
		}
	}
}

func TestSpool(t *testing.T) {
	dir := t.TempDir()
	s := newSpool(8, dir)
	s.Write([]byte("abcd"))
	s.Write([]byte("efgh"))
	if b, ok := s.Memory(); !ok || string(b) != "abcdefgh" {
		t.Fatalf("in memory at the threshold: %q %v", b, ok)
	}
	s.Write([]byte("ij"))
	if _, ok := s.Memory(); ok {
		t.Fatal("still in memory past the threshold")
	}
	s.Write([]byte("kl"))
	got, _ := io.ReadAll(s.Reader())
	if string(got) != "abcdefghijkl" || s.Size() != 12 {
		t.Fatalf("reader %q size %d", got, s.Size())
	}
	if b, err := s.Bytes(100); err != nil || string(b) != "abcdefghijkl" {
		t.Fatalf("Bytes = %q, %v", b, err)
	}
	if _, err := s.Bytes(5); err != errTooLarge {
		t.Fatalf("Bytes past max: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("spool file visible in %s: %v", dir, ents)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSpoolCreateFails(t *testing.T) {
	s := newSpool(1, "/nonexistent/dir/for/spool")
	if _, err := s.Write([]byte("abc")); err == nil || s.Err() == nil {
		t.Fatal("no error when the temp file cannot be created")
	}
	if _, err := s.Write([]byte("d")); err == nil {
		t.Fatal("writes after a failure succeed")
	}
	s.Close()
}

func TestStatusClass(t *testing.T) {
	for code, want := range map[int]string{0: "none", 200: "2xx", 404: "4xx", 529: "5xx", 101: "1xx"} {
		if got := statusClass(code); got != want {
			t.Errorf("statusClass(%d) = %s", code, got)
		}
	}
}
