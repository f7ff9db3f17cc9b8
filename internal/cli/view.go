package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/modelcalls/modelcalls/view"
)

// DefaultViewListen is the address `modelcalls view` listens on without --listen.
const DefaultViewListen = "127.0.0.1:7580"

type viewOptions struct {
	dirs         []string
	rollouts     string
	listen       string
	allowedHosts []string
}

func newViewCmd(s *Streams) *cobra.Command {
	var o viewOptions
	cmd := &cobra.Command{
		Use:   "view --capture-dir DIR [--capture-dir DIR2 ...] [--rollouts FILE.jsonl] [--listen ADDR] [--allowed-host NAME ...]",
		Short: "Browse capture dirs in a local web viewer that updates while the gateway writes",
		Long: `view serves a web viewer over one or more capture dirs: a run overview (calls, errors, tokens,
cache, latency and TTFT histograms, per model and dialect, gaps), a sortable and filterable rollout
list, each rollout's timeline and conversation, and each call's request, response and record.
It rescans the dirs continuously, so calls appear while a gateway is still writing. With
--rollouts, the scalar fields of the rollout records (reward, ...) become columns.

Everything is in the binary (no network needed) and the viewer only reads the dirs. The pages use a
JSON API under /api/ that scripts can use too (docs/view.md). It prints its URL and serves until
SIGINT, SIGTERM or SIGHUP (a closed terminal). It answers only requests whose Host is a loopback
name or address, its listen address, or a name given with --allowed-host (others get 403: a web
page whose name resolves to this machine must not read the captures). Exit code 3 when a capture dir does not exist, 2 for a bad flag, 1 when the address
cannot be listened on.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runView(cmd.Context(), s, &o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.dirs, "capture-dir", nil, "capture dir to show (repeatable; a rollout in several belongs to the first)")
	f.StringVar(&o.rollouts, "rollouts", "", "JSONL file of rollout records whose scalar fields become list columns")
	f.StringVar(&o.listen, "listen", DefaultViewListen, "address to serve on (host:port)")
	f.StringArrayVar(&o.allowedHosts, "allowed-host", nil, "a host name the viewer also answers to, besides loopback names and addresses and the listen address (repeatable)")
	return cmd
}

func runView(ctx context.Context, s *Streams, o *viewOptions) error {
	if err := checkCaptureDirs(o.dirs); err != nil {
		return err
	}
	if o.rollouts != "" {
		if err := checkInputFile("--rollouts", o.rollouts); err != nil {
			return err
		}
	}
	log := slog.New(slog.NewTextHandler(s.ErrOut, nil))
	srv, err := view.New(view.Options{Dirs: o.dirs, RolloutsFile: o.rollouts, Logger: log})
	if err != nil {
		return withExit(ExitNotFound, err)
	}
	ln, err := listenFlag("--listen", o.listen)
	if err != nil {
		return err
	}
	guarded, err := hostGuard(srv, o.listen, ln, o.allowedHosts, log)
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signalContext(ctx, servingStopSignals...)
	defer stop()
	defer catchSIGPIPE()()
	go srv.Run(ctx)
	// Requests inherit ctx, so the live-update long polls end at once on a signal.
	hs := &http.Server{Handler: guarded, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	where, all := view.ListenURL(ln.Addr())
	if all {
		where = "all interfaces, open " + where
	}
	fmt.Fprintf(s.Out, "modelcalls view: serving %s on %s (Ctrl-C to stop)\n", strings.Join(o.dirs, ", "), where)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc: // not http.ErrServerClosed: hs is shut down only below
		return withExit(ExitFailure, fmt.Errorf("serve: %w", err))
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	hs.Shutdown(sctx) // long polls end with the close; nothing to drain
	return nil
}
