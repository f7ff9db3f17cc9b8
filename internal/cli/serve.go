package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/gateway"
	"github.com/modelcalls/modelcalls/internal/hostcheck"
)

// The life of the serving commands (proxy, replay, and the gateway run starts for its child,
// ownGateway): their logger and the capture store they write to, an admin server beside the main
// one, serving until the server fails, a signal arrives or the context ends, then a drain that lets
// requests in flight finish before the connections left are closed, and a bounded wait for the
// capture writes of the calls the close cut off.

// captureWriteGrace bounds the wait, after the connections are closed, for the capture writes of the
// calls the close cut off (they are written, as cancelled, on the way out).
const captureWriteGrace = 30 * time.Second

// serveLogger returns the logger of a serving command: records at level (its --log-level: debug,
// info, warn or error) on w, as text or, with format "json", one JSON object per line. A bad level
// is a usage error.
func serveLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErrorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// serverErrorLog is the http.Server.ErrorLog of a serving command: the server's own errors
// (malformed requests, failed accepts) go to log at debug level.
func serverErrorLog(log *slog.Logger) *stdlog.Logger {
	return slog.NewLogLogger(log.Handler(), slog.LevelDebug)
}

// openWritableStore opens dir, the capture dir a serving command writes to (flag names it in the
// error: --capture-dir, --capture-dir-out), creating it when it does not exist, and checks that
// it can be written: a dir that exists but cannot be written would lose every call with nothing
// downstream to show it (not even the incomplete marker), so the command refuses to start. Errors
// exit ExitFailure.
func openWritableStore(flag, dir string) (*capture.Store, error) {
	store, err := capture.Open(dir)
	if err == nil {
		err = store.CheckWritable()
	}
	if err != nil {
		return nil, withExit(ExitFailure, fmt.Errorf("%s: %w", flag, err))
	}
	return store, nil
}

// openCaptureStore is openWritableStore for the capture dir of a gateway (proxy, run), saying at
// info when the dir did not exist and was created: a typo in --capture-dir otherwise goes
// unnoticed until the captures are looked for.
func openCaptureStore(dir string, log *slog.Logger) (*capture.Store, error) {
	_, statErr := os.Stat(dir)
	store, err := openWritableStore("--capture-dir", dir)
	if err == nil && errors.Is(statErr, fs.ErrNotExist) {
		log.Info("created the capture dir, which did not exist", "capture_dir", dir)
	}
	return store, err
}

// upstreamDialTimeout bounds warnUnreachableUpstream's connection attempt.
const upstreamDialTimeout = 2 * time.Second

// warnUnreachableUpstream opens (and closes) one TCP connection to the upstream's host and warns
// once when none can be made: the gateway still starts (the model server may come up later), but
// every call would get 502 until it does, which is better said at start than as each call failing
// inside a harness that retries. It sends nothing over the connection.
func warnUnreachableUpstream(ctx context.Context, u *url.URL, log *slog.Logger) {
	d := net.Dialer{Timeout: upstreamDialTimeout}
	c, err := d.DialContext(ctx, "tcp", hostPort(u))
	if err != nil {
		log.Warn("the upstream does not accept connections; the gateway starts anyway, and calls get 502 until it does",
			"upstream", u.Redacted(), "error", err)
		return
	}
	c.Close()
}

// servingStopSignals are the signals that make a serving command (proxy, replay, view) drain and
// stop: SIGINT, SIGTERM and SIGHUP. SIGHUP (the terminal closed, an ssh session dropped) drains like
// SIGTERM rather than killing at once, so the calls in flight still finish and get their lines.
var servingStopSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// stopSignals returns a channel that receives servingStopSignals (room for two: the one that starts
// the drain and the one that cuts it short) and the function that stops the delivery; SIGPIPE is
// caught meanwhile (catchSIGPIPE).
func stopSignals() (chan os.Signal, func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, servingStopSignals...)
	release := catchSIGPIPE()
	return sigs, func() { signal.Stop(sigs); release() }
}

// catchSIGPIPE catches SIGPIPE (and drops it) until the returned function is called: when a hangup
// also took the reader of the log or of stdout away (a pipe into tee or a logger), a write there
// fails with EPIPE instead of killing a serving command in the middle of its drain (Go's default
// for a broken pipe on descriptors 1 and 2).
func catchSIGPIPE() func() {
	pipe := make(chan os.Signal, 1) // never read: a delivery that finds it full is dropped
	signal.Notify(pipe, syscall.SIGPIPE)
	return func() { signal.Stop(pipe) }
}

// listenFlag listens on addr, the value of the serving command's flag (--listen, --admin-listen).
// A malformed address or one that cannot be listened on is a usage error naming the flag; one in use
// (EADDRINUSE) is mapped to ExitFailure by Main, as the machine's state rather than a mistake in the
// arguments.
func listenFlag(flag, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageErrorf("%s %s: %w", flag, addr, err)
	}
	return ln, nil
}

// allowOrigins checks the --allow-origin values of a gateway (proxy, run --upstream): each must be
// a web origin, scheme://host[:port]; anything else is a usage error naming it.
func allowOrigins(values []string) ([]string, error) {
	for _, v := range values {
		if _, err := gateway.ParseOrigin(v); err != nil {
			return nil, usageErrorf("--allow-origin: %w", err)
		}
	}
	return values, nil
}

// hostGuard puts next behind the DNS rebinding defence of view and replay (hostcheck): it answers
// only loopback names and addresses, the listen address (flag as given and ln's bound address) and
// the --allowed-host names. An empty --allowed-host closes ln and is a usage error.
func hostGuard(next http.Handler, flag string, ln net.Listener, allowed []string, log *slog.Logger) (http.Handler, error) {
	g, err := hostcheck.New(next, []string{flag, ln.Addr().String()}, allowed, "--allowed-host", log)
	if err != nil {
		ln.Close()
		return nil, usageErrorf("%w", err)
	}
	return g, nil
}

// serveAdmin listens on addr (an --admin-listen address) and serves handler there, logging the
// server's own errors at debug level; it returns the server and the address it listens on. When addr
// cannot be listened on it closes main, the command's listener (not served yet), and returns a usage
// error.
func serveAdmin(addr string, handler http.Handler, main net.Listener, log *slog.Logger) (*http.Server, string, error) {
	ln, err := listenFlag("--admin-listen", addr)
	if err != nil {
		main.Close()
		return nil, "", err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: gateway.DefaultReadHeaderTimeout,
		ErrorLog: serverErrorLog(log)}
	go srv.Serve(ln)
	return srv, ln.Addr().String(), nil
}

// awaitStop blocks until serving fails (serveErr), a signal arrives on sigs or ctx ends (nil: never),
// and logs why the command shuts down and the drain timeout. It returns the serving failure (exit
// code ExitFailure), nil on a signal or the context's end.
func awaitStop(ctx context.Context, serveErr <-chan error, sigs <-chan os.Signal, timeout time.Duration, log *slog.Logger) error {
	if ctx == nil {
		ctx = context.Background()
	}
	select {
	case err := <-serveErr:
		return withExit(ExitFailure, fmt.Errorf("serve: %w", err))
	case sig := <-sigs:
		log.Info("shutting down: finishing in-flight calls", "signal", sig.String(), "timeout", timeout.String())
	case <-ctx.Done():
		log.Info("shutting down: finishing in-flight calls", "reason", context.Cause(ctx), "timeout", timeout.String())
	}
	return nil
}

// shutdownHTTP stops srv accepting connections and lets the requests in flight finish, for up to
// timeout or until a second signal arrives on sigs (nil: none is awaited), then closes the
// connections left. It returns srv.Shutdown's error: nil when every request finished in time,
// context.DeadlineExceeded or context.Canceled when the rest were cut off.
func shutdownHTTP(srv *http.Server, sigs <-chan os.Signal, timeout time.Duration, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	go func() {
		select {
		case sig := <-sigs:
			log.Warn("second signal: closing connections now", "signal", sig.String())
			cancel()
		case <-ctx.Done():
		}
	}()
	err := srv.Shutdown(ctx)
	if err != nil {
		srv.Close()
	}
	return err
}

// drainGateway stops accepting connections, lets in-flight calls and their capture writes finish
// (up to timeout, or until a second signal on sigs; nil: none), then closes what is left. Calls cut
// off by the close are still captured (as cancelled) before the handler returns, and drainGateway
// waits for those writes (finishWrites). cutOff is context.DeadlineExceeded when the timeout cut
// calls off (logged at warn), context.Canceled when a second signal did (shutdownHTTP logs it), nil
// when every call finished; err is what makes the drain fail: writes still pending, or a shutdown
// error of another kind.
func drainGateway(srv *http.Server, h *gateway.Handler, sigs <-chan os.Signal, timeout time.Duration, log *slog.Logger) (cutOff, err error) {
	h.BeginShutdown() // /readyz answers 503 for the whole drain
	serr := shutdownHTTP(srv, sigs, timeout, log)
	if errors.Is(serr, context.DeadlineExceeded) {
		log.Warn("in-flight calls did not finish in time; connections closed", "err", serr)
	}
	// Closing connections cancels the calls still running; their capture lines are written on the
	// way out. Give those writes a bounded moment.
	if werr := finishWrites(h.Shutdown); werr != nil {
		return serr, fmt.Errorf("capture writes still pending at exit: %w", werr)
	}
	if serr != nil && !errors.Is(serr, context.DeadlineExceeded) && !errors.Is(serr, context.Canceled) {
		return nil, fmt.Errorf("shutdown: %w", serr)
	}
	return serr, nil
}

// drainProxy is the proxy's drain (drainGateway): calls cut off by the timeout or a second signal
// are a clean stop, since they are captured (as cancelled); only writes still pending or another
// shutdown error fail it (ExitFailure).
func drainProxy(srv *http.Server, h *gateway.Handler, sigs <-chan os.Signal, timeout time.Duration, log *slog.Logger) error {
	if _, err := drainGateway(srv, h, sigs, timeout, log); err != nil {
		return withExit(ExitFailure, err)
	}
	return nil
}

// finishWrites waits, up to captureWriteGrace, for the capture writes still pending after the
// connections were closed: shutdown is the Shutdown method of what writes them.
func finishWrites(shutdown func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), captureWriteGrace)
	defer cancel()
	return shutdown(ctx)
}

// ownGateway is the gateway `run --upstream` starts for the child's lifetime.
type ownGateway struct {
	url   string
	srv   *http.Server
	h     *gateway.Handler
	log   *slog.Logger
	serve chan error
}

func startOwnGateway(s *Streams, o *runOptions) (*ownGateway, error) {
	// The proxy's own checks of --upstream and --capture-dir, so both commands say the same.
	cfg, err := resolveProxyConfig(&proxyOptions{upstream: o.upstream, captureDir: o.captureDir,
		maxHeaderBytes: gateway.DefaultMaxHeaderBytes, logFormat: "text", tokens: o.tokens}, nil)
	if err != nil {
		return nil, err
	}
	log, err := serveLogger(s.ErrOut, o.logLevel, "text")
	if err != nil {
		return nil, err
	}
	store, err := openCaptureStore(cfg.captureDir, log)
	if err != nil {
		return nil, err
	}
	origins, err := allowOrigins(o.allowOrigins)
	if err != nil {
		return nil, err
	}
	h := &gateway.Handler{Upstream: cfg.upstream, Store: store, ModelServerName: o.name, Logger: log, AllowedOrigins: origins,
		Tokens: cfg.tokens}
	ln, err := listenFlag("--listen", o.listen)
	if err != nil {
		return nil, err
	}
	g := &ownGateway{
		url:   "http://" + ln.Addr().String(),
		h:     h,
		log:   log,
		srv:   h.NewServer(gateway.ServerOptions{MaxHeaderBytes: gateway.DefaultMaxHeaderBytes}),
		serve: make(chan error, 1),
	}
	g.srv.ErrorLog = serverErrorLog(log)
	go func() { g.serve <- g.srv.Serve(ln) }()
	log.Info("modelcalls run: gateway listening", "url", g.url, "upstream", cfg.upstream.Redacted(), "capture_dir", cfg.captureDir)
	warnUnreachableUpstream(context.Background(), cfg.upstream, log)
	return g, nil
}

// drain is drainGateway for the gateway of run: no second signal cuts it short (run forwards its
// signals to the child), and calls cut off by the timeout fail it too, since the child's run was
// then not captured as it happened (the calls are captured as cancelled).
func (g *ownGateway) drain(timeout time.Duration) error {
	cutOff, err := drainGateway(g.srv, g.h, nil, timeout, g.log)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if cutOff != nil {
		return fmt.Errorf("gateway: calls still in flight after %s were cut off (captured as cancelled)", timeout)
	}
	return nil
}
