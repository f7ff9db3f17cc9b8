package otelexport

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

func TestBrief(t *testing.T) {
	page := "<!DOCTYPE HTML>\n<html>\n<head><title>Error response</title></head>\n<body>\n<h1>Error response</h1>\n<p>Error code: 501</p>\n</body>\n</html>"
	long := strings.Repeat("é", 200) // 400 bytes, 2 per character
	// bodyErr is how the OTLP/HTTP exporters quote an endpoint's body.
	bodyErr := func(status, body string) error {
		return fmt.Errorf("traces export: %w", fmt.Errorf("failed to send to http://h/v1/traces: %s (%w)", status, fmt.Errorf("body: %s", body)))
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"html page", bodyErr("501 Not Implemented", page),
			"traces export: failed to send to http://h/v1/traces: 501 Not Implemented (body: Error response Error response Error code: 501)"},
		{"long body", bodyErr("400 Bad Request", long),
			"traces export: failed to send to http://h/v1/traces: 400 Bad Request (body: " + strings.Repeat("é", 50) + "... (400 bytes))"},
		{"joined", errors.Join(errors.New("first"), bodyErr("400 Bad Request", "a\n  b")),
			"first traces export: failed to send to http://h/v1/traces: 400 Bad Request (body: a b)"},
		{"no body", errors.New("rpc error: code = Unavailable"), "rpc error: code = Unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Brief(tc.err)
			if got.Error() != tc.want {
				t.Errorf("got  %q\nwant %q", got.Error(), tc.want)
			}
			if !errors.Is(got, tc.err) {
				t.Error("the brief error does not unwrap to the exporter's")
			}
		})
	}
	refused := fmt.Errorf("traces export: %w", syscall.ECONNREFUSED)
	if Brief(refused) != refused || Brief(nil) != nil {
		t.Error("an error needing no change is not returned as it is")
	}
}
