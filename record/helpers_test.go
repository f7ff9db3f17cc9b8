package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
)

// Test helpers shared by the package's tests.

// ptr returns a pointer to v (for expected values in tables).
func ptr[T any](v T) *T { return &v }

// decodeObject decodes a JSON object keeping numbers as json.Number.
func decodeObject(t testing.TB, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", clipRaw(b), err)
	}
	return m
}

func intOrNil[T int | int64](p *T) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}

func toolCallsString(calls []ToolCall) string {
	var parts []string
	for _, c := range calls {
		parts = append(parts, fmt.Sprintf("{%s %s %s}", capturefile.StrOrNil(c.CallID), capturefile.StrOrNil(c.Name), c.Arguments))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
