//go:build unix

package reliability

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcalls/modelcalls/internal/capturetest"
	"go.uber.org/goleak"
)

// helperEnv names the role a re-executed test binary plays instead of running tests. The other
// MR_* variables carry the role's arguments.
const helperEnv = "MODELCALLS_RELIABILITY_HELPER"

// helperRoles are the roles a helper process can play; each returns the process exit code.
var helperRoles = map[string]func() int{
	"writer":  writerRole,  // crash_test.go: appends lines, optionally stalls mid-line
	"claimer": claimerRole, // pending_test.go: holds claims until killed
	"proxy":   proxyRole,   // proxy_test.go: the real `modelcalls proxy` command, optional RLIMIT_FSIZE
}

func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		run, ok := helperRoles[role]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown helper role %q\n", role)
			os.Exit(2)
		}
		os.Exit(run())
	}
	// Every test closes what it starts; a goroutine left behind is a leak in the code under test
	// (or in the test). Idle keep-alive connections of the default transport belong to clients the
	// tests close themselves.
	goleak.VerifyTestMain(m)
}

// waitFor bounds every wait on another process or goroutine: a hang becomes a failure naming what
// was awaited instead of a stuck test binary.
const waitFor = 90 * time.Second

// helperProc is a running helper process: its stdout lines arrive on lines (closed at EOF), its
// stderr is kept for failure messages.
type helperProc struct {
	t      testing.TB
	role   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *capturetest.Buffer
	done   chan struct{} // closed once the process was waited for
	err    error         // Wait's result, valid after done
}

// startHelper re-executes the test binary in role, with extra environment entries ("K=V").
func startHelper(t testing.TB, role string, env ...string) *helperProc {
	t.Helper()
	return startHelperCmd(t, role, nil, env...)
}

// startHelperCmd is startHelper with a hook to adjust the command (e.g. SysProcAttr) before start.
func startHelperCmd(t testing.TB, role string, adjust func(*exec.Cmd), env ...string) *helperProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+role), env...)
	p := &helperProc{t: t, role: role, cmd: cmd, lines: make(chan string, 1024), stderr: &capturetest.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if adjust != nil {
		adjust(cmd)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper %s: %v", role, err)
	}
	p.stdin = stdin
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		io.Copy(io.Discard, stdout)
		close(p.lines)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// next returns the helper's next stdout line; ok is false at EOF. It fails the test when nothing
// arrives within waitFor.
func (p *helperProc) next() (line string, ok bool) {
	p.t.Helper()
	select {
	case line, ok = <-p.lines:
		return line, ok
	case <-time.After(waitFor):
		p.t.Fatalf("helper %s: no output within %v; stderr:\n%s", p.role, waitFor, p.stderr.String())
		return "", false
	}
}

// expect reads lines until one starts with prefix and returns it; it fails at EOF.
func (p *helperProc) expect(prefix string) string {
	p.t.Helper()
	for {
		line, ok := p.next()
		if !ok {
			p.t.Fatalf("helper %s ended before %q (exit %v); stderr:\n%s", p.role, prefix, p.wait(), p.stderr.String())
		}
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
}

// kill sends SIGKILL and waits until the process is gone (its flocks are released then).
func (p *helperProc) kill() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait()
}

// wait drains stdout and waits for the process to exit, returning Wait's error.
func (p *helperProc) wait() error {
	p.t.Helper()
	go func() {
		for range p.lines {
		}
	}()
	select {
	case <-p.done:
		return p.err
	case <-time.After(waitFor):
		p.cmd.Process.Kill()
		<-p.done
		p.t.Fatalf("helper %s did not exit within %v; stderr:\n%s", p.role, waitFor, p.stderr.String())
		return nil
	}
}
