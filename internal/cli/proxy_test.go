package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"github.com/modelcalls/modelcalls/rollout"
)

func TestProxyUsageErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gym.yaml")
	capturetest.WriteFile(t, cfg, []byte("observability_enabled: true\nmodel_call_capture_dir: /abs/caps\n"), 0o600)
	checkExits(t, []exitCase{
		{"no upstream", []string{"proxy", "--capture-dir", dir}, ExitUsage, "--upstream is required"},
		{"upstream not http", []string{"proxy", "--upstream", "ftp://h/x", "--capture-dir", dir}, ExitUsage, "--upstream"},
		{"upstream relative", []string{"proxy", "--upstream", "localhost:8000", "--capture-dir", dir}, ExitUsage, "absolute http"},
		{"upstream without scheme", []string{"proxy", "--upstream", "localhost:8000", "--capture-dir", dir}, ExitUsage, "; did you mean http://localhost:8000?"},
		{"upstream IP without scheme", []string{"proxy", "--upstream", "127.0.0.1:8000/", "--capture-dir", dir}, ExitUsage, "; did you mean http://127.0.0.1:8000?"},
		{"run's gateway without scheme", []string{"run", "--rollout", "r1", "--gateway", "[::1]:8080", "--", "true"}, ExitUsage, "; did you mean http://[::1]:8080?"},
		{"upstream without host", []string{"proxy", "--upstream", "http://", "--capture-dir", dir}, ExitUsage, `--upstream "http://": must be`},
		{"upstream without host, password hidden", []string{"proxy", "--upstream", "http://u:secret@", "--capture-dir", dir}, ExitUsage, `--upstream "http://u:xxxxx@": must be`},
		{"no capture dir", []string{"proxy", "--upstream", "http://h"}, ExitUsage, "no capture dir"},
		{"enabled without dir", []string{"proxy", "--upstream", "http://h", "++observability_enabled=true"}, ExitUsage, "model_call_capture_dir is required"},
		{"relative config dir", []string{"proxy", "--upstream", "http://h", "++observability_enabled=true", "++model_call_capture_dir=rel"}, ExitUsage, "absolute"},
		{"flag not a bool", []string{"proxy", "--upstream", "http://h", "++observability_enabled=sometimes"}, ExitUsage, "observability_enabled"},
		{"stray argument", []string{"proxy", "--upstream", "http://h", "--capture-dir", dir, "extra"}, ExitUsage, "unexpected argument \"extra\""},
		{"missing config", []string{"proxy", "--upstream", "http://h", "--config", filepath.Join(dir, "nope.yaml")}, ExitNotFound, "--config " + filepath.Join(dir, "nope.yaml") + " does not exist"},
		{"config is a dir", []string{"proxy", "--upstream", "http://h", "--config", dir}, ExitNotFound, "--config " + dir + " is a directory, not a file"},
		{"dirs disagree", []string{"proxy", "--upstream", "http://h", "--config", cfg, "--capture-dir", dir}, ExitUsage, "disagree"},
		{"bad log level", []string{"proxy", "--upstream", "http://h", "--capture-dir", dir, "--log-level", "loud"}, ExitUsage, "--log-level"},
		{"bad override", []string{"proxy", "--upstream", "http://h", "--capture-dir", dir, "+a"}, ExitUsage, "want key=value"},
		{"bad log format", []string{"proxy", "--upstream", "http://h", "--capture-dir", dir, "--log-format", "xml"}, ExitUsage, "--log-format"},
		{"bad max connections", []string{"proxy", "--upstream", "http://h", "--capture-dir", dir, "--max-connections", "-2"}, ExitUsage, "--max-connections"},
	})
}

// runProxyCmd starts `modelcalls args...` and returns the address it listens on, a channel with
// its exit code, and its stderr so far.
func runProxyCmd(t *testing.T, ctx context.Context, args []string) (addr string, exit <-chan error, stderr *capturetest.Buffer) {
	t.Helper()
	pr, pw := io.Pipe()
	stderr = &capturetest.Buffer{}
	root := NewRootCommand(&Streams{In: strings.NewReader(""), Out: io.Discard, ErrOut: pw})
	root.SetArgs(args)
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(ctx)
		pw.Close()
		done <- err
	}()
	addrc := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`addr=(\S+)|"addr":"([^"]+)"`) // --log-format text or json
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			stderr.Write(append(sc.Bytes(), '\n'))
			if m := re.FindStringSubmatch(sc.Text()); m != nil && strings.Contains(sc.Text(), "listening") {
				addrc <- m[1] + m[2]
			}
		}
	}()
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("proxy exited before listening: %v\n%s", err, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("no listening line")
	}
	return addr, done, stderr
}

// TestProxyServesAndDrains runs the command Gym-style (capture dir from ++ overrides) on port 0,
// makes a streaming call, and stops the command mid-call: the call still completes, its line is
// written, and the command returns cleanly.
func TestProxyServesAndDrains(t *testing.T) {
	chunks := make(chan string)
	up := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		http.NewResponseController(w).Flush()
		for c := range chunks {
			io.WriteString(w, c)
			http.NewResponseController(w).Flush()
		}
	})
	endStream := sync.OnceFunc(func() { close(chunks) })
	defer endStream() // before up.Close, which waits for the handler, when the test fails early
	dir := filepath.Join(t.TempDir(), "caps")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	addr, exit, stderr := runProxyCmd(t, ctx, []string{"proxy", "--upstream", up.URL, "--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0", "--name", "policy_model", "++observability_enabled=true", "++model_call_capture_dir=" + dir})
	if strings.HasSuffix(addr, ":0") {
		t.Fatalf("listening line shows %s, not the real port", addr)
	}
	m := regexp.MustCompile(`admin_url=(\S+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no admin_url:\n%s", stderr.String())
	}
	readyz := m[1] + "/readyz"
	if code, _ := capturetest.Get(t, readyz); code != 200 {
		t.Fatalf("readyz before the drain: %d", code)
	}

	resp, err := http.Post("http://"+addr+"/ng-rollout/cli-1/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"
	chunks <- first
	if got, _ := br.ReadString('\n'); got != first[:len(first)-1] {
		t.Fatalf("first line %q", got)
	}
	br.ReadString('\n')

	stop() // like SIGINT: the command starts draining with this call in flight
	// A load balancer polling /readyz sees 503 for the whole drain, while the call goes on.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if code, _ := capturetest.Get(t, readyz); code == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("readyz still not 503 5 s into the drain")
		}
	}
	select {
	case err := <-exit:
		t.Fatalf("proxy exited with a call in flight: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if code, _ := capturetest.Get(t, readyz); code != http.StatusServiceUnavailable {
		t.Errorf("readyz during the drain: %d, want 503", code)
	}
	chunks <- "data: [DONE]\n\n"
	endStream()
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "data: [DONE]\n\n" {
		t.Fatalf("rest of the stream %q, %v", rest, err)
	}
	awaitExit(t, exit, 10*time.Second, "proxy did not exit after the drain")
	store, _ := capture.OpenExisting(dir)
	entries, err := store.Read("cli-1")
	if err != nil || len(entries) != 1 {
		t.Fatalf("%d lines, %v", len(entries), err)
	}
	var l struct {
		ErrorCategory *string                `json:"error_category"`
		ModelRef      rollout.ModelServerRef `json:"model_ref"`
	}
	json.Unmarshal(entries[0].Data, &l)
	if l.ErrorCategory != nil || l.ModelRef.Name != "policy_model" {
		t.Errorf("line: category %v model_ref %+v", *l.ErrorCategory, l.ModelRef)
	}
	if !strings.Contains(stderr.String(), "shutting down") {
		t.Errorf("no shutdown log line:\n%s", stderr.String())
	}
}

// TestProxySignal: SIGTERM stops an idle proxy cleanly.
func TestProxySignal(t *testing.T) {
	up := capturetest.NewServer(t, http.NotFoundHandler().ServeHTTP)
	_, exit, stderr := runProxyCmd(t, context.Background(), []string{"proxy", "--upstream", up.URL, "--listen", "127.0.0.1:0",
		"--capture-dir", t.TempDir(), "--admin-listen", "127.0.0.1:0"})
	admin := regexp.MustCompile(`admin_url=(\S+)`).FindStringSubmatch(stderr.String())
	if admin == nil {
		t.Fatalf("no admin_url in the listening line:\n%s", stderr.String())
	}
	if status, _ := capturetest.Get(t, admin[1]+"/healthz"); status != 200 {
		t.Fatalf("healthz: %d", status)
	}
	if self, err := os.FindProcess(os.Getpid()); err != nil {
		t.Fatal(err)
	} else if err := self.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	awaitExit(t, exit, 10*time.Second, "proxy did not stop on SIGTERM")
	if !strings.Contains(stderr.String(), "signal=terminated") {
		t.Errorf("stderr lacks the signal: %s", stderr.String())
	}
}

func TestPortInUseIsARuntimeError(t *testing.T) {
	ln := capturetest.Listen(t)
	_, errOut, code := runCLI(t, "", "proxy", "--upstream", "http://127.0.0.1:9", "--capture-dir", t.TempDir(), "--listen", ln.Addr().String())
	if code != ExitFailure || !strings.Contains(errOut, "address already in use") {
		t.Errorf("exit %d, stderr %q; want 1 (a runtime error, not usage) and the cause", code, errOut)
	}
}

// TestProxyStoppedIsTheLastLine: with live OTLP export, the proxy flushes its spans after the drain
// and before it logs "stopped", so a supervisor that waits for that line has seen everything; the
// drain's timeout is logged as a duration in both log formats (JSON: "2m0s", not nanoseconds).
func TestProxyStoppedIsTheLastLine(t *testing.T) {
	receiver := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	})
	up := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[]}`)
	})
	ctx, stop := context.WithCancel(context.Background())
	addr, exit, stderr := runProxyCmd(t, ctx, []string{"proxy", "--upstream", up.URL, "--capture-dir", t.TempDir(),
		"--listen", "127.0.0.1:0", "--log-format", "json", "--otlp-endpoint", receiver.URL})
	if status, body := capturetest.Post(t, "http://"+addr+"/ng-rollout/r1/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[]}`)); status != http.StatusOK {
		t.Fatalf("call: %d %s", status, body)
	}
	stopProxy(t, stop, exit)
	// The log reader runs behind the command: wait for the line before reading the whole log.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), `"msg":"stopped"`) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, `"msg":"stopped"`) {
		t.Errorf("last line %s, want the stopped line:\n%s", last, stderr.String())
	}
	if log := stderr.String(); !strings.Contains(log, `"msg":"otlp export stopped"`) || !strings.Contains(log, `"timeout":"2m0s"`) {
		t.Errorf("want the OTLP flush line and a 2m0s timeout in:\n%s", log)
	}
}
