//go:build unix

package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/mattn/go-runewidth"

	"github.com/modelcalls/modelcalls/internal/demo"
)

// TestDiffOnTerminal: diff on a terminal fits its width: at 200 columns the full table, at 80 the
// compact one and a line naming what it leaves out, every line within the terminal.
func TestDiffOnTerminal(t *testing.T) {
	var dirs []string
	for range 2 {
		res, err := demo.Run(context.Background(), demo.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, res.CaptureDir)
	}
	for _, tc := range []struct {
		cols         int
		header, hint string
	}{
		{200, "#  A call  B call  differs  status A/B  tokens in A/B  tokens out A/B  latency ms A/B  tool calls A / B", ""},
		{80, "#  call A/B  differs  status A/B  tok in A/B  tok out A/B  tools A/B", "80 columns; not shown: latency ms A/B, tool calls A / B"},
	} {
		shown := onPTY(t, tc.cols, "diff", "--capture-dir", dirs[0], "--capture-dir", dirs[1], "demo-responses-sse")
		for _, l := range strings.Split(shown, "\n") {
			if runewidth.StringWidth(l) > tc.cols {
				t.Errorf("%d columns: line is %d wide: %s", tc.cols, runewidth.StringWidth(l), l)
			}
		}
		if !strings.Contains(shown, "The runs match: 2 calls") || !strings.Contains(shown, "\n"+tc.header+"\n") ||
			strings.Contains(shown, "not shown:") != (tc.hint != "") || !strings.Contains(strings.ReplaceAll(shown, "\n", " "), tc.hint) {
			t.Errorf("%d columns: want the header %q and the hint %q:\n%s", tc.cols, tc.header, tc.hint, shown)
		}
	}
}
