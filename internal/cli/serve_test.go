package cli

import (
	"context"
	"errors"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// TestShutdownHTTP drains a real server with one request that never finishes on its own: the drain
// ends at its timeout, or at once on a second signal, and either way the connection is closed (the
// client's request fails) and the error says which.
func TestShutdownHTTP(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		signal  bool
		want    error
	}{
		{"timeout", 50 * time.Millisecond, false, context.DeadlineExceeded},
		{"second signal", 30 * time.Second, true, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started, release := make(chan struct{}), make(chan struct{})
			defer close(release)
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(started)
				select {
				case <-release:
				case <-r.Context().Done():
				}
			})}
			ln := capturetest.Listen(t)
			go srv.Serve(ln)
			reqErr := make(chan error, 1)
			go func() {
				res, err := http.Get("http://" + ln.Addr().String())
				if err == nil {
					res.Body.Close()
				}
				reqErr <- err
			}()
			<-started
			sigs := make(chan os.Signal, 1)
			if tc.signal {
				sigs <- syscall.SIGTERM
			}
			if err := shutdownHTTP(srv, sigs, tc.timeout, capturetest.QuietLogger()); !errors.Is(err, tc.want) {
				t.Errorf("shutdownHTTP = %v, want %v", err, tc.want)
			}
			if err := <-reqErr; err == nil {
				t.Error("the request in flight was answered; want its connection closed")
			}
		})
	}
}

// TestAwaitStop: a serving failure is returned as a failure, a signal or the context's end as a
// stop.
func TestAwaitStop(t *testing.T) {
	log := capturetest.QuietLogger()
	serveErr := make(chan error, 1)
	serveErr <- errors.New("accept: too many open files")
	var ee *exitError
	if err := awaitStop(context.Background(), serveErr, nil, time.Second, log); !errors.As(err, &ee) || ee.code != ExitFailure {
		t.Errorf("serve failure: %v, want it with exit code %d", err, ExitFailure)
	}
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGINT
	if err := awaitStop(nil, make(chan error), sigs, time.Second, log); err != nil {
		t.Errorf("signal: %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := awaitStop(ctx, make(chan error), nil, time.Second, log); err != nil {
		t.Errorf("context end: %v, want nil", err)
	}
}
