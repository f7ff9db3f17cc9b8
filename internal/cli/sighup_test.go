package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// A hangup (the terminal closed, an ssh session dropped) drains a serving command as SIGTERM does:
// the proxy finishes a stream in flight and writes its line, also when the hangup took the reader of
// its log away; replay and view stop cleanly (exit 0) instead of dying of the signal.

const hupStream = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"
const hupStreamEnd = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
	"data: [DONE]\n\n"

// startServing starts `modelcalls <args>` (the test binary) with stderr on a pipe, and returns the
// command, the stderr reader and the first stderr line matching re's first group.
func startServing(t *testing.T, re *regexp.Regexp, args ...string) (*exec.Cmd, *os.File, []string) {
	t.Helper()
	cmd := wrapper(args...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { cmd.Process.Kill(); r.Close() })
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			return cmd, r, m
		}
	}
	t.Fatalf("%s: no line matching %s before its stderr ended", args[0], re)
	return nil, nil, nil
}

// awaitReadyz polls the admin /readyz until it answers 503 (the drain began): a bounded loop, each
// step a real request, all within one 10 s deadline (a slow answer on a loaded machine is no
// failure unless the deadline passes).
func awaitReadyz(t *testing.T, admin string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/readyz", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil && ctx.Err() != nil {
			break
		}
		if err != nil {
			t.Fatalf("admin endpoint gone after SIGHUP (the proxy died?): %v", err)
		}
		res.Body.Close()
		if res.StatusCode == http.StatusServiceUnavailable {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the proxy did not begin its drain within 10s of SIGHUP")
}

func TestProxyDrainsOnSIGHUP(t *testing.T) {
	for _, logGone := range []bool{false, true} {
		name := "log kept"
		if logGone {
			name = "log reader gone"
		}
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			up := capturetest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, hupStream)
				w.(http.Flusher).Flush()
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
				io.WriteString(w, hupStreamEnd)
			})
			dir := t.TempDir()
			cmd, stderr, m := startServing(t, regexp.MustCompile(`msg="modelcalls proxy listening".* url=(\S+).* admin_url=(\S+)`),
				"proxy", "--upstream", up.URL, "--capture-dir", dir, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
			proxyURL, admin := m[1], m[2]
			var logTail *capturetest.Buffer
			logCopied := make(chan struct{})
			if logGone {
				stderr.Close() // the next log write meets a broken pipe
				close(logCopied)
			} else {
				// The copy ends when the proxy has exited (it holds the pipe's only write end): the
				// log is read whole before it is checked.
				logTail = &capturetest.Buffer{}
				go func() { io.Copy(logTail, stderr); close(logCopied) }()
			}

			res, err := http.Post(proxyURL+"/ng-rollout/hup-1/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			br := bufio.NewReader(res.Body)
			first, err := br.ReadString('\n')
			if err != nil || first+"\n" != hupStream[:len(first)+1] {
				t.Fatalf("first line %q (%v)", first, err)
			}
			if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			awaitReadyz(t, admin)
			close(release)
			rest, err := io.ReadAll(br)
			if got := first + string(rest); err != nil || got != hupStream+hupStreamEnd {
				t.Fatalf("stream after SIGHUP: %q (%v), want it whole", got, err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("proxy exit after SIGHUP: %v, want 0", err)
			}
			<-logCopied
			store, err := capture.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			l := capturetest.One(t, store, "hup-1")
			if l.StatusCode == nil || *l.StatusCode != 200 || l.ErrorCategory != nil {
				t.Errorf("line: status %v category %v; want 200, no error", l.StatusCode, l.Category())
			}
			if _, err := os.Stat(filepath.Join(dir, "hup-1.capture.incomplete")); err == nil {
				t.Error("incomplete marker written")
			}
			if logTail != nil && !strings.Contains(logTail.String(), "signal=hangup") {
				t.Errorf("log does not name the hangup:\n%s", logTail.String())
			}
		})
	}
}

func TestReplayAndViewStopOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		re   string
		args []string
	}{
		{"replay", `msg="modelcalls replay listening"`, []string{"replay", "--capture-dir", dir, "--listen", "127.0.0.1:0"}},
		{"view", `^()`, []string{"view", "--capture-dir", dir, "--listen", "127.0.0.1:0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := wrapper(tc.args...)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stderr := &capturetest.Buffer{}
			cmd.Stderr = stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill() })
			out := bufio.NewReader(stdout)
			if tc.name == "view" {
				if line, err := out.ReadString('\n'); err != nil || !strings.Contains(line, "modelcalls view: serving") {
					t.Fatalf("view: first line %q (%v)", line, err)
				}
			} else {
				awaitLog(t, stderr, tc.re)
			}
			if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(out)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%s exit after SIGHUP: %v, want 0\n%s", tc.name, err, stderr.String())
			}
			if tc.name == "replay" && !strings.Contains(string(rest), "replay: ") {
				t.Errorf("replay printed no summary: %q", rest)
			}
		})
	}
}

// awaitLog waits until buf holds a line matching re (the command's log is copied into it as it is
// written).
func awaitLog(t *testing.T, buf *capturetest.Buffer, re string) {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(10 * time.Second)
	for !rx.MatchString(buf.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line matching %s within 10s:\n%s", re, buf.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
