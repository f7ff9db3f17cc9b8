// Package cli owns the modelcalls command line: the subcommands (proxy, run, show, merge, calls,
// stats, clear, demo, version, ...), their output printers (tables fitted to the terminal, TSV, JSON
// lines) and the table that maps errors to exit codes.
// Each subcommand lives in its own file as a constructor (newXCmd); NewRootCommand lists them all.
package cli

import (
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes returned by Main.
const (
	ExitOK       = 0 // the command did what was asked
	ExitFailure  = 1 // the command ran but reported a failure (e.g. merge passed through unreadable lines)
	ExitUsage    = 2 // a bad flag, argument or config value
	ExitNotFound = 3 // a capture dir or rollout named on the command line does not exist
)

// Streams are the standard streams a command reads and writes; tests pass buffers.
type Streams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// exitError carries an exit code through cobra's error return.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withExit wraps err so that Main exits with code; a nil err stays nil.
func withExit(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// usageErrorf returns an error that makes Main exit with ExitUsage.
func usageErrorf(format string, args ...any) error {
	return withExit(ExitUsage, fmt.Errorf(format, args...))
}

// silentExit makes Main exit with code without printing anything more (the command already reported).
type silentExit struct{ code int }

func (s silentExit) Error() string { return fmt.Sprintf("exit status %d", s.code) }

// NewRootCommand builds the modelcalls command tree writing to s.
func NewRootCommand(s *Streams) *cobra.Command {
	root := &cobra.Command{
		Use:           "modelcalls",
		Short:         "Capture agent model calls per rollout and attach them to rollout records",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionLine(), // --version (version.go)
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.ErrOut)
	for _, c := range []*cobra.Command{
		newProxyCmd(s),
		newRunCmd(s),
		newShowCmd(s),
		newCallsCmd(s),
		newMergeCmd(s),
		newClearCmd(s),
		newStatsCmd(s),
		newLineageCmd(s),
		newExportCmd(s),
		newReplayCmd(s),
		newViewCmd(s),
		newDiffCmd(s),
		newDemoCmd(s),
		newVersionCmd(s),
	} {
		if c.Example == "" {
			c.Example = fallbackExamples[c.Name()] // examples.go
		}
		root.AddCommand(c)
	}
	return root
}

// Main runs the command line args and returns the process exit code. Errors are printed to errOut as
// "modelcalls: <message>".
func Main(args []string, in io.Reader, out, errOut io.Writer) int {
	s := &Streams{In: in, Out: out, ErrOut: errOut}
	root := NewRootCommand(s)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var se silentExit
	if errors.As(err, &se) {
		return se.code
	}
	fmt.Fprintf(errOut, "modelcalls: %v\n", err)
	var ee *exitError
	if errors.As(err, &ee) {
		if errors.Is(err, syscall.EADDRINUSE) {
			// A port someone else holds is the machine's state, not a mistake in the arguments.
			return ExitFailure
		}
		return ee.code
	}
	// cobra's own flag and argument errors are usage errors.
	return ExitUsage
}
