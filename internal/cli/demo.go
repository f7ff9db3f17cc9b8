package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/modelcalls/modelcalls/internal/demo"
)

func newDemoCmd(s *Streams) *cobra.Command {
	var dir string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run scripted rollouts of all three dialects through the capture gateway on an embedded replay upstream",
		Long: `demo starts an embedded replay upstream (recorded real-format responses of the Responses, Chat
Completions and Messages APIs, JSON and SSE, tool calls included) and the capture gateway on
127.0.0.1, drives a scripted two-turn rollout per dialect and transport through the gateway,
merges the captures into rollout records, and prints each rollout's calls. It needs no network
and no model server; its files stay in a new temp dir, or in --dir, which must be empty or not
exist yet (an earlier run's captures would otherwise be appended to).`,
		Example: `  modelcalls demo
  modelcalls demo --dir ./demo-run      # keep the files where you can find them
  modelcalls demo --verbose             # with the gateway's log on stderr`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := demo.Options{Dir: dir}
			if verbose {
				opts.Logger = slog.New(slog.NewTextHandler(s.ErrOut, nil))
			}
			res, err := demo.Run(cmd.Context(), opts)
			if errors.Is(err, demo.ErrDirNotEmpty) || errors.Is(err, demo.ErrNotDir) {
				return usageErrorf("--dir: %w", err)
			}
			if err != nil {
				return withExit(ExitFailure, fmt.Errorf("demo: %w", err))
			}
			return printDemo(s, res)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory for the capture dir and rollout files (default: a new temp dir)")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "print the gateway's log on stderr")
	return cmd
}

func printDemo(s *Streams, res *demo.Result) error {
	w := s.Out
	for _, r := range res.Rollouts {
		kind := "JSON"
		if r.Stream {
			kind = "SSE"
		}
		fmt.Fprintf(w, "\n== rollout %s (%s, %s): %s\n", r.ID, r.Dialect, kind, r.Note)
		rc, err := readRolloutCalls(res.Store, r.ID)
		if err != nil {
			return err
		}
		if len(rc.records) > 0 {
			width := outputWidth(s.Out)
			cols, _ := resolveCallsColumns(callsLayoutFor(rc.records, width))
			if err := printCallsTable(w, rc, cols, width); err != nil {
				return err
			}
		}
		if gaps := r.Merge.Gaps; len(gaps) > 0 {
			codes := make([]string, len(gaps))
			for i, g := range gaps {
				codes[i] = g.Code
				if g.Detail != "" {
					codes[i] += " (" + g.Detail + ")"
				}
			}
			fmt.Fprintf(w, "gaps: %s\n", strings.Join(codes, ", "))
		}
	}
	fmt.Fprintf(w, "\ncapture dir:     %s\n", res.CaptureDir)
	fmt.Fprintf(w, "rollout records: %s\n", res.RolloutsPath)
	fmt.Fprintf(w, "merged records:  %s  (each with ng_model_call_capture)\n", res.MergedPath)
	mc := commandName()
	dir := shellQuote(res.CaptureDir)
	fmt.Fprintf(w, "\nTry: %s show --capture-dir %s demo-messages-sse 1\n", mc, dir)
	fmt.Fprintf(w, "     %s calls --capture-dir %s demo-messages-sse --format json\n", mc, dir)
	fmt.Fprintf(w, "     %s stats --capture-dir %s --by dialect\n", mc, dir)
	if res.TempDir {
		fmt.Fprintf(w, "\nThe demo's files are in a temp dir; remove them with: rm -r %s\n", shellQuote(res.Dir))
	}
	fmt.Fprintln(w, "\nTo capture a real agent, run the gateway in front of your model server and point the agent's")
	fmt.Fprintln(w, "base URL at it with a rollout prefix:")
	fmt.Fprintf(w, "  %s proxy --upstream https://api.example.com --capture-dir ./captures --listen 127.0.0.1:8080\n", mc)
	fmt.Fprintln(w, "  OpenAI-style clients: base URL http://127.0.0.1:8080/ng-rollout/<rollout_id>/v1")
	fmt.Fprintln(w, "  Claude Code:          ANTHROPIC_BASE_URL=http://127.0.0.1:8080/ng-rollout/<rollout_id>")
	fmt.Fprintln(w, "or let modelcalls set those variables for one command:")
	fmt.Fprintf(w, "  %s run --rollout r1 --upstream https://api.example.com --capture-dir ./captures -- claude -p \"...\"\n", mc)
	fmt.Fprintf(w, "\nBrowse this run in a web viewer:\n  %s view --capture-dir %s --rollouts %s\n", mc, dir, shellQuote(res.RolloutsPath))
	return nil
}

// commandName is how the user can run this binary again, for hints: "modelcalls" when that name
// on $PATH is this executable; "go run ./cmd/modelcalls" when this is a binary go run built (in
// a go-build temp dir, gone after the run); else the path it was started by (os.Args[0] when it
// holds a slash, as typed, relative to the current directory), else the absolute path.
func commandName() string {
	exe, err := os.Executable()
	if err != nil {
		return "modelcalls"
	}
	if p, err := exec.LookPath("modelcalls"); err == nil && sameFile(p, exe) {
		return "modelcalls"
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "go run ./cmd/modelcalls"
	}
	if arg0 := os.Args[0]; strings.ContainsRune(arg0, filepath.Separator) && sameFile(arg0, exe) {
		return shellQuote(arg0)
	}
	return shellQuote(exe)
}

func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}
