//go:build unix

package cli

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/creack/pty"
	"github.com/mattn/go-runewidth"
)

// onPTY runs `modelcalls <args>` with stdout on a pseudo-terminal of the given width and returns what
// the terminal showed (stderr goes to the test's stderr).
func onPTY(t *testing.T, cols int, args ...string) string {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: uint16(cols)}); err != nil {
		t.Fatal(err)
	}
	cmd := wrapper(args...)
	cmd.Stdout, cmd.Stderr = tty, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	// The read ends (EIO) once the last holder of the terminal's other end has exited.
	code, shown := finish(t, cmd, ptmx, &strings.Builder{})
	if code != ExitOK {
		t.Fatalf("%v: exit %d; terminal: %q", args, code, shown)
	}
	return strings.ReplaceAll(shown, "\r\n", "\n")
}

func TestTableOnTerminalTSVOtherwise(t *testing.T) {
	// Each width gets the widest layout whose cells fit whole (rollout 3-0's full table is 176
	// columns wide, its wide one 129), every line fits (the summary wraps), no header or cell is
	// cut, and a layout picked by width says what it leaves out.
	for _, tc := range []struct {
		cols      int
		has, hasn []string // header cells
		hint      string   // the line under the table
	}{
		{200, []string{"dialect", "reasoning tok", "tok in", "tok out", "source"}, nil, ""},
		{176, []string{"dialect", "reasoning tok", "ttft ms"}, nil, ""},
		{175, []string{"model", "tok in", "tok out", "cached tok", "ttft ms", "tool calls", "error"}, []string{"dialect", "source"},
			"wide layout for 175 columns; not shown: dialect, reasoning tok, total tok, source (--columns full shows every column)"},
		{129, []string{"model", "finish", "ttft ms", "tool calls"}, []string{"dialect", "source"}, "wide layout for 129 columns"},
		{128, []string{"#", "model", "status", "tok in/out", "latency", "tools", "error"}, []string{"finish", "ttft ms"},
			"compact layout for 128 columns; not shown: dialect, finish, reasoning tok, total tok, cached tok, ttft ms, source"},
		{80, []string{"#", "model", "status", "tok in/out", "latency", "tools", "error"}, []string{"finish", "ttft ms"},
			"compact layout for 80 columns; not shown: dialect, finish, reasoning tok, total tok, cached tok, ttft ms, source"},
	} {
		shown := onPTY(t, tc.cols, "calls", "--capture-dir", gymCapture, "3-0")
		if !strings.Contains(shown, "│ # ") || !strings.Contains(shown, "calls 6  tokens in 439") {
			t.Fatalf("%d columns: no table on the terminal:\n%s", tc.cols, shown)
		}
		for _, line := range strings.Split(shown, "\n") {
			if runewidth.StringWidth(line) > tc.cols {
				t.Errorf("%d columns: line is %d wide: %s", tc.cols, runewidth.StringWidth(line), line)
			}
		}
		if tc.hint == "" && strings.Contains(shown, "not shown:") || !strings.Contains(strings.ReplaceAll(shown, "\n", " "), tc.hint) {
			t.Errorf("%d columns: want the hint %q:\n%s", tc.cols, tc.hint, shown)
		}
		header, rows := tableCells(shown)
		for _, h := range header {
			if strings.Contains(h, "…") {
				t.Errorf("%d columns: header %q was cut:\n%s", tc.cols, h, shown)
			}
		}
		for _, h := range tc.has {
			if !slices.Contains(header, h) {
				t.Errorf("%d columns: no %q column in %q", tc.cols, h, header)
			}
		}
		for _, h := range tc.hasn {
			if slices.Contains(header, h) {
				t.Errorf("%d columns: a %q column in %q", tc.cols, h, header)
			}
		}
		if len(rows) != 6 {
			t.Errorf("%d columns: %d rows, want 6", tc.cols, len(rows))
		}
		for _, r := range rows {
			if c := strings.Join(r, "|"); strings.Contains(c, "…") {
				t.Errorf("%d columns: a cell was cut: %s", tc.cols, c)
			}
		}
	}
	shown := onPTY(t, 80, "calls", "--capture-dir", gymCapture, "3-0", "--columns", "call_index,model,latency_total_ms")
	if header, _ := tableCells(shown); !slices.Equal(header, []string{"#", "model", "latency ms"}) {
		t.Errorf("--columns: header %q", header)
	}
	if header, _ := tableCells(onPTY(t, 80, "calls", "--capture-dir", gymCapture, "3-0", "--columns", "full")); len(header) != 15 {
		t.Errorf("--columns full at 80 columns: header %q, want all 15 columns", header)
	}
	out, _, code := runCLI(t, "", "calls", "--capture-dir", gymCapture, "3-0")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != ExitOK || len(lines) != 7 || lines[0] != strings.Join(callsTSVHeader, "\t") {
		t.Fatalf("not a terminal: want a TSV header and 6 rows, got:\n%s", out)
	}
	// Row 0 of rollout 3-0: deepseek-reasoner asked for the weather tool; unknown is empty.
	f := strings.Split(lines[1], "\t")
	if len(f) != len(callsTSVHeader) || f[3] != "deepseek-reasoner" || f[15] != "weather" || f[6] != "" || f[10] != "431" {
		t.Errorf("row 0: %q", f)
	}

	shown = onPTY(t, 200, "stats", "--capture-dir", gymCapture, "--by", "dialect")
	if !strings.Contains(shown, "│ dialect ") || !strings.Contains(shown, "│ responses ") || !strings.Contains(shown, "│ elapsed / summed latency ") ||
		!strings.Contains(shown, "│ output tokens per second ") || !strings.Contains(shown, "out tok/s") {
		t.Errorf("stats on a terminal:\n%s", shown)
	}
	// Narrower terminals: the per-model table keeps the columns whose headers and names fit whole
	// and names the rest; the run table wraps its notes instead of cutting them.
	for _, tc := range []struct {
		cols      int
		has, hasn []string
		hint      string
	}{
		{200, []string{"reasoning tok", "p99 ms", "latency sum s"}, nil, ""},
		{120, []string{"cache hit", "ttft p50 ms", "elapsed s", "out tok/s"}, []string{"reasoning tok", "p99 ms"},
			"120 columns; not shown: reasoning tok, total tok, p90 ms, p99 ms, latency sum s"},
		{80, []string{"calls", "errors", "tok in", "tok out", "p50 ms", "out tok/s"}, []string{"cache hit", "ttft p50 ms"},
			"80 columns; not shown: reasoning tok, total tok, cache hit, p90 ms, p99 ms, ttft p50 ms, elapsed s, latency sum s"},
	} {
		shown := onPTY(t, tc.cols, "stats", "--capture-dir", gymCapture)
		for _, line := range strings.Split(shown, "\n") {
			if runewidth.StringWidth(line) > tc.cols {
				t.Errorf("stats at %d columns: line is %d wide: %s", tc.cols, runewidth.StringWidth(line), line)
			}
			// Only model names are cut, and only to 20 columns or more.
			if cells := strings.Split(line, "│"); len(cells) > 2 && (strings.Contains(strings.Join(cells[2:], "|"), "…") ||
				strings.Contains(cells[1], "…") && runewidth.StringWidth(strings.TrimSpace(cells[1])) < 18) {
				t.Errorf("stats at %d columns: a cell was cut: %s", tc.cols, line)
			}
		}
		if tc.hint == "" && strings.Contains(shown, "not shown:") || !strings.Contains(strings.ReplaceAll(shown, "\n", " "), tc.hint) {
			t.Errorf("stats at %d columns: want the hint %q:\n%s", tc.cols, tc.hint, shown)
		}
		tables := strings.SplitN(shown, "\n\n", 2)
		if len(tables) != 2 {
			t.Fatalf("stats at %d columns: want two tables:\n%s", tc.cols, shown)
		}
		header, _ := tableCells(tables[1])
		for _, h := range tc.has {
			if !slices.Contains(header, h) {
				t.Errorf("stats at %d columns: no %q column in %q", tc.cols, h, header)
			}
		}
		for _, h := range tc.hasn {
			if slices.Contains(header, h) {
				t.Errorf("stats at %d columns: a %q column in %q", tc.cols, h, header)
			}
		}
	}
	if shown := onPTY(t, 200, "stats", "--capture-dir", gymCapture, "--format", "tsv"); !strings.HasPrefix(shown, "model\tcalls\t") {
		t.Errorf("--format tsv on a terminal:\n%s", shown)
	}
}

func TestCallsFilters(t *testing.T) {
	rows := func(args ...string) []string {
		t.Helper()
		out, errOut, code := runCLI(t, "", append([]string{"calls", "--capture-dir", gymCapture, "--format", "tsv"}, args...)...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")[1:]
		var idx []string
		for _, l := range lines {
			idx = append(idx, strings.SplitN(l, "\t", 2)[0])
		}
		return idx
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"3-0"}, "0 1 2 3 4 5"},
		{[]string{"3-0", "--model", "m"}, "2 3 4"},
		{[]string{"3-0", "--model", "m,deepseek-reasoner"}, "0 2 3 4"},
		{[]string{"3-0", "--model", "m", "--model", "gpt-4.1-nano-2025-04-14"}, "2 3 4 5"},
		{[]string{"3-0", "--status", "2xx"}, "0 1 2 3 4 5"},
		{[]string{"3-0", "--status", "200", "--error", "any"}, ""},
		{[]string{"3-0", "--error", "none", "--model", "m"}, "2 3 4"},
	}
	for _, tc := range tests {
		if got := strings.Join(rows(tc.args...), " "); got != tc.want {
			t.Errorf("%v: call indexes %q, want %q", tc.args, got, tc.want)
		}
	}
	// Across the gym fixture: every call with an error, and by status class, agree with the records.
	out, _, _ := runCLI(t, "", "stats", "--capture-dir", gymCapture, "--json", "--error", "any")
	var rep struct {
		Calls, Errors int
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Calls != 15 || rep.Errors != 15 {
		t.Errorf("stats --error any: %d calls, %d errors; want 15 and 15", rep.Calls, rep.Errors)
	}
	out, _, _ = runCLI(t, "", "stats", "--capture-dir", gymCapture, "--json", "--error", "rate_limit", "--status", "429")
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Calls != 3 {
		t.Errorf("stats --error rate_limit --status 429: %d calls, want 3", rep.Calls)
	}
}

func TestStatsBy(t *testing.T) {
	for _, tc := range []struct {
		by, first string
		groups    int
	}{
		{"rollout", "", 39},
		{"dialect", "chat", 3},
	} {
		out, errOut, code := runCLI(t, "", "stats", gymCapture, "--by", tc.by, "--json")
		if code != ExitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var rep struct {
			Calls  int
			By     string
			Groups []struct {
				Key   *string
				Calls int
			}
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, g := range rep.Groups {
			sum += g.Calls
		}
		if rep.By != tc.by || sum != rep.Calls {
			t.Errorf("--by %s: by %q, group calls sum to %d of %d", tc.by, rep.By, sum, rep.Calls)
		}
		if tc.by == "dialect" && (len(rep.Groups) != tc.groups || *rep.Groups[0].Key != tc.first) {
			t.Errorf("--by dialect: %d groups, first %v", len(rep.Groups), rep.Groups)
		}
		if tc.by == "rollout" && len(rep.Groups) == 0 {
			t.Errorf("--by rollout: no groups")
		}
		tsv, _, _ := runCLI(t, "", "stats", gymCapture, "--by", tc.by)
		if !strings.HasPrefix(tsv, tc.by+"\tcalls\t") || !strings.Contains(tsv, "\n(all)\t44\t") {
			t.Errorf("--by %s TSV:\n%s", tc.by, tsv)
		}
	}
	if _, errOut, code := runCLI(t, "", "stats", gymCapture, "--by", "week"); code != ExitUsage || !strings.Contains(errOut, `--by "week": want model, rollout or dialect`) {
		t.Errorf("bad --by: exit %d, %q", code, errOut)
	}
	for _, args := range [][]string{{"stats"}, {"stats", "a", "b"}, {"stats", "--capture-dir", gymCapture, "x"}} {
		if _, errOut, code := runCLI(t, "", args...); code != ExitUsage || !strings.Contains(errOut, "modelcalls: stats: ") {
			t.Errorf("%v: exit %d, %q", args, code, errOut)
		}
	}
}

// TestLineageOnNarrowTerminal: at 80 columns every line of the lineage tree fits, the summary
// wrapped between its parts.
func TestLineageOnNarrowTerminal(t *testing.T) {
	shown := onPTY(t, 80, "lineage", "--capture-dir", lineageCaptures, "claude-code-replay-misses")
	for _, line := range strings.Split(strings.TrimSuffix(shown, "\n"), "\n") {
		if runewidth.StringWidth(line) > 80 {
			t.Errorf("line is %d wide: %s", runewidth.StringWidth(line), line)
		}
	}
	if !strings.Contains(shown, "\nmain chain 2 calls; 3 roots,") || !strings.Contains(shown, "6 calls off the main chain\n") {
		t.Errorf("no summary:\n%s", shown)
	}
}
