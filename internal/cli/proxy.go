package cli

import (
	"context"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/config"
	"github.com/modelcalls/modelcalls/tokens"
)

// proxyOptions are the flags of `modelcalls proxy`.
type proxyOptions struct {
	upstream        string
	captureDir      string
	listen          string
	name            string
	configFile      string
	upstreamTimeout time.Duration
	idleTimeout     time.Duration
	maxRequestBytes int64
	maxCaptureBytes int64
	shutdownTimeout time.Duration
	logLevel        string

	// Connection hygiene, admin listener and log format.
	adminListen        string
	logFormat          string
	requestBodyTimeout time.Duration
	keepAliveTimeout   time.Duration
	maxHeaderBytes     int
	maxConnections     int
	allowOrigins       []string
	otlp               otlpOptions // otlp.go
	tokens             string      // --tokens: the engine asked for token ids and logprobs
}

func newProxyCmd(s *Streams) *cobra.Command {
	var o proxyOptions
	cmd := &cobra.Command{
		Use:   "proxy --upstream URL --capture-dir DIR [--listen ADDR] [--name MODEL_SERVER_NAME] [--config FILE] [++key=value ...]",
		Short: "Run the capture gateway in front of one upstream model server",
		Long: `Run the capture gateway: forward every request to --upstream unchanged, and write one line per
model call made under {base}/ng-rollout/<rollout_id>/v1/{responses,chat/completions,messages} to
<capture dir>/<rollout_id>.capture.jsonl.

The capture dir comes from --capture-dir or, NeMo Gym style, from the global config
(--config gym.yaml and ++key=value overrides): ++observability_enabled=true
++model_call_capture_dir=/abs/dir (a --config file that does not exist, or is a directory, is exit
3; one that is not valid YAML is exit 2). The first SIGINT, SIGTERM or SIGHUP (a closed terminal, a dropped
ssh session) drains in-flight calls and their capture writes (up to --shutdown-timeout); a second
one stops at once.

The proxy port forwards every path to the upstream, /healthz, /readyz and /metrics included (a
model server's own /metrics stays reachable). The gateway's admin endpoints (GET /healthz,
/readyz: 503 while draining, /metrics: Prometheus) are served on --admin-listen ADDR only, off
unless given.

A request a browser marks as cross-site (an Origin that is neither the gateway's own nor an
--allow-origin, or Sec-Fetch-Site: cross-site) gets 403 cross_site_request and is neither
forwarded nor captured: a web page must not add calls to a rollout. SDKs and harnesses send no
Origin, so they are not affected.

HTTP/1.0, HTTP/1.1 and HTTP/2 cleartext with prior knowledge are served on the same port; an
"Upgrade: h2c" request is answered in HTTP/1.1. Each captured call is logged at info ("model
call": rollout, dialect, model, status, tokens, latency, TTFT, outcome); --log-format json
writes one JSON object per line.

The gateway strips the /ng-rollout/<rollout_id>/ prefix before it forwards, as a model server
expects. A modelcalls replay keys its calls by that prefix, so to capture a replayed run use
replay --capture-dir-out, or give one proxy per rollout --upstream http://REPLAY/ng-rollout/<id>.`,
		Args: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if !config.IsOverride(a) {
					return usageErrorf("unexpected argument %q: only config overrides (++key=value) may follow the flags", a)
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runProxy(cmd.Context(), s, &o, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.upstream, "upstream", "", "base URL of the upstream model server (required), e.g. http://127.0.0.1:8000")
	f.StringVar(&o.captureDir, "capture-dir", "", "capture directory (default: model_call_capture_dir from the config)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to listen on (port 0 picks a free port)")
	f.StringVar(&o.name, "name", "", "model server name recorded as model_ref.name (default: none, model_ref null)")
	f.StringVar(&o.configFile, "config", "", "NeMo Gym global config YAML file")
	f.DurationVar(&o.upstreamTimeout, "upstream-timeout", gateway.DefaultUpstreamTimeout, "longest wait for the upstream's response headers (0: no limit)")
	f.DurationVar(&o.idleTimeout, "idle-timeout", gateway.DefaultIdleTimeout, "longest wait between reads of a captured response body (0: no limit)")
	f.Int64Var(&o.maxRequestBytes, "max-request-bytes", gateway.DefaultMaxRequestBytes, "largest captured request body; larger ones get 413 (0: no limit)")
	f.Int64Var(&o.maxCaptureBytes, "max-capture-bytes", gateway.DefaultMaxCaptureBytes, "decoded response bytes one capture keeps; past it the line keeps the first bytes and says capture_too_large (0: no limit)")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 2*time.Minute, "on SIGINT/SIGTERM/SIGHUP, how long to let in-flight calls finish")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.StringVar(&o.adminListen, "admin-listen", "", "address of the admin endpoints /healthz, /readyz, /metrics (default: none)")
	f.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	f.DurationVar(&o.requestBodyTimeout, "request-body-timeout", gateway.DefaultRequestBodyTimeout, "longest wait between reads of a captured request body; then 408, captured as cancelled (0: no limit)")
	f.DurationVar(&o.keepAliveTimeout, "keepalive-timeout", gateway.DefaultKeepAliveTimeout, "how long an idle client connection stays open (0: no limit)")
	f.IntVar(&o.maxHeaderBytes, "max-header-bytes", gateway.DefaultMaxHeaderBytes, "largest request header block; larger ones get 431")
	f.IntVar(&o.maxConnections, "max-connections", 0, "most client connections open at once, more are refused with 503 (0: derived from the file-descriptor limit; -1: no cap)")
	f.StringArrayVar(&o.allowOrigins, "allow-origin", nil, "a web origin (scheme://host[:port]) whose browser requests are served besides the gateway's own (repeatable); other cross-site requests get 403")
	addOTLPFlags(f, &o.otlp)
	addTokensFlag(f, &o.tokens, "")
	return cmd
}

// proxyConfig is the validated setup of one proxy run.
type proxyConfig struct {
	upstream   *url.URL
	captureDir string
	tokens     tokens.Engine
}

// schemeHint is what a URL flag's error adds when the value is a bare HOST:PORT (the scheme left
// out, as in 127.0.0.1:8000 or localhost:8000): "; did you mean http://HOST:PORT?". Nothing for
// anything else, nor for a value holding "@" (it may carry credentials, which are never echoed).
func schemeHint(raw string) string {
	if strings.Contains(raw, "://") || strings.Contains(raw, "@") {
		return ""
	}
	if host, port, err := net.SplitHostPort(strings.TrimRight(raw, "/")); err != nil || host == "" || port == "" {
		return ""
	}
	return "; did you mean http://" + strings.TrimRight(raw, "/") + "?"
}

// resolveProxyConfig checks the flags and merges them with the Gym config. Every error names the
// flag or config key and the rule.
func resolveProxyConfig(o *proxyOptions, overrides []string) (*proxyConfig, error) {
	engine, err := tokens.ParseEngine(o.tokens)
	if err != nil {
		return nil, usageErrorf("--tokens: %w", err)
	}
	if o.upstream == "" {
		return nil, usageErrorf("--upstream is required (the base URL of the model server, e.g. http://127.0.0.1:8000)")
	}
	u, err := url.Parse(o.upstream)
	if err != nil {
		// The text may hold credentials; url.Parse's error quotes it, so neither is repeated.
		return nil, usageErrorf("--upstream: not a URL; it must be an absolute http:// or https:// URL with a host%s", schemeHint(o.upstream))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Quoted as typed ("http://", not the "http:" a URL without a host prints as), unless it
		// holds a password.
		shown := o.upstream
		if _, hasPassword := u.User.Password(); hasPassword {
			shown = u.Redacted()
		}
		return nil, usageErrorf("--upstream %q: must be an absolute http:// or https:// URL with a host%s", shown, schemeHint(o.upstream))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		u.RawQuery = ""
		return nil, usageErrorf("--upstream %q: must not have a query or fragment", u.Redacted())
	}
	values := config.Values{}
	if o.configFile != "" {
		if err := checkInputFile("--config", o.configFile); err != nil {
			return nil, err // a missing input file is exit 3, as for --in; a bad one stays exit 2
		}
		if values, err = config.Load(o.configFile); err != nil {
			return nil, usageErrorf("--config: %w", err)
		}
	}
	if err := values.Apply(overrides...); err != nil {
		return nil, usageErrorf("%w", err)
	}
	gymDirs, err := modelcalls.CaptureDirsFromConfig(values)
	if err != nil {
		return nil, usageErrorf("config: %w", err)
	}
	gymDir := "" // "" when the config leaves capture off
	if len(gymDirs) > 0 {
		gymDir = gymDirs[0]
	}
	dir := o.captureDir
	if dir != "" {
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, usageErrorf("--capture-dir: %w", err)
		}
		if gymDir != "" && gymDir != dir {
			return nil, usageErrorf("--capture-dir %s and %s %s disagree: give one", dir, modelcalls.ConfigCaptureDir, gymDir)
		}
	} else {
		dir = gymDir
	}
	if dir == "" {
		return nil, usageErrorf("no capture dir: pass --capture-dir DIR, or ++%s=true ++%s=/abs/dir",
			modelcalls.ConfigObservabilityEnabled, modelcalls.ConfigCaptureDir)
	}
	if o.maxRequestBytes < 0 {
		return nil, usageErrorf("--max-request-bytes must be >= 0 (0: no limit)")
	}
	if o.maxHeaderBytes <= 0 {
		return nil, usageErrorf("--max-header-bytes must be > 0")
	}
	if o.maxConnections < -1 {
		return nil, usageErrorf("--max-connections must be >= -1 (0: derived from the file-descriptor limit; -1: no cap)")
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return nil, usageErrorf("--log-format %q: want text or json", o.logFormat)
	}
	if _, err := allowOrigins(o.allowOrigins); err != nil {
		return nil, err
	}
	return &proxyConfig{upstream: u, captureDir: dir, tokens: engine}, nil
}

// noLimit maps the CLI's "0 means no limit" to the Handler's "negative means no limit".
func noLimit[T ~int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// runProxy serves until ctx ends or a signal arrives, then drains.
func runProxy(ctx context.Context, s *Streams, o *proxyOptions, overrides []string) error {
	cfg, err := resolveProxyConfig(o, overrides)
	if err != nil {
		return err
	}
	log, err := serveLogger(s.ErrOut, o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	store, err := openCaptureStore(cfg.captureDir, log)
	if err != nil {
		return err
	}
	h := &gateway.Handler{
		Upstream:        cfg.upstream,
		Store:           store,
		ModelServerName: o.name,
		UpstreamTimeout: noLimit(o.upstreamTimeout),
		IdleTimeout:     noLimit(o.idleTimeout),
		MaxRequestBytes: noLimit(o.maxRequestBytes),
		MaxCaptureBytes: noLimit(o.maxCaptureBytes),
		Logger:          log,

		RequestBodyTimeout: noLimit(o.requestBodyTimeout),
		AllowedOrigins:     o.allowOrigins,
		NoAdminEndpoints:   true, // the proxy port forwards every path; admin is --admin-listen
		Tokens:             cfg.tokens,
	}
	// Live OTLP export; stopOTLP flushes it after the drain, before the last line ("stopped"), and
	// on every earlier return (deferred; it runs once).
	stopOTLP, err := startOTLP(&o.otlp, h, cfg.upstream, log)
	if err != nil {
		return err
	}
	defer stopOTLP()
	ln, err := listenFlag("--listen", o.listen)
	if err != nil {
		return err
	}
	srv := h.NewServer(gateway.ServerOptions{KeepAliveTimeout: noLimit(o.keepAliveTimeout), MaxHeaderBytes: o.maxHeaderBytes})
	maxConns := o.maxConnections
	if maxConns == 0 {
		maxConns = gateway.DefaultMaxConnections()
	}
	capped := h.Listener(ln, maxConns)
	adminURL := ""
	if o.adminListen != "" {
		admin, addr, err := serveAdmin(o.adminListen, h.AdminHandler(), ln, log)
		if err != nil {
			return err
		}
		adminURL = "http://" + addr
		defer admin.Close()
	}
	// Signals are caught before the listening line is printed, so whoever waits for that line may
	// signal at once.
	sigs, stop := stopSignals()
	defer stop()

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(capped) }()
	// Before the listening line, so that whoever waits for it has seen the warning too; calls
	// already reach the gateway meanwhile.
	warnUnreachableUpstream(ctx, cfg.upstream, log)
	log.Info("modelcalls proxy listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String(),
		"upstream", cfg.upstream.Redacted(), "capture_dir", cfg.captureDir, "name", o.name,
		"admin_url", adminURL, "max_connections", maxConns)

	if err := awaitStop(ctx, serveErr, sigs, o.shutdownTimeout, log); err != nil {
		return err
	}
	err = drainProxy(srv, h, sigs, o.shutdownTimeout, log)
	stopOTLP() // the drained calls' spans go out before the last line
	if err == nil {
		log.Info("stopped")
	}
	return err
}
