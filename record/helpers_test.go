package record

import (
	"fmt"
	"strings"

	"github.com/modelcalls/modelcalls/internal/capturetest/capturefile"
)

// Test helpers shared by the package's tests.

// ptr returns a pointer to v (for expected values in tables).
func ptr[T any](v T) *T { return &v }

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
