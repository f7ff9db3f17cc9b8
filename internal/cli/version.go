package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func newVersionCmd(s *Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the module version and VCS revision modelcalls was built from",
		Long: `Print the version of the github.com/modelcalls/modelcalls module this binary was built from, the
VCS revision and commit time (when built from a git checkout; "modified" when it had uncommitted
changes) and the Go version. The same line as modelcalls --version.`,
		Example: `  modelcalls version
  modelcalls --version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(s.Out, versionLine())
			return err
		},
	}
}

// versionLine describes the build from debug.ReadBuildInfo, e.g.
//
//	modelcalls v0.3.0 (revision 8352b8b1c0de, 2026-12-01T09:00:00Z, modified) go1.26.8 linux/amd64
//
// The module version is "(devel)" for a binary built inside the source tree (go build, make
// build); "go install module@version" records the tagged version. Revision, time and the
// modified flag come from the vcs.* build settings, present when the binary was built in a git
// checkout with VCS stamping (the default for go build).
func versionLine() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return fmt.Sprintf("modelcalls (unknown version: no build info) %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	return formatVersion(info)
}

func formatVersion(info *debug.BuildInfo) string {
	version := info.Main.Version
	if version == "" {
		version = "(unknown)"
	}
	var vcs []string
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		vcs = append(vcs, "revision "+rev)
	}
	if t := settings["vcs.time"]; t != "" {
		vcs = append(vcs, t)
	}
	if settings["vcs.modified"] == "true" {
		vcs = append(vcs, "modified")
	}
	line := "modelcalls " + version
	if len(vcs) > 0 {
		line += " (" + strings.Join(vcs, ", ") + ")"
	}
	goVersion := info.GoVersion
	if goVersion == "" {
		goVersion = runtime.Version()
	}
	return fmt.Sprintf("%s %s %s/%s", line, goVersion, runtime.GOOS, runtime.GOARCH)
}
