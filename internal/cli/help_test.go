package cli

import (
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

func TestEveryCommandHasExamples(t *testing.T) {
	root := NewRootCommand(&Streams{})
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		out, _, code := runCLI(t, "", c.Name(), "--help")
		if code != ExitOK || !strings.Contains(out, "\nExamples:\n  ") {
			t.Errorf("%s --help has no Examples section (exit %d):\n%s", c.Name(), code, out)
		}
	}
}

// TestReadmeCommandTableFlags: each row of README.md's command table names every flag the heading
// of its command in docs/cli.md names, so the table does not fall behind the reference.
func TestReadmeCommandTableFlags(t *testing.T) {
	readme := capturetest.ReadFile(t, "../../README.md")
	cliDoc := capturetest.ReadFile(t, "../../docs/cli.md")
	rows := map[string]string{} // command -> its first cell
	// A command is its name and, for export, its subcommand ("export tokens").
	rowRE := regexp.MustCompile("(?m)^\\| `modelcalls ([a-z]+(?: [a-z]+)?)([^`]*)` \\|")
	for _, m := range rowRE.FindAllStringSubmatch(string(readme), -1) {
		if _, ok := rows[m[1]]; !ok {
			rows[m[1]] = m[2]
		}
	}
	flagRE := regexp.MustCompile(`--[a-z][a-z-]*`)
	headRE := regexp.MustCompile("(?m)^## `modelcalls ([a-z]+(?: [a-z]+)?)([^`]*)`")
	checked := 0
	for _, m := range headRE.FindAllStringSubmatch(string(cliDoc), -1) {
		row, ok := rows[m[1]]
		if !ok {
			continue
		}
		checked++
		for _, flag := range flagRE.FindAllString(m[2], -1) {
			if !regexp.MustCompile(regexp.QuoteMeta(flag) + `\b`).MatchString(row) {
				t.Errorf("README.md's row of %s lacks %s (docs/cli.md: modelcalls %s%s)", m[1], flag, m[1], strings.TrimRight(m[2], " "))
			}
		}
	}
	if checked < 6 {
		t.Errorf("only %d commands compared", checked)
	}
}

func TestFormatVersion(t *testing.T) {
	platform := " go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH
	tests := []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"go install of a tag", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}},
			"modelcalls v1.2.3" + platform},
		{"built in a checkout", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201094938-af53bc59612b"},
			Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "af53bc59612b14b59900e7474dc8bcd66addde2b"},
				{Key: "vcs.time", Value: "2026-12-01T09:49:38Z"}, {Key: "vcs.modified", Value: "false"}}},
			"modelcalls v0.0.0-20261201094938-af53bc59612b (revision af53bc59612b14b59900e7474dc8bcd66addde2b, 2026-12-01T09:49:38Z)" + platform},
		{"uncommitted changes", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}},
			"modelcalls (devel) (revision abc, modified)" + platform},
		{"no version", debug.BuildInfo{GoVersion: "go1.26.8"}, "modelcalls (unknown)" + platform},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatVersion(&tc.info); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestVersionCommandAndFlag(t *testing.T) {
	want := versionLine() + "\n"
	if !strings.HasPrefix(want, "modelcalls ") || !strings.Contains(want, runtime.Version()) {
		t.Fatalf("version line %q", want)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, errOut, code := runCLI(t, "", args...)
		if code != ExitOK || out != want || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %q", args, code, out, errOut, want)
		}
	}
}
