package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/modelcalls/modelcalls/dialect"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/modelcalls/modelcalls/rollout"
)

// runOptions are the flags of `modelcalls run`.
type runOptions struct {
	rolloutID       string
	gatewayURL      string
	upstream        string
	captureDir      string
	listen          string
	name            string
	shutdownTimeout time.Duration
	logLevel        string
	tokens          string // --tokens, for the gateway --upstream starts
	allowOrigins    []string
	// ownGatewayFlags are the flags given that configure the gateway --upstream starts (--name,
	// --shutdown-timeout, --log-level): with --gateway they would be ignored, so they are refused.
	ownGatewayFlags []string
}

// Exit codes of `modelcalls run` when the command cannot be started, as POSIX shells use them.
const (
	exitCannotExecute = 126 // the command exists but could not be executed
	exitNotFoundCmd   = 127 // the command was not found
)

// envRolloutID is the variable `modelcalls run` sets to the rollout id for the child, beside the
// base-URL variables of every dialect's clients (dialect.ClientEnv; docs/guide.md lists which
// harness reads which).
const envRolloutID = "MODELCALLS_ROLLOUT_ID"

func newRunCmd(s *Streams) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run --rollout ID (--gateway URL | --upstream URL --capture-dir DIR) -- CMD [ARGS...]",
		Short: "Run an agent command with its model calls captured under one rollout",
		Long: `Run CMD with the base-URL variables the model SDKs and harnesses read pointed at a capture gateway
under the rollout's prefix, for the child only:

  OPENAI_BASE_URL, OPENAI_API_BASE   <gateway>/ng-rollout/<ID>/v1
  ANTHROPIC_BASE_URL                 <gateway>/ng-rollout/<ID>
  GOOGLE_GEMINI_BASE_URL             <gateway>/ng-rollout/<ID>
  MODELCALLS_ROLLOUT_ID              <ID>

Harnesses that take their base URL from their own config are pointed at the gateway by their own
override mechanism, for this run only; their config files are read, never changed:

  codex      -c model_providers.<name>.base_url=... for every provider in $CODEX_HOME/config.toml
             (its built-in openai provider reads OPENAI_BASE_URL)
  opencode   OPENCODE_CONFIG_CONTENT with provider.<name>.options.baseURL for the providers of its
             configs, openai and anthropic
  pi         PI_CODING_AGENT_DIR: a temporary agent dir linking to ~/.pi/agent, with a models.json
             whose providers' baseUrl is the gateway (openai and anthropic too)

So the harness's usual setup, pointed at the model server, keeps working unchanged outside run.

Every other variable is kept; stdin, stdout and stderr are the child's. SIGINT, SIGTERM and SIGHUP
sent to modelcalls are forwarded to the child. On a terminal the child runs as the foreground job,
so Ctrl-C reaches it once, directly. modelcalls exits with the child's exit status, or 128+N when a
signal N ended it (126: the command could not be executed, 127: not found).

With --gateway, calls go to a gateway that is already running (modelcalls proxy); --gateway is its
address only (http://HOST:PORT, no path: run adds /ng-rollout/<ID>); when nothing listens at that
URL, CMD is not run (exit 1). With --upstream and --capture-dir instead, modelcalls starts a gateway
of its own, on a free 127.0.0.1 port or on --listen ADDR, for the child's lifetime, and after the
child exits waits for every capture write in flight (up to --shutdown-timeout) before it exits.`,
		Example: `  # a gateway of its own, for this run only
  modelcalls run --rollout r1 --upstream http://127.0.0.1:8000 --capture-dir ./captures -- claude -p "fix the test"

  # Codex, opencode and pi as they are set up for the model server: run redirects them
  modelcalls run --rollout r3 --upstream http://127.0.0.1:8000 --capture-dir ./captures -- codex exec "fix the test"

  # through a running modelcalls proxy
  modelcalls run --rollout r2 --gateway http://127.0.0.1:8080 -- python agent.py

  # then look at what was captured
  modelcalls calls --capture-dir ./captures r1`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("run: missing CMD (put it after --, e.g. modelcalls run --rollout r1 --gateway URL -- claude -p hi)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, name := range []string{"name", "shutdown-timeout", "log-level", "allow-origin", "tokens", "listen"} {
				if cmd.Flags().Changed(name) {
					o.ownGatewayFlags = append(o.ownGatewayFlags, "--"+name)
				}
			}
			return runRun(cmd.Context(), s, &o, args)
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false) // everything after CMD belongs to CMD
	f.StringVar(&o.rolloutID, "rollout", "", "rollout id the child's calls are captured under (required)")
	f.StringVar(&o.gatewayURL, "gateway", "", "base URL of a running capture gateway, e.g. http://127.0.0.1:8080")
	f.StringVar(&o.upstream, "upstream", "", "start a gateway of its own in front of this model server URL (needs --capture-dir)")
	f.StringVar(&o.captureDir, "capture-dir", "", "with --upstream: capture directory the gateway writes to")
	f.StringVar(&o.listen, "listen", "127.0.0.1:0", "with --upstream: the address of the gateway run starts (127.0.0.1:0: a free loopback port)")
	f.StringVar(&o.name, "name", "", "with --upstream: model server name recorded as model_ref.name")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 2*time.Minute, "with --upstream: how long to let calls in flight finish after the child exits")
	f.StringArrayVar(&o.allowOrigins, "allow-origin", nil, "with --upstream: a web origin (scheme://host[:port]) whose browser requests the gateway serves (repeatable; others get 403)")
	f.StringVar(&o.logLevel, "log-level", "warn", "with --upstream: the gateway's log level on stderr (debug, info, warn, error); info shows its address, how the command was pointed at it and each captured call")
	addTokensFlag(f, &o.tokens, "with --upstream: ")
	return cmd
}

// childEnv returns env with every dialect's client base-URL variables (dialect.ClientEnv) for the
// rollout id on the gateway at gatewayBase and envRolloutID set (replacing any earlier values),
// every other variable kept in order.
func childEnv(env []string, gatewayBase, id string) []string {
	base := rolloutBase(gatewayBase, id)
	var set []string
	for _, v := range dialect.ClientEnv(base) {
		set = append(set, v.Name+"="+v.Value)
	}
	return setEnv(env, append(set, envRolloutID+"="+id)...)
}

// checkGatewayURL checks --gateway: an absolute http(s) URL of the gateway itself, with no path
// (run adds the rollout prefix; a path would put it after other segments, where the gateway does
// not read it, or twice), query or fragment.
func checkGatewayURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, usageErrorf("--gateway: must be an absolute http:// or https:// URL with a host, no query or fragment, e.g. http://127.0.0.1:8080%s", schemeHint(raw))
	}
	if p := strings.TrimRight(u.EscapedPath(), "/"); p != "" {
		root := (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
		if strings.Contains(p, "/"+rollout.PrefixSegment+"/") {
			return nil, usageErrorf("--gateway %s: give the gateway's address only (%s): run adds /%s/<ID> itself", u.Redacted(), root, rollout.PrefixSegment)
		}
		return nil, usageErrorf("--gateway %s: give the gateway's address without a path (%s): run adds /%s/<ID>/v1, and the gateway reads the prefix only where the path starts", u.Redacted(), root, rollout.PrefixSegment)
	}
	return u, nil
}

func runRun(ctx context.Context, s *Streams, o *runOptions, args []string) error {
	if o.rolloutID == "" {
		return usageErrorf("run: missing --rollout ID (the rollout the child's calls are captured under)")
	}
	if err := checkRolloutID("--rollout", o.rolloutID); err != nil {
		return err
	}
	switch {
	case o.gatewayURL != "" && o.upstream != "":
		return usageErrorf("run: give --gateway (a running gateway) or --upstream with --capture-dir (a gateway of its own), not both")
	case o.gatewayURL == "" && o.upstream == "":
		return usageErrorf("run: missing --gateway URL, or --upstream URL with --capture-dir DIR")
	case o.upstream != "" && o.captureDir == "":
		return usageErrorf("run: --upstream needs --capture-dir DIR (where the gateway writes the captures)")
	case o.gatewayURL != "" && o.captureDir != "":
		return usageErrorf("run: --capture-dir goes with --upstream; with --gateway the running gateway decides where captures go")
	case o.gatewayURL != "" && len(o.ownGatewayFlags) > 0:
		verb := "goes"
		if len(o.ownGatewayFlags) > 1 {
			verb = "go"
		}
		return usageErrorf("run: %s %s with --upstream, for the gateway run starts itself; a running --gateway has its own settings", strings.Join(o.ownGatewayFlags, " and "), verb)
	}
	if o.shutdownTimeout < 0 {
		return usageErrorf("--shutdown-timeout %s: must be >= 0", o.shutdownTimeout)
	}

	gatewayBase := o.gatewayURL
	var gw *ownGateway
	if o.gatewayURL != "" {
		u, err := checkGatewayURL(o.gatewayURL)
		if err != nil {
			return err
		}
		if err := checkGatewayListening(ctx, u); err != nil {
			return err
		}
	} else {
		var err error
		if gw, err = startOwnGateway(s, o); err != nil {
			return err
		}
		gatewayBase = gw.url
	}

	home, _ := os.UserHomeDir()
	cwd, _ := os.Getwd()
	wired, err := wireHarness(args, childEnv(os.Environ(), gatewayBase, o.rolloutID), rolloutBase(gatewayBase, o.rolloutID), home, cwd)
	if err != nil {
		if gw != nil {
			gw.drain(o.shutdownTimeout)
		}
		return withExit(ExitFailure, fmt.Errorf("run: point %s at the gateway: %w", filepath.Base(args[0]), err))
	}
	defer func() {
		for _, p := range wired.finish() {
			fmt.Fprintf(s.ErrOut, "modelcalls run: %s\n", p)
		}
	}()
	if wired.note != "" && gw != nil {
		gw.log.Info("modelcalls run: "+wired.note, "rollout_id", o.rolloutID)
	}
	status, runErr := runChild(ctx, s, wired.args, wired.env)
	if gw != nil {
		if err := gw.drain(o.shutdownTimeout); err != nil {
			fmt.Fprintf(s.ErrOut, "modelcalls run: %v\n", err)
			if runErr == nil && status == 0 {
				status = ExitFailure
			}
		}
	}
	if runErr != nil {
		return runErr
	}
	if status != 0 {
		return silentExit{code: status}
	}
	return nil
}

// gatewayDialTimeout bounds checkGatewayListening's connection attempt.
const gatewayDialTimeout = 3 * time.Second

// checkGatewayListening opens (and closes) one TCP connection to the --gateway URL's host, so that
// a gateway that is not running is said before the child starts rather than as every model call
// failing inside it (harnesses retry a refused connection for minutes before they give up). It
// checks only that something accepts connections there: it sends nothing, so a gateway's logs and
// metrics do not see it. The error exits 1: what is listening is the machine's state, not a
// mistake in the arguments.
func checkGatewayListening(ctx context.Context, u *url.URL) error {
	d := net.Dialer{Timeout: gatewayDialTimeout}
	c, err := d.DialContext(ctx, "tcp", hostPort(u))
	if err != nil {
		return withExit(ExitFailure, fmt.Errorf("run: no gateway is listening at --gateway %s (%w); start one with modelcalls proxy --upstream URL --capture-dir DIR, or give run --upstream URL --capture-dir DIR for a gateway of its own", u.Redacted(), err))
	}
	return c.Close()
}

// hostPort is the host:port of an http:// or https:// URL, its scheme's default port when it has
// none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// forwardedSignals are passed on to the child.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// runChild runs args with env and the streams of s, forwards signals, and returns the exit status
// the wrapper should exit with: the child's code, or 128+N when signal N ended it. err is set when
// the child could not be started (it then carries exit code 126 or 127).
func runChild(ctx context.Context, s *Streams, args []string, env []string) (int, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.In, s.Out, s.ErrOut
	if cmd.Stdin == nil {
		cmd.Stdin = os.Stdin
	}

	// On a terminal where we are the foreground job, the child becomes the foreground job in a process
	// group of its own, as a shell does it: the terminal's Ctrl-C (SIGINT), Ctrl-\ and hangup reach it
	// once, from the kernel, and not through us too (a harness that treats a second Ctrl-C as "quit at
	// once" would otherwise see two). Signals sent to our pid are forwarded.
	tty, foreground := foregroundTTY(cmd.Stdin)
	if foreground {
		cmd.SysProcAttr = foregroundAttr(tty)
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	if err := cmd.Start(); err != nil {
		code := exitCannotExecute
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = exitNotFoundCmd
		}
		return code, withExit(code, fmt.Errorf("run: start %s: %w", args[0], err))
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				// The child may have exited between the signal and here; then there is no one to tell.
				_ = cmd.Process.Signal(sig)
			case <-done:
				return
			}
		}
	}()
	if ctx != nil {
		stop := context.AfterFunc(ctx, func() { _ = stopChild(cmd.Process) })
		defer stop()
	}
	err := cmd.Wait()
	close(done)
	if foreground {
		reclaimTerminal(tty)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	default:
		return ExitFailure, withExit(ExitFailure, fmt.Errorf("run: wait for %s: %w", args[0], err))
	}
}
