package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/replay"
)

// replayOptions are the flags of `modelcalls replay`.
type replayOptions struct {
	captureDir      string
	listen          string
	match           string
	timing          string
	onMiss          string
	upstream        string
	captureDirOut   string
	name            string
	ignoreKeys      []string
	ignore          []string // --ignore: rules added to --ignore-keys
	adminListen     string
	shutdownTimeout time.Duration
	logLevel        string
	allowedHosts    []string

	// Request hygiene, as the proxy's.
	maxRequestBytes    int64
	requestBodyTimeout time.Duration
	keepAliveTimeout   time.Duration
	maxHeaderBytes     int
	maxConnections     int
}

func newReplayCmd(s *Streams) *cobra.Command {
	var o replayOptions
	cmd := &cobra.Command{
		Use: "replay --capture-dir DIR [--listen ADDR] [--match strict|sequence] [--timing recorded|fast|xN] " +
			"[--on-miss error|forward --upstream URL] [--capture-dir-out DIR2] [--ignore-keys K,...] [--ignore PATH[~REGEXP]]... [--admin-listen ADDR] [--allowed-host NAME ...]",
		Short: "Serve a captured run back to its harness, byte for byte, without a model",
		Long: `Answer model calls made under {base}/ng-rollout/<rollout_id>/v1/{responses,chat/completions,messages}
from <capture dir>/<rollout_id>.capture.jsonl: the recorded status and body bytes (response_raw
when present, else the stored response), streams event by event on the recorded schedule.

--match strict (default) answers a request with a recorded request of its rollout that is equal
as JSON once the --ignore-keys members are dropped (identical ones in recorded order, each once);
--ignore adds a rule to them (repeatable, commas allowed): a dotted JSON path (input.id: a step
into an array applies to each element) drops that member; PATH~REGEXP keeps it but removes every
match of REGEXP from its text first, for a volatile part of a text, as in Codex's tool output:
  --ignore 'input.output~(Chunk ID|Wall time): [^\n]*'

--match sequence answers the N-th call of a rollout with its N-th recorded call. A request with no
recorded answer gets a 400 in the dialect's error shape naming the nearest recorded request and
the first JSON path where they differ, or goes to --upstream with --on-miss forward.

--timing recorded (default) sends the first byte at the recorded TTFT and the terminal event at the
recorded latency; fast sends at once; xN plays N times as fast. --capture-dir-out captures the
re-run like modelcalls proxy (response_source local, local_response_reason replay). SIGINT,
SIGTERM or SIGHUP (a closed terminal) drains it and prints a summary; --admin-listen serves /metrics and /healthz.
It answers only requests whose Host is a loopback name or address, its listen address, or a name
given with --allowed-host (others get 403: a web page whose name resolves to this machine must not
read the recorded calls).

To re-capture a replayed run use --capture-dir-out DIR2, not a modelcalls proxy in front with the
replay as its --upstream: the proxy strips the /ng-rollout/<rollout_id> prefix before forwarding
(as a model server needs), and replay finds the rollout by that prefix, so it answers 404
replay_not_recorded. A proxy for one rollout works with --upstream http://REPLAY/ng-rollout/<id>.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplay(cmd.Context(), s, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.captureDir, "capture-dir", "", "capture directory to answer from (required)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to listen on (port 0 picks a free port)")
	f.StringVar(&o.match, "match", string(replay.Strict), "how a request finds its answer: strict or sequence")
	f.StringVar(&o.timing, "timing", "recorded", "pace of the answers: recorded, fast, or xN (N times as fast)")
	f.StringVar(&o.onMiss, "on-miss", "error", "a request without a recorded answer: error (400) or forward (to --upstream)")
	f.StringVar(&o.upstream, "upstream", "", "with --on-miss forward: base URL of the model server misses go to")
	f.StringVar(&o.captureDirOut, "capture-dir-out", "", "capture the re-run into this directory, like modelcalls proxy")
	f.StringVar(&o.name, "name", "", "with --capture-dir-out: model server name recorded as model_ref.name")
	f.StringSliceVar(&o.ignoreKeys, "ignore-keys", replay.DefaultIgnoreKeys,
		"request members strict matching ignores (top-level names or dotted paths); --ignore-keys= ignores none")
	f.StringArrayVar(&o.ignore, "ignore", nil,
		"a request part strict matching ignores, added to --ignore-keys (repeatable): a dotted JSON path (dropped), or PATH~REGEXP (matches removed from its text)")
	f.StringVar(&o.adminListen, "admin-listen", "", "address for /metrics and /healthz (default: none)")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM/SIGHUP, how long to let in-flight calls finish")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.Int64Var(&o.maxRequestBytes, "max-request-bytes", gateway.DefaultMaxRequestBytes, "largest request body (also once decoded); larger ones get 413 (0: no limit)")
	f.DurationVar(&o.requestBodyTimeout, "request-body-timeout", gateway.DefaultRequestBodyTimeout, "longest wait between reads of a request body; then 408 (0: no limit)")
	f.DurationVar(&o.keepAliveTimeout, "keepalive-timeout", gateway.DefaultKeepAliveTimeout, "how long an idle client connection stays open (0: no limit)")
	f.IntVar(&o.maxHeaderBytes, "max-header-bytes", gateway.DefaultMaxHeaderBytes, "largest request header block; larger ones get 431")
	f.IntVar(&o.maxConnections, "max-connections", 0, "most client connections open at once, more are refused with 503 (0: derived from the file-descriptor limit; -1: no cap)")
	f.StringArrayVar(&o.allowedHosts, "allowed-host", nil, "a host name the replay also answers to, besides loopback names and addresses and the listen address (repeatable)")
	return cmd
}

// resolveReplay checks the flags and builds the replay server (not yet serving).
func resolveReplay(o *replayOptions, log *slog.Logger) (*replay.Server, error) {
	if o.captureDir == "" {
		return nil, usageErrorf("--capture-dir is required (the capture directory of the run to replay)")
	}
	// The dir is checked as given, so a missing one is reported as calls and stats report it
	// ("capture dir DIR does not exist", exit 3), then opened by its absolute path.
	if err := checkDir(o.captureDir); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.captureDir)
	if err != nil {
		return nil, usageErrorf("--capture-dir: %w", err)
	}
	src, err := openCaptureDir(dir)
	if err != nil {
		return nil, err
	}
	s := &replay.Server{Source: src, Logger: log}
	switch replay.Match(o.match) {
	case replay.Strict, replay.Sequence:
		s.Match = replay.Match(o.match)
	default:
		return nil, usageErrorf("--match %q: want strict or sequence", o.match)
	}
	if s.Timing, err = replay.ParseTiming(o.timing); err != nil {
		return nil, usageErrorf("--timing: %w", err)
	}
	s.IgnoreKeys = []string{}
	for _, k := range append(slices.Clone(o.ignoreKeys), o.ignore...) {
		if k = strings.TrimSpace(k); k != "" {
			s.IgnoreKeys = append(s.IgnoreKeys, k)
		}
	}
	if err := replay.CheckIgnoreKeys(s.IgnoreKeys); err != nil {
		return nil, usageErrorf("--ignore: %w", err)
	}
	switch o.onMiss {
	case "error":
		if o.upstream != "" {
			return nil, usageErrorf("--upstream is only used with --on-miss forward")
		}
	case "forward":
		if o.upstream == "" {
			return nil, usageErrorf("--on-miss forward needs --upstream URL")
		}
		u, err := url.Parse(o.upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, usageErrorf("--upstream: must be an absolute http:// or https:// URL with a host and no query")
		}
		s.Upstream = u
	default:
		return nil, usageErrorf("--on-miss %q: want error or forward", o.onMiss)
	}
	if o.name != "" && o.captureDirOut == "" {
		return nil, usageErrorf("--name is only used with --capture-dir-out")
	}
	if o.maxRequestBytes < 0 {
		return nil, usageErrorf("--max-request-bytes must be >= 0 (0: no limit)")
	}
	if o.maxHeaderBytes < 0 {
		return nil, usageErrorf("--max-header-bytes must be > 0")
	}
	if o.maxConnections < -1 {
		return nil, usageErrorf("--max-connections must be >= -1 (0: derived from the file-descriptor limit; -1: no cap)")
	}
	s.MaxRequestBytes, s.RequestBodyTimeout = noLimit(o.maxRequestBytes), noLimit(o.requestBodyTimeout)
	return s, nil
}

// runReplay serves until ctx ends or a signal arrives, then drains and prints the summary.
func runReplay(ctx context.Context, s *Streams, o *replayOptions) error {
	log, err := serveLogger(s.ErrOut, o.logLevel, "text")
	if err != nil {
		return err
	}
	srv, err := resolveReplay(o, log)
	if err != nil {
		return err
	}
	var handler http.Handler = srv
	var recap *replay.Recapture
	gatherers := prometheus.Gatherers{srv.Registry()}
	if o.captureDirOut != "" {
		outDir, err := filepath.Abs(o.captureDirOut)
		if err != nil {
			return usageErrorf("--capture-dir-out: %w", err)
		}
		if outDir == srv.Source.Dir() {
			return usageErrorf("--capture-dir-out must differ from --capture-dir: the replay would answer from its own re-run")
		}
		out, err := openWritableStore("--capture-dir-out", outDir)
		if err != nil {
			return err
		}
		if recap, err = replay.NewRecapture(srv, out, o.name, log); err != nil {
			return withExit(ExitFailure, err)
		}
		handler = recap
		gatherers = append(gatherers, recap.Gateway().Registry())
	}
	ln, err := listenFlag("--listen", o.listen)
	if err != nil {
		return err
	}
	if handler, err = hostGuard(handler, o.listen, ln, o.allowedHosts, log); err != nil {
		return err
	}
	// The proxy's connection hygiene: header timeout and size, keep-alive timeout, connection cap.
	hs := gateway.NewHTTPServer(handler, gateway.ServerOptions{KeepAliveTimeout: noLimit(o.keepAliveTimeout),
		MaxHeaderBytes: o.maxHeaderBytes}, log)
	capped := gateway.LimitListener(ln, o.maxConnections, log)

	var admin *http.Server
	if o.adminListen != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(gatherers, promhttp.HandlerOpts{}))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
		var addr string
		if admin, addr, err = serveAdmin(o.adminListen, mux, ln, log); err != nil {
			return err
		}
		log.Info("modelcalls replay admin listening", "admin_addr", addr)
	}

	sigs, stop := stopSignals()
	defer stop()
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(capped) }()
	log.Info("modelcalls replay listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String(),
		"capture_dir", srv.Source.Dir(), "match", string(srv.Match), "timing", srv.Timing.String(),
		"on_miss", o.onMiss, "capture_dir_out", o.captureDirOut)

	result := awaitStop(ctx, serveErr, sigs, o.shutdownTimeout, log)
	shutdownHTTP(hs, sigs, o.shutdownTimeout, log) // a replay has nothing of its own to cut off
	if recap != nil {
		if err := finishWrites(recap.Shutdown); err != nil && result == nil {
			result = withExit(ExitFailure, fmt.Errorf("re-capture writes still pending at exit: %w", err))
		}
	}
	if admin != nil {
		admin.Close()
	}
	sum := srv.Summary()
	log.Info("replay summary", "served", sum.Served, "misses", sum.Misses, "exhausted", sum.Exhausted,
		"forwarded", sum.Forwarded, "not_recorded", sum.NotRecorded, "unused", sum.Unused)
	fmt.Fprintf(s.Out, "replay: %s\n", sum)
	return result
}
