package cli

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

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
