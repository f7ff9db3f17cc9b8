package cli

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/modelcalls/modelcalls/internal/demo"
)

func init() { register(newDemoCmd) }

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
and no model server; its files stay in a temp dir (or --dir).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := demo.Options{Dir: dir}
			if verbose {
				opts.Logger = slog.New(slog.NewTextHandler(s.ErrOut, nil))
			}
			res, err := demo.Run(cmd.Context(), opts)
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
			if err := printCallsTable(w, rc, outputWidth(s.Out)); err != nil {
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
	fmt.Fprintf(w, "\nTry: modelcalls calls %s demo-messages-sse --json\n", res.CaptureDir)
	fmt.Fprintf(w, "     modelcalls stats %s\n", res.CaptureDir)
	fmt.Fprintln(w, "\nTo capture a real agent, run the gateway in front of your model server and point the agent's")
	fmt.Fprintln(w, "base URL at it with a rollout prefix:")
	fmt.Fprintln(w, "  modelcalls proxy --upstream https://api.example.com --capture-dir ./captures --listen 127.0.0.1:8080")
	fmt.Fprintln(w, "  OpenAI-style clients: base URL http://127.0.0.1:8080/ng-rollout/<rollout_id>/v1")
	fmt.Fprintln(w, "  Claude Code:          ANTHROPIC_BASE_URL=http://127.0.0.1:8080/ng-rollout/<rollout_id>")
	return nil
}
