package cli

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/gateway"
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

// TestDrainGateway drains a capturing gateway with one captured call the upstream never answers:
// the timeout cuts it off (logged at warn), its line is still written (cancelled) before the drain
// returns, and that is a clean stop for the proxy (drainProxy) and a failure for run's own gateway
// (ownGateway.drain); with no call in flight both stop cleanly and warn of nothing.
func TestDrainGateway(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inFlight bool
		drain    func(g *ownGateway) error
		wantErr  string // "": none
	}{
		{"proxy, idle", false, func(g *ownGateway) error { return drainProxy(g.srv, g.h, nil, 50*time.Millisecond, g.log) }, ""},
		{"proxy, call cut off", true, func(g *ownGateway) error { return drainProxy(g.srv, g.h, nil, 50*time.Millisecond, g.log) }, ""},
		{"run, idle", false, func(g *ownGateway) error { return g.drain(50 * time.Millisecond) }, ""},
		{"run, call cut off", true, func(g *ownGateway) error { return g.drain(50 * time.Millisecond) }, "were cut off (captured as cancelled)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started, upstreamDone := make(chan struct{}), make(chan struct{})
			upstream := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body) // the server sees the gateway go away only after the body
				close(started)
				<-r.Context().Done() // never answers
				close(upstreamDone)
			})
			u, err := url.Parse(upstream.URL)
			if err != nil {
				t.Fatal(err)
			}
			var logs capturetest.Buffer
			store := capturetest.NewStore(t)
			log := capturetest.Logger(&logs)
			h := &gateway.Handler{Upstream: u, Store: store, Logger: log}
			ln := capturetest.Listen(t)
			g := &ownGateway{srv: h.NewServer(gateway.ServerOptions{}), h: h, log: log}
			go g.srv.Serve(ln)
			if tc.inFlight {
				go http.Post("http://"+ln.Addr().String()+"/ng-rollout/r1/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m"}`))
				<-started
			}
			err = tc.drain(g)
			if tc.inFlight {
				select {
				case <-upstreamDone:
				case <-time.After(3 * time.Second):
					t.Fatalf("the upstream request is still open after the drain; logs:\n%s", logs.String())
				}
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("drain = %v, want %q", err, tc.wantErr)
			}
			if got := strings.Contains(logs.String(), "did not finish in time"); got != tc.inFlight {
				t.Errorf("timeout warning logged: %v, want %v:\n%s", got, tc.inFlight, logs.String())
			}
			if lines := capturetest.Lines(t, store, "r1"); tc.inFlight && (len(lines) != 1 || lines[0].Category() != "cancelled") {
				t.Errorf("want the cut-off call captured as cancelled, got %d lines", len(lines))
			}
		})
	}
}
