package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcalls/modelcalls/gateway"
)

// The life of the serving commands (proxy, replay, and run's own gateway): an admin server beside
// the main one, serving until the server fails, a signal arrives or the context ends, then a drain
// that lets requests in flight finish before the connections left are closed, and a bounded wait for
// the capture writes of the calls the close cut off.

// captureWriteGrace bounds the wait, after the connections are closed, for the capture writes of the
// calls the close cut off (they are written, as cancelled, on the way out).
const captureWriteGrace = 30 * time.Second

// stopSignals returns a channel that receives SIGINT and SIGTERM (room for two: the one that starts
// the drain and the one that cuts it short) and the function that stops the delivery.
func stopSignals() (chan os.Signal, func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	return sigs, func() { signal.Stop(sigs) }
}

// serveAdmin listens on addr (an --admin-listen address) and serves handler there, logging the
// server's own errors at debug level; it returns the server and the address it listens on. When addr
// cannot be listened on it closes main, the command's listener (not served yet), and returns a usage
// error.
func serveAdmin(addr string, handler http.Handler, main net.Listener, log *slog.Logger) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		main.Close()
		return nil, "", usageErrorf("--admin-listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: gateway.DefaultReadHeaderTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
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
		log.Info("shutting down: finishing in-flight calls", "signal", sig.String(), "timeout", timeout)
	case <-ctx.Done():
		log.Info("shutting down: finishing in-flight calls", "reason", context.Cause(ctx), "timeout", timeout)
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

// finishWrites waits, up to captureWriteGrace, for the capture writes still pending after the
// connections were closed: shutdown is the Shutdown method of what writes them.
func finishWrites(shutdown func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), captureWriteGrace)
	defer cancel()
	return shutdown(ctx)
}
