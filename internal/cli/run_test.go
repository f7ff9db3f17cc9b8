package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	modelcalls "github.com/modelcalls/modelcalls"
	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// The test binary plays two more parts, so `run` is tested with real processes and real signals:
//   - with MODELCALLS_TEST_ROLE=cli it is the modelcalls command (Main on its arguments);
//   - with first argument childArg it is the wrapped child (testChild).
const (
	roleEnv  = "MODELCALLS_TEST_ROLE"
	childArg = "__child__"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childArg {
		os.Exit(testChild(os.Args[2:]))
	}
	if os.Getenv(roleEnv) == "cli" {
		os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// testChild is the wrapped command. Modes:
//   - env CODE: print the base-URL variables, exit CODE;
//   - wait-signal: print "ready", wait for SIGINT/SIGTERM/SIGHUP, print "got <signal>", exit 40+N;
//   - sleep: print "ready", block until a signal's default action ends the process;
//   - foreground: print whether our process group is the terminal's foreground group, then wait-signal;
//   - calls: one Chat Completions call to $OPENAI_BASE_URL, then a streamed one whose first chunk
//     is read before the process exits with 7 mid-stream.
func testChild(args []string) int {
	mode := args[0]
	switch mode {
	case "env":
		for _, k := range []string{"OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL", envRolloutID, "KEEP_ME"} {
			fmt.Printf("%s=%s\n", k, os.Getenv(k))
		}
		var code int
		fmt.Sscan(args[1], &code)
		return code
	case "wait-signal", "foreground":
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, forwardedSignals...)
		if mode == "foreground" {
			fg, own := childJobState()
			fmt.Printf("foreground=%v own-group=%v\n", fg, own)
		}
		fmt.Println("ready")
		sig := <-sigs
		fmt.Printf("got %v\n", sig)
		return 40 + int(sig.(syscall.Signal))
	case "sleep":
		fmt.Println("ready")
		for {
			// Blocks until a signal's default action ends the process (a timer, not select{}, so the
			// runtime never takes the wait for a deadlock).
			time.Sleep(time.Hour)
		}
	case "calls":
		base := os.Getenv("OPENAI_BASE_URL")
		res, err := http.Post(base+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		res, err = http.Post(base+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		line, _ := bufio.NewReader(res.Body).ReadString('\n')
		fmt.Printf("first chunk %q\n", line)
		os.Exit(7) // mid-stream: the gateway sees the client go away
	}
	return 99
}

// wrapper returns the command `modelcalls <args>` played by the test binary.
//
// Under -race a process sleeps 1 s on exit (GORACE option atexit_sleep_ms) so that goroutines still
// running may yet report a race. The tests wait for each command to exit, and that second per
// process was three quarters of this package's test time, so the wrapper and the children it runs
// skip it (an atexit_sleep_ms already in GORACE wins). Races met while a command runs are reported
// as before.
func wrapper(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), roleEnv+"=cli", "KEEP_ME=kept", "OPENAI_BASE_URL=http://overridden.invalid",
		"GORACE="+strings.TrimSpace("atexit_sleep_ms=0 "+os.Getenv("GORACE")))
	return cmd
}

func child(mode string, args ...string) []string {
	return append([]string{"--", os.Args[0], childArg, mode}, args...)
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if err == nil {
		return 0
	}
	if !errors.As(err, &ee) {
		t.Fatalf("wait: %v", err)
	}
	return ee.ExitCode()
}

func TestRunSetsEnvForChildAndExitsWithItsStatus(t *testing.T) {
	gw := listeningGateway(t)
	for _, code := range []int{0, 3} {
		cmd := wrapper(append([]string{"run", "--rollout", "r-1", "--gateway", gw + "/"}, child("env", fmt.Sprint(code))...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		got := exitCode(t, cmd.Run())
		if got != code {
			t.Errorf("exit %d, want the child's %d (stderr %s)", got, code, errOut.String())
		}
		want := "OPENAI_BASE_URL=" + gw + "/ng-rollout/r-1/v1\n" +
			"OPENAI_API_BASE=" + gw + "/ng-rollout/r-1/v1\n" +
			"ANTHROPIC_BASE_URL=" + gw + "/ng-rollout/r-1\n" +
			"GOOGLE_GEMINI_BASE_URL=" + gw + "/ng-rollout/r-1\n" +
			"MODELCALLS_ROLLOUT_ID=r-1\n" +
			"KEEP_ME=kept\n"
		if out.String() != want {
			t.Errorf("child saw\n%s\nwant\n%s", out.String(), want)
		}
	}
}

// listeningGateway returns the base URL (http://127.0.0.1:PORT) of a listener that accepts
// connections and closes them: what run's check of --gateway needs, for tests whose child makes no
// model call.
func listeningGateway(t *testing.T) string {
	t.Helper()
	ln := capturetest.Listen(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return "http://" + ln.Addr().String()
}

// A --gateway nothing listens at is said before the child starts (exit 1, the child never runs),
// rather than as every model call of the child failing.
func TestRunGatewayNotListening(t *testing.T) {
	gw := "http://" + capturetest.ClosedAddr(t) // connections to it are refused
	marker := filepath.Join(t.TempDir(), "child-ran")
	_, errOut, code := runCLI(t, "", "run", "--rollout", "r1", "--gateway", gw, "--", "sh", "-c", "touch "+marker)
	if code != ExitFailure {
		t.Errorf("exit %d, want %d (stderr %q)", code, ExitFailure, errOut)
	}
	if want := "modelcalls: run: no gateway is listening at --gateway " + gw + " ("; !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, "connection refused") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("stderr %q, want one line starting %q naming the refused connection", errOut, want)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the child ran although no gateway was listening")
	}
}

// startWrapper starts cmd and returns a reader of its stdout positioned after the child's "ready".
func startWrapper(t *testing.T, cmd *exec.Cmd) *bufio.Reader {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("child never got ready: %v", err)
		}
		if line == "ready\n" {
			return r
		}
	}
}

func TestRunForwardsSignals(t *testing.T) {
	gw := listeningGateway(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := wrapper(append([]string{"run", "--rollout", "r1", "--gateway", gw}, child("wait-signal")...)...)
			r := startWrapper(t, cmd)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(r)
			if want := fmt.Sprintf("got %v\n", sig); string(rest) != want {
				t.Errorf("child printed %q, want %q", rest, want)
			}
			if got, want := exitCode(t, cmd.Wait()), 40+int(sig); got != want {
				t.Errorf("exit %d, want the child's %d", got, want)
			}
		})
	}
}

func TestRunExits128PlusSignal(t *testing.T) {
	// The child has no handler: the forwarded SIGHUP / SIGTERM ends it, and the wrapper says so as
	// a shell does.
	gw := listeningGateway(t)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM} {
		cmd := wrapper(append([]string{"run", "--rollout", "r1", "--gateway", gw}, child("sleep")...)...)
		startWrapper(t, cmd)
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if got, want := exitCode(t, cmd.Wait()), 128+int(sig); got != want {
			t.Errorf("%v: exit %d, want %d", sig, got, want)
		}
	}
}

func TestRunStartErrors(t *testing.T) {
	gw := listeningGateway(t)
	checkExits(t, []exitCase{
		{"not found", []string{"run", "--rollout", "r1", "--gateway", gw, "--", "no-such-command-xyz"}, exitNotFoundCmd, "executable file not found"},
		{"not executable", []string{"run", "--rollout", "r1", "--gateway", gw, "--", "./testdata"}, exitCannotExecute, "start ./testdata"},
		{"no command", []string{"run", "--rollout", "r1", "--gateway", gw}, ExitUsage, "run: missing CMD"},
		{"no rollout", []string{"run", "--gateway", gw, "--", "true"}, ExitUsage, "run: missing --rollout ID"},
		{"bad rollout", []string{"run", "--rollout", "../x", "--gateway", gw, "--", "true"}, ExitUsage, "--rollout"},
		{"no gateway", []string{"run", "--rollout", "r1", "--", "true"}, ExitUsage, "missing --gateway URL, or --upstream URL with --capture-dir DIR"},
		{"both", []string{"run", "--rollout", "r1", "--gateway", "http://x", "--upstream", "http://y", "--capture-dir", "d", "--", "true"}, ExitUsage, "not both"},
		{"upstream without dir", []string{"run", "--rollout", "r1", "--upstream", "http://y", "--", "true"}, ExitUsage, "--upstream needs --capture-dir"},
		{"bad gateway", []string{"run", "--rollout", "r1", "--gateway", "127.0.0.1:8080", "--", "true"}, ExitUsage, "--gateway: must be an absolute"},
		{"dir with gateway", []string{"run", "--rollout", "r1", "--gateway", "http://x", "--capture-dir", "d", "--", "true"}, ExitUsage, "--capture-dir goes with --upstream"},
		{"name with gateway", []string{"run", "--rollout", "r1", "--gateway", gw, "--name", "m", "--", "true"}, ExitUsage, "run: --name goes with --upstream"},
		{"own gateway flags with gateway", []string{"run", "--rollout", "r1", "--gateway", gw, "--log-level", "nonsense", "--shutdown-timeout", "1s", "--", "true"}, ExitUsage, "run: --shutdown-timeout and --log-level go with --upstream"},
		{"bad upstream", []string{"run", "--rollout", "r1", "--upstream", "ftp://x", "--capture-dir", "d", "--", "true"}, ExitUsage, "--upstream"},
	})
}

// TestRunWiresConfigHarnesses: Codex, opencode and pi, set up for the model server in their own
// config files, are pointed at the gateway by their own override mechanisms (command-line
// overrides, the inline config variable, a temporary agent dir), and the user's files are left as
// they were.
func TestRunWiresConfigHarnesses(t *testing.T) {
	gw := listeningGateway(t)
	home, bin := t.TempDir(), t.TempDir()
	for _, k := range []string{"CODEX_HOME", "XDG_CONFIG_HOME", "PI_CODING_AGENT_DIR", "OPENCODE_CONFIG", "OPENCODE_CONFIG_CONTENT"} {
		t.Setenv(k, "")
	}
	t.Setenv("HOME", home)
	files := map[string]string{
		".codex/config.toml": "model = \"m\"\nmodel_provider = \"llama\"\n\n[model_providers.llama]\nname = \"llama\"\nbase_url = \"http://127.0.0.1:8000/v1\"\nwire_api = \"responses\"\n",
		".config/opencode/opencode.jsonc": `{
  // the user's own provider
  "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": "http://127.0.0.1:8000/v1"}, "models": {"m": {}},},},
}`,
		".pi/agent/models.json": `{"providers": {"local": {"baseUrl": "http://127.0.0.1:8000/v1", "api": "openai-completions", "models": [{"id": "m"}]},
 "ant": {"baseUrl": "http://127.0.0.1:8000", "api": "anthropic-messages", "models": [{"id": "c"}]}}}`,
		".pi/agent/settings.json": `{"defaultModel": "m"}`,
	}
	os.MkdirAll(filepath.Join(home, ".pi", "agent"), 0o755)
	capturetest.WriteFile(t, filepath.Join(home, ".pi", "agent", "keybindings.json"), []byte("old\n"), 0o644)
	for name, content := range files {
		p := filepath.Join(home, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		capturetest.WriteFile(t, p, []byte(content), 0o644)
	}
	scripts := map[string]string{
		"codex":    `printf '%s\n' "$@"`,
		"opencode": `printf '%s\n' "$OPENCODE_CONFIG_CONTENT"`,
		"pi": `cat "$PI_CODING_AGENT_DIR/models.json"; echo; readlink "$PI_CODING_AGENT_DIR/settings.json";` +
			` mkdir -p "$PI_CODING_AGENT_DIR/sessions/p" && echo s > "$PI_CODING_AGENT_DIR/sessions/p/s.jsonl";` +
			// What pi creates on a first run (a login, a downloaded tool), a file it rewrites by a
			// rename, and a change to run's own models.json.
			` echo '{"openai":{}}' > "$PI_CODING_AGENT_DIR/auth.json"; mkdir "$PI_CODING_AGENT_DIR/bin" && echo fd > "$PI_CODING_AGENT_DIR/bin/fd" && chmod 755 "$PI_CODING_AGENT_DIR/bin/fd";` +
			` echo new > "$PI_CODING_AGENT_DIR/k.tmp" && mv "$PI_CODING_AGENT_DIR/k.tmp" "$PI_CODING_AGENT_DIR/keybindings.json"; echo x >> "$PI_CODING_AGENT_DIR/models.json";` +
			` echo "$PI_CODING_AGENT_DIR"`,
	}
	base := gw + "/ng-rollout/r1"
	want := map[string][]string{
		"codex": {"-c\nmodel_providers.llama.base_url=\"" + base + "/v1\"\nexec\nhi\n"},
		"opencode": {`"local":{"options":{"baseURL":"` + base + `/v1"}}`, `"openai":{"options":{"baseURL":"` + base + `/v1"}}`,
			`"anthropic":{"options":{"baseURL":"` + base + `/v1"}}`},
		"pi": {`"baseUrl": "` + base + `/v1"`, `"baseUrl": "` + base + `"`, `"api": "anthropic-messages"`, `"openai": {`,
			filepath.Join(home, ".pi", "agent", "settings.json")},
	}
	for name, script := range scripts {
		path := filepath.Join(bin, name)
		capturetest.WriteFile(t, path, []byte("#!/bin/sh\n"+script+"\n"), 0o755)
		out, errOut, code := runCLI(t, "", "run", "--rollout", "r1", "--gateway", gw, "--", path, "exec", "hi")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errOut)
		}
		for _, w := range want[name] {
			if !strings.Contains(out, w) {
				t.Errorf("%s: the child saw\n%s\nwant it to contain %s", name, out, w)
			}
		}
		if name == "pi" {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if _, err := os.Stat(lines[len(lines)-1]); !os.IsNotExist(err) {
				t.Errorf("pi: the temporary agent dir %s is still there after run: %v", lines[len(lines)-1], err)
			}
		}
	}
	// The session pi wrote under run is in the user's sessions dir, which run created.
	if b, err := os.ReadFile(filepath.Join(home, ".pi", "agent", "sessions", "p", "s.jsonl")); string(b) != "s\n" {
		t.Errorf("pi's session written under run is not in the user's sessions dir: %q %v", b, err)
	}
	for name, content := range files {
		if b, _ := os.ReadFile(filepath.Join(home, name)); string(b) != content {
			t.Errorf("the user's %s changed:\n%s", name, b)
		}
	}
	// What pi created or rewrote in its agent dir under run is in the user's, as without run.
	agent := filepath.Join(home, ".pi", "agent")
	for name, want := range map[string]string{"auth.json": "{\"openai\":{}}\n", "bin/fd": "fd\n", "keybindings.json": "new\n"} {
		if b, err := os.ReadFile(filepath.Join(agent, name)); string(b) != want {
			t.Errorf("pi's %s written under run: %q %v; want %q in the user's agent dir", name, b, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(agent, "bin", "fd")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("pi's bin/fd: %v %v, want mode 0755", fi, err)
	}
}

// TestRunGatewayURL: --gateway is the gateway's address; a path (one that already holds the rollout
// prefix too) is a usage error naming the address to give, before anything is dialled.
func TestRunGatewayURL(t *testing.T) {
	checkExits(t, []exitCase{
		{"path", []string{"run", "--rollout", "r9", "--gateway", "http://127.0.0.1:1/v1", "--", "true"}, ExitUsage,
			"--gateway http://127.0.0.1:1/v1: give the gateway's address without a path (http://127.0.0.1:1)"},
		{"prefix", []string{"run", "--rollout", "r9", "--gateway", "http://127.0.0.1:1/ng-rollout/r9", "--", "true"}, ExitUsage,
			"give the gateway's address only (http://127.0.0.1:1): run adds /ng-rollout/<ID> itself"},
		{"listen with gateway", []string{"run", "--rollout", "r9", "--gateway", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--", "true"}, ExitUsage,
			"--listen goes with --upstream"},
	})
}

// TestRunOwnGatewayCapturesAndDrains runs a child against `run --upstream`: its finished call and the
// call it abandoned mid-stream are both in the capture when the wrapper has exited.
func TestRunOwnGatewayCapturesAndDrains(t *testing.T) {
	upstream := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c2","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"he"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // held until the gateway gives up on it
	})
	dir := t.TempDir()
	cmd := wrapper(append([]string{"run", "--rollout", "own-1", "--upstream", upstream.URL, "--capture-dir", dir}, child("calls")...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if got := exitCode(t, cmd.Run()); got != 7 {
		t.Fatalf("exit %d, want the child's 7; stdout %s stderr %s", got, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), `first chunk "data: `) {
		t.Fatalf("child did not read the stream: %s", out.String())
	}
	store, err := capture.OpenExisting(dir)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := modelcalls.ReadRecords(store, "own-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2 (the finished call and the abandoned one)", len(recs))
	}
	if recs[0].ErrorCategory != nil || str(recs[0].FinishReason) != "stop" || i64p(recs[0].TokensTotal) != "6" {
		t.Errorf("first call: error %s finish %s total %s", str(recs[0].ErrorCategory), str(recs[0].FinishReason), i64p(recs[0].TokensTotal))
	}
	if str(recs[1].ErrorCategory) != "cancelled" {
		t.Errorf("abandoned call: error_category %s, want cancelled", str(recs[1].ErrorCategory))
	}
	claims, err := store.Claims("own-1")
	if err != nil || claims.Live+claims.Stale != 0 {
		t.Errorf("claims left after the wrapper exited: %+v %v", claims, err)
	}
}

// TestRunListen: --listen pins the address of the gateway run starts; the child's base URLs name it.
func TestRunListen(t *testing.T) {
	up := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {})
	ln := capturetest.Listen(t)
	addr := ln.Addr().String()
	ln.Close()
	cmd := wrapper(append([]string{"run", "--rollout", "r-2", "--upstream", up.URL, "--capture-dir", t.TempDir(), "--listen", addr}, child("env", "0")...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if code := exitCode(t, cmd.Run()); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if want := "OPENAI_BASE_URL=http://" + addr + "/ng-rollout/r-2/v1\n"; !strings.Contains(out.String(), want) {
		t.Errorf("child saw\n%s\nwant %s", out.String(), want)
	}
}
