package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mattn/go-runewidth"

	"github.com/modelcalls/modelcalls/internal/demo"
	"github.com/modelcalls/modelcalls/rundiff"
)

// TestDiff runs diff on captures the real gateway wrote: the demo run twice into two dirs (two
// runs of the same rollouts: every id and time differs, nothing else) match; two rollouts of one
// run that speak the same dialect through different models part at the first call's model.
func TestDiff(t *testing.T) {
	run := func() string {
		res, err := demo.Run(context.Background(), demo.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return res.CaptureDir
	}
	a, b := run(), run()

	out, errOut, code := runCLI(t, "", "diff", "--capture-dir", a, "--capture-dir", b, "demo-responses-sse")
	if code != 0 || !strings.Contains(out, "The runs match: 2 calls") || errOut != "" {
		t.Errorf("two runs of one rollout: exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
	}

	out, errOut, code = runCLI(t, "", "diff", "--capture-dir", a, "demo-chat-json", "demo-chat-sse")
	if code != 1 || errOut != "" {
		t.Fatalf("two rollouts: exit %d, stderr %q; want 1 and nothing", code, errOut)
	}
	for _, want := range []string{"A: demo-chat-json in " + a + ": 2 calls", "B: demo-chat-sse in " + a,
		"First difference: call #0 (A call_index 0, B call_index 0): model\n  A: deepseek-reasoner\n  B: gpt-5-nano-2025-08-07",
		"tool calls A / B", "get_weather"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}

	out, _, code = runCLI(t, "", "diff", "--capture-dir", a, "--capture-dir", b, "demo-messages-rate-limited", "demo-messages-json", "--json")
	var res struct {
		Same  bool
		First struct {
			Position int
			What     string
			A, B     string
		}
		Pairs []struct{ Differs []string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 {
		t.Fatalf("--json: exit %d, %v:\n%s", code, err, out)
	}
	// The same first request, answered 429 in A and with a tool call in B; B goes on alone.
	if res.Same || res.First.Position != 0 || res.First.What != "status" || res.First.A != "429" || res.First.B != "200" ||
		len(res.Pairs) != 2 || strings.Join(res.Pairs[1].Differs, ",") != "missing" {
		t.Errorf("429 vs a tool loop: %+v", res)
	}

	checkExits(t, []exitCase{
		{"one run", []string{"diff", "--capture-dir", a, "demo-chat-json"}, ExitUsage, "give a second rollout or a second --capture-dir"},
		{"no rollout", []string{"diff", "--capture-dir", a}, ExitUsage, "want ROLLOUT [ROLLOUT2]"},
		{"three dirs", []string{"diff", "--capture-dir", a, "--capture-dir", b, "--capture-dir", a, "r"}, ExitUsage, "given 3 times"},
		{"bad id", []string{"diff", "--capture-dir", a, "r", "../x"}, ExitUsage, "ROLLOUT2"},
		{"unknown rollout", []string{"diff", "--capture-dir", a, "demo-chat-json", "nope"}, ExitNotFound, "no rollout nope in"},
		{"mistyped rollout", []string{"diff", "--capture-dir", a, "demo-chat-json", "demo-chat-jsn"}, ExitNotFound,
			"no rollout demo-chat-jsn in " + a + "; did you mean demo-chat-json or demo-chat-sse?"},
		{"missing dir", []string{"diff", "--capture-dir", filepath.Join(a, "missing"), "--capture-dir", b, "r"}, ExitNotFound, ""},
		{"no dir", []string{"diff", "r1", "r2"}, ExitUsage, "--capture-dir is required"},
	})
}

// TestDiffFitsWidth: at each width every line of the report fits, nothing is cut (what differs
// wraps between its items, names stay whole), the widest layout that fits is used, and a
// narrower one names the columns it leaves out.
func TestDiffFitsWidth(t *testing.T) {
	res, err := demo.Run(context.Background(), demo.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	compare := func(a, b string) *rundiff.Result {
		ra, err := loadRun(runRef{res.CaptureDir, a})
		if err != nil {
			t.Fatal(err)
		}
		rb, err := loadRun(runRef{res.CaptureDir, b})
		if err != nil {
			t.Fatal(err)
		}
		return rundiff.Compare(ra, rb)
	}
	chat := compare("demo-chat-json", "demo-chat-sse")                     // model,messages,answer; one tool call each
	limited := compare("demo-messages-rate-limited", "demo-messages-json") // a 44-character differs list
	for _, tc := range []struct {
		name   string
		res    *rundiff.Result
		width  int
		header string // the table's header line
		hint   string // the line under it, "" for none
	}{
		{"chat", chat, 0, "#  A call  B call  differs                status A/B  tokens in A/B  tokens out A/B  latency ms A/B  tool calls A / B", ""},
		{"chat", chat, 126, "#  A call  B call  differs                status A/B  tokens in A/B  tokens out A/B  latency ms A/B  tool calls A / B", ""},
		{"chat", chat, 100, "#  call A/B  differs                status A/B  tok in A/B  tok out A/B  tools A/B",
			"100 columns; not shown: latency ms A/B, tool calls A / B (--json has every field)"},
		{"chat", chat, 80, "#  call A/B  differs              status A/B  tok in A/B  tok out A/B  tools A/B",
			"80 columns; not shown: latency ms A/B, tool calls A / B (--json has every field)"},
		{"limited", limited, 142, "#  A call  B call  differs                                       status A/B  tokens in A/B  tokens out A/B  latency ms A/B  tool calls A / B", ""},
		{"limited", limited, 80, "#  call A/B  differs              status A/B  tok in A/B  tok out A/B  tools A/B",
			"80 columns; not shown: latency ms A/B, tool calls A / B (--json has every field)"},
		{"limited", limited, 50, "#  differs                   status A/B  tools A/B",
			"50 columns; not shown: A call, B call, tokens in A/B, tokens out A/B, latency ms A/B, tool calls A / B (--json has every field)"},
	} {
		var b strings.Builder
		writeDiff(&b, tc.res, tc.width)
		out := b.String()
		for _, l := range strings.Split(out, "\n") {
			if tc.width > 0 && runewidth.StringWidth(l) > tc.width {
				t.Errorf("%s at %d: line is %d wide: %s", tc.name, tc.width, runewidth.StringWidth(l), l)
			}
		}
		if strings.Contains(out, "…") {
			t.Errorf("%s at %d: something was cut:\n%s", tc.name, tc.width, out)
		}
		if !strings.Contains(out, "\n"+tc.header+"\n") {
			t.Errorf("%s at %d: want the header\n%s\nin\n%s", tc.name, tc.width, tc.header, out)
		}
		if got := strings.Contains(out, "not shown:"); got != (tc.hint != "") || !strings.Contains(strings.ReplaceAll(out, "\n", " "), tc.hint) {
			t.Errorf("%s at %d: want the hint %q:\n%s", tc.name, tc.width, tc.hint, out)
		}
		// Every item of what differs is there whole, wrapped or not, and the dirs are never broken.
		for _, item := range []string{"status,", "finish_reason,", "tool_calls,", "answer,", "error", " " + res.CaptureDir + ":"} {
			if tc.res == limited && !strings.Contains(out, item) {
				t.Errorf("%s at %d: no %q:\n%s", tc.name, tc.width, item, out)
			}
		}
	}
}
