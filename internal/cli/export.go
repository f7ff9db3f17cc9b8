package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel"

	"github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/jsonl"
	"github.com/modelcalls/modelcalls/otelexport"
)

// exportOptions are the flags of `modelcalls export otlp`.
type exportOptions struct {
	captureDir string
	in         string
	endpoint   string
	protocol   string
	content    bool
	upstream   string
	timeout    time.Duration
}

func newExportCmd(s *Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export SUBCOMMAND",
		Short: "Copy existing captures to another system",
		// Flag parsing is left to the subcommands: an unknown subcommand with their flags
		// ("export otlpp --capture-dir x") must be named as the mistake, not "unknown flag".
		DisableFlagParsing:         true,
		SuggestionsMinimumDistance: 2,
		Args:                       cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
				return cmd.Help()
			}
			var known []string
			for _, c := range cmd.Commands() {
				if c.IsAvailableCommand() {
					known = append(known, c.Name())
				}
			}
			if strings.HasPrefix(args[0], "-") {
				return usageErrorf("export: missing subcommand before %s (known: %s)", args[0], strings.Join(known, ", "))
			}
			hint := ""
			if sug := cmd.SuggestionsFor(args[0]); len(sug) > 0 {
				hint = fmt.Sprintf("; did you mean %q?", sug[0])
			}
			return usageErrorf("export: unknown subcommand %q (known: %s)%s", args[0], strings.Join(known, ", "), hint)
		},
	}
	var o exportOptions
	otlp := &cobra.Command{
		Use:   "otlp --capture-dir DIR [--in ROLLOUTS.jsonl] [--endpoint URL]",
		Short: "Send the captured calls as OpenTelemetry GenAI spans (and metrics) to an OTLP endpoint",
		Long: `Send every captured call of DIR (or of the rollouts listed in --in) as the span the live export
of modelcalls proxy --otlp-endpoint sends: same trace and span ids, same attributes. With --in, each
listed rollout also gets its root span (the parent of its calls' spans) carrying the rollout record's
reward and task index and the calls' count, errors and token totals.

An --in line that is not a JSON object, or whose rollout id cannot be derived or is invalid, is
skipped and reported on stderr with its file and line number; the other rollouts are exported.

The endpoint is --endpoint (an OTLP base URL) or the standard OTEL_EXPORTER_OTLP_* variables. Exits
1 when the endpoint refused or could not be reached for any span, or when --in lines were skipped;
3 when DIR does not exist.`,
		Example: `  modelcalls export otlp --capture-dir ./captures --endpoint http://127.0.0.1:4318
  modelcalls export otlp --capture-dir ./captures --in rollouts.jsonl     # with a root span per rollout
  OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4317 OTEL_EXPORTER_OTLP_PROTOCOL=grpc \
    modelcalls export otlp --capture-dir ./captures`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runExportOTLP(cmd.Context(), s, &o) },
	}
	f := otlp.Flags()
	f.StringVar(&o.captureDir, "capture-dir", "", "capture directory (required)")
	f.StringVar(&o.in, "in", "", "JSONL rollout records: export only their rollouts, each with a root span (- is stdin)")
	f.StringVar(&o.endpoint, "endpoint", "", "OTLP base URL, e.g. http://127.0.0.1:4318 (default: OTEL_EXPORTER_OTLP_ENDPOINT)")
	f.StringVar(&o.protocol, "protocol", "", "OTLP protocol: http/protobuf or grpc (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf); --otlp-protocol, as modelcalls proxy spells it, is the same flag")
	// --otlp-protocol is the proxy's spelling of --protocol: accept both, so a flag copied from a
	// proxy command line works here.
	f.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "otlp-protocol" {
			name = "protocol"
		}
		return pflag.NormalizedName(name)
	})
	f.BoolVar(&o.content, "content", false, "also export message content (gen_ai.input.messages, gen_ai.output.messages)")
	f.StringVar(&o.upstream, "upstream", "", "the model server's URL, for server.address and server.port (as the proxy's --upstream)")
	f.DurationVar(&o.timeout, "timeout", time.Minute, "longest wait for the endpoint to take the last spans")
	cmd.AddCommand(otlp, newExportSamplesCmd(s), newExportTokensCmd(s))
	return cmd
}

// openExportRollouts opens the capture dir and lists the rollouts an export command covers: those of
// the rollout records in file in (readExportRollouts, with its count of skipped lines), or with no
// file every rollout of the dir. Errors carry their exit status (a missing dir is ExitNotFound, a
// dir that cannot be listed a failure).
func openExportRollouts(s *Streams, captureDir, in string) (*capture.Store, []exportRollout, int, error) {
	store, err := openCaptureDir(captureDir)
	if err != nil {
		return nil, nil, 0, err
	}
	if in != "" {
		rollouts, skipped, err := readExportRollouts(s, in)
		return store, rollouts, skipped, err
	}
	ids, err := store.Rollouts()
	if err != nil {
		return nil, nil, 0, withExit(ExitFailure, err)
	}
	rollouts := make([]exportRollout, 0, len(ids))
	for _, id := range ids {
		rollouts = append(rollouts, exportRollout{id: id})
	}
	return store, rollouts, 0, nil
}

// exportRollout is one rollout to export, with the fields of its record (--in).
type exportRollout struct {
	id        string
	reward    *float64
	taskIndex *int64
	root      bool
}

func runExportOTLP(ctx context.Context, s *Streams, o *exportOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.captureDir == "" {
		return usageErrorf("--capture-dir is required")
	}
	sig, err := otelexport.EnvSignals()
	if err != nil {
		return usageErrorf("%w", err)
	}
	if !sig.Traces && !sig.Metrics {
		fmt.Fprintln(s.ErrOut, "modelcalls export: nothing exported: OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER are none, turns OTLP export off")
		return nil
	}
	if !otelexport.Enabled(o.endpoint) {
		return usageErrorf("no endpoint: pass --endpoint URL or set OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	var upstream *url.URL
	if o.upstream != "" {
		u, err := url.Parse(o.upstream)
		if err != nil || u.Host == "" {
			return usageErrorf("--upstream: want an absolute URL with a host")
		}
		upstream = u
	}
	store, rollouts, skippedLines, err := openExportRollouts(s, o.captureDir, o.in)
	if err != nil {
		return err
	}

	if err := checkGRPCEndpoint(ctx, o); err != nil {
		return withExit(ExitFailure, err)
	}
	// The exporter's rate-limited warnings (and the SDK's reports, through otel.SetErrorHandler)
	// serve the long-running proxy's log. A one-shot export reports the same failures once, in its
	// final "modelcalls: " error line, so that stderr holds nothing else (docs/otel.md).
	exp, err := otelexport.New(ctx, otelexport.Config{
		Endpoint: o.endpoint, Protocol: o.protocol, Content: o.content, Upstream: upstream,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return usageErrorf("%w", err)
	}
	otel.SetErrorHandler(exp) // the SDK's own reports, rate-limited with ours
	var bar *progressbar.ProgressBar
	if isTerminal(s.ErrOut) {
		bar = progressbar.NewOptions(len(rollouts), progressbar.OptionSetWriter(s.ErrOut),
			progressbar.OptionSetDescription("exporting"), progressbar.OptionShowCount(),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))
	}
	var calls, roots, damaged, unreadable int
	for _, r := range rollouts {
		if err := ctx.Err(); err != nil {
			break
		}
		recs, bad, err := modelcalls.ReadAvailableRecords(store, r.id)
		if err != nil {
			unreadable++
			fmt.Fprintf(s.ErrOut, "modelcalls export: rollout %s not exported: %v\n", r.id, err)
			continue
		}
		if bad > 0 {
			damaged += bad
			fmt.Fprintf(s.ErrOut, "modelcalls export: rollout %s: %d damaged capture lines skipped\n", r.id, bad)
		}
		for i := range recs {
			exp.Emit(ctx, r.id, &recs[i], "")
		}
		calls += len(recs)
		if r.root {
			exp.EmitRollout(ctx, otelexport.Rollout{ID: r.id, Calls: recs, Reward: r.reward, TaskIndex: r.taskIndex})
			roots++
		}
		if bar != nil {
			bar.Add(1)
		}
	}
	if bar != nil {
		bar.Finish()
	}
	sctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	shutdownErr := exp.Shutdown(sctx)
	var spansErr, metricsErr error
	if se := (*otelexport.ShutdownError)(nil); errors.As(shutdownErr, &se) {
		spansErr, metricsErr = se.Spans, se.Metrics
	} else {
		spansErr = shutdownErr
	}
	c := exp.Counts()
	want := int64(calls + roots)
	// A span the endpoint did not confirm by the deadline is a failed span, whatever the exporter
	// was still doing with it.
	failed := max(c.Failed, want-c.Exported)
	fmt.Fprintf(s.Out, "exported %d spans (%d calls, %d rollout spans) of %d rollouts; %d failed", c.Exported, calls, roots, len(rollouts), failed)
	if damaged > 0 || unreadable > 0 {
		fmt.Fprintf(s.Out, "; %d damaged lines skipped, %d rollouts unreadable", damaged, unreadable)
	}
	if skippedLines > 0 {
		fmt.Fprintf(s.Out, "; %d --in lines skipped", skippedLines)
	}
	fmt.Fprintln(s.Out)
	if failed > 0 {
		msg := fmt.Sprintf("the OTLP endpoint took %d of %d spans", c.Exported, want)
		if spansErr != nil && isConnRefused(spansErr) {
			msg = fmt.Sprintf("the OTLP endpoint refused the connection (is a collector listening there?); it took %d of %d spans", c.Exported, want)
		}
		if metricsErr != nil {
			msg += " (the metrics upload failed too)"
		} else if exp.MetricsRefused() != nil {
			msg += " (it does not accept metrics either)"
		}
		if spansErr != nil {
			return withExit(ExitFailure, fmt.Errorf("%s: %w", msg, spansErr))
		}
		return withExit(ExitFailure, errors.New(msg))
	}
	if metricsErr != nil {
		return withExit(ExitFailure, fmt.Errorf("all %d spans exported, but the metrics upload failed: %w", want, metricsErr))
	}
	if err := exp.MetricsRefused(); err != nil {
		fmt.Fprintf(s.ErrOut, "modelcalls export: warning: the OTLP endpoint does not accept metrics (%v): every span was exported, no metrics; set OTEL_METRICS_EXPORTER=none to not send them\n", err)
	}
	if unreadable > 0 || skippedLines > 0 || ctx.Err() != nil {
		return silentExit{code: ExitFailure}
	}
	return nil
}

// grpcDialTimeout bounds export otlp's first connection to a gRPC endpoint.
const grpcDialTimeout = 5 * time.Second

// checkGRPCEndpoint connects once to the endpoint of a gRPC exporter (otelexport.GRPCTarget: TCP,
// at most grpcDialTimeout) before any span is made, and fails when that connection cannot be made,
// rather than let the exporter retry a refused connection for every batch. It checks nothing for
// an OTLP/HTTP exporter (that one fails at once), nor for an endpoint reached through a proxy or
// one that does not parse (the exporter reports it).
func checkGRPCEndpoint(ctx context.Context, o *exportOptions) error {
	host, ok := otelexport.GRPCTarget(o.protocol, o.endpoint)
	if !ok {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, grpcDialTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", host)
	if err != nil {
		what := "could not be reached"
		if isConnRefused(err) {
			what = "refused the connection (is a collector listening there?)"
		}
		return fmt.Errorf("the OTLP endpoint %s %s; nothing was exported: %w", host, what, err)
	}
	conn.Close()
	return nil
}

// isConnRefused tells whether err comes from a refused connection: a wrapped ECONNREFUSED
// (OTLP/HTTP), or a gRPC status, which keeps only the text of its transport error.
func isConnRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "connection refused")
}

// readExportRollouts reads the --in records: one rollout per distinct id, with reward (a number)
// and _ng_task_index (an integer) when the record has them. Blank lines and records without rollout
// fields are skipped silently; a line whose reward is there but not a number (its rollout is
// exported without one), or that lists a rollout again with another reward (the first is used),
// is reported and counted the same way; a line that is not a JSON object, or whose rollout id cannot be
// derived or is invalid, is skipped and reported on stderr as
// "modelcalls export: <file>:<line>: not exported: <reason>" (file "stdin" for -), and counted in
// skipped, as merge and clear report the lines they cannot use; the caller exits 1 after exporting
// the rest.
func readExportRollouts(s *Streams, name string) (rollouts []exportRollout, skipped int, err error) {
	in, _, closeIn, err := openInput(s, "export otlp", name)
	if err != nil {
		return nil, 0, err
	}
	defer closeIn()
	file := name
	if file == "" || file == "-" {
		file = "stdin"
	}
	var out []exportRollout
	seen := map[string]int{} // rollout id -> its position in out
	lr := jsonl.NewReader(in)
	for {
		l, ok, err := lr.Next()
		if err != nil {
			return nil, skipped, withExit(ExitFailure, fmt.Errorf("read --in: %w", err))
		}
		if !ok {
			return out, skipped, nil
		}
		if len(bytes.TrimSpace(l.Body)) == 0 {
			continue
		}
		id, ok, err := modelcalls.RolloutID(l.Body)
		if err != nil {
			skipped++
			fmt.Fprintf(s.ErrOut, "modelcalls export: %s:%d: not exported: %v\n", file, l.Num, err)
			continue
		}
		if !ok {
			continue
		}
		r := exportRollout{id: id, root: true}
		var fields struct {
			Reward    json.RawMessage `json:"reward"`
			TaskIndex json.RawMessage `json:"_ng_task_index"`
		}
		if json.Unmarshal(l.Body, &fields) == nil {
			var f float64
			if json.Unmarshal(fields.Reward, &f) == nil && len(fields.Reward) > 0 && fields.Reward[0] != 'n' {
				r.reward = &f
			} else if len(fields.Reward) > 0 && string(fields.Reward) != "null" {
				// A reward of another type would silently export the rollout as unrewarded.
				skipped++
				fmt.Fprintf(s.ErrOut, "modelcalls export: %s:%d: reward %.40s is not a number: rollout %s exported without a reward\n", file, l.Num, fields.Reward, id)
			}
			var n int64
			if json.Unmarshal(fields.TaskIndex, &n) == nil && len(fields.TaskIndex) > 0 && fields.TaskIndex[0] != 'n' {
				r.taskIndex = &n
			}
		}
		if line, ok := seen[id]; ok {
			if first := out[line]; !sameReward(first.reward, r.reward) {
				skipped++
				fmt.Fprintf(s.ErrOut, "modelcalls export: %s:%d: rollout %s listed again with another reward: the first record's is used\n", file, l.Num, id)
			}
			continue
		}
		seen[id] = len(out)
		out = append(out, r)
	}
}

// sameReward reports whether two optional rewards are equal (both absent included).
func sameReward(a, b *float64) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}
