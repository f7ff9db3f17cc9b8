//go:build unix

package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/modelcalls/modelcalls/internal/capturetest"
	"golang.org/x/sys/unix"
)

// onTerminal starts `modelcalls <args>` (the test binary, see TestMain) with stdin, stdout and
// stderr on a pseudo-terminal, and reads the terminal until want appears.
func onTerminal(t *testing.T, want string, args ...string) (*exec.Cmd, *os.File, *strings.Builder) {
	t.Helper()
	cmd := wrapper(args...)
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close(); cmd.Process.Kill() })
	// Read ptmx directly, not through a buffered reader: finish reads on from ptmx, and bytes a
	// buffer held past want would be lost to it.
	var seen strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(seen.String(), want) {
		n, err := ptmx.Read(buf)
		seen.Write(buf[:n])
		if err != nil {
			t.Fatalf("terminal never showed %q: %v; it showed %q", want, err, seen.String())
		}
	}
	return cmd, ptmx, &seen
}

// ctrlC types Ctrl-C on the terminal whose master is ptmx, with NOFLSH set first. The line
// discipline handles Ctrl-C by sending SIGINT to the foreground job and then, without NOFLSH,
// discarding the output not yet read. On a loaded machine the job can handle the signal, write why
// it stopped and exit before that discard; the test then sees none of it, nor the ^C echo (written
// once the job has gone and the read has ended). With NOFLSH the signal is the same and what the
// job writes stays readable.
func ctrlC(ptmx *os.File) error {
	conn, err := ptmx.SyscallConn()
	if err != nil {
		return err
	}
	var ioctlErr error
	err = conn.Control(func(fd uintptr) {
		var tio *unix.Termios
		if tio, ioctlErr = unix.IoctlGetTermios(int(fd), ioctlGetTermios); ioctlErr != nil {
			return
		}
		tio.Lflag |= unix.NOFLSH
		ioctlErr = unix.IoctlSetTermios(int(fd), ioctlSetTermios, tio)
	})
	if err == nil && ioctlErr != nil {
		err = fmt.Errorf("set NOFLSH on the terminal: %w", ioctlErr)
	}
	if err != nil {
		return err
	}
	_, err = ptmx.Write([]byte{0x03})
	return err
}

// finish waits for cmd (a timeout here is a failure: the command did not stop; it is killed) and
// returns its exit code and everything else the terminal showed.
func finish(t *testing.T, cmd *exec.Cmd, ptmx *os.File, seen *strings.Builder) (int, string) {
	t.Helper()
	type tail struct {
		out string
		err error
	}
	rest := make(chan tail, 1)
	go func() { b, err := io.ReadAll(ptmx); rest <- tail{string(b), err} }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The read ends with EIO once the last holder of the terminal's other end has exited and what it
	// wrote is read. Any other end (EOF, a closed descriptor) loses output the command may still
	// write, so it is reported with the output, not taken for the command's silence.
	checkEnd := func(r tail) string {
		if !errors.Is(r.err, syscall.EIO) && (runtime.GOOS == "linux" || r.err != nil) { // elsewhere: EOF
			t.Errorf("%v: reading the terminal ended with %v, not EIO; read so far %q", cmd.Args, r.err, seen.String()+r.out)
		}
		return seen.String() + r.out
	}
	select {
	case err := <-done:
		code := exitCode(t, err)
		// Closing ptmx before the read ends would drop the output the command left in the terminal.
		// Close it only if the read does not end by itself.
		select {
		case r := <-rest:
			return code, checkEnd(r)
		case <-time.After(10 * time.Second):
			ptmx.Close()
			return code, seen.String() + (<-rest).out
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%v still running after 30 s; terminal: %q", cmd.Args, seen.String())
	}
	return 0, ""
}

const stdinPrompt = "reading rollout records from stdin (Ctrl-D to end)"

func TestMergeOnTerminalStopsOnSignal(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(cmd *exec.Cmd, ptmx *os.File) error
		sig  string
	}{
		{"ctrl-c", func(_ *exec.Cmd, ptmx *os.File) error { return ctrlC(ptmx) }, "interrupt"},
		{"sigterm", func(cmd *exec.Cmd, _ *os.File) error { return cmd.Process.Signal(syscall.SIGTERM) }, "terminated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "merged.jsonl")
			capturetest.WriteFile(t, out, []byte("earlier result\n"), 0o644)
			cmd, ptmx, seen := onTerminal(t, "modelcalls merge: "+stdinPrompt, "merge", "--capture-dir", dir, "--out", out)
			if err := tc.send(cmd, ptmx); err != nil {
				t.Fatal(err)
			}
			code, shown := finish(t, cmd, ptmx, seen)
			if want := "interrupted by signal " + tc.sig + ": --out " + out + " was not replaced"; code != ExitFailure || !strings.Contains(shown, want) {
				t.Errorf("exit %d, terminal %q; want exit 1 and %q", code, shown, want)
			}
			if b, _ := os.ReadFile(out); string(b) != "earlier result\n" {
				t.Errorf("--out was changed: %q", b)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".merged.jsonl.tmp-*")); len(left) > 0 {
				t.Errorf("temp files left: %v", left)
			}
		})
	}
}

func TestMergeOnTerminalReadsUntilCtrlD(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "merged.jsonl")
	cmd, ptmx, seen := onTerminal(t, stdinPrompt, "merge", "--capture-dir", dir, "--out", out, "--wait", "0")
	if _, err := ptmx.Write([]byte(`{"_ng_rollout_id":"r1"}` + "\n\x04")); err != nil {
		t.Fatal(err)
	}
	code, shown := finish(t, cmd, ptmx, seen)
	if code != ExitOK || !strings.Contains(shown, "merged 1 rollout, 0 calls") {
		t.Fatalf("exit %d, terminal %q", code, shown)
	}
	b, _ := os.ReadFile(out)
	if !strings.HasPrefix(string(b), `{"_ng_rollout_id":"r1","ng_model_call_capture":`) {
		t.Errorf("--out holds %q", b)
	}
}

func TestClearOnTerminalStopsOnCtrlC(t *testing.T) {
	dir := t.TempDir()
	cmd, ptmx, seen := onTerminal(t, "modelcalls clear: "+stdinPrompt, "clear", "--capture-dir", dir)
	if err := ctrlC(ptmx); err != nil {
		t.Fatal(err)
	}
	code, shown := finish(t, cmd, ptmx, seen)
	if want := "interrupted by signal interrupt: stopped after line 0, before clearing anything"; code != ExitFailure || !strings.Contains(shown, want) {
		t.Errorf("exit %d, terminal %q; want exit 1 and %q", code, shown, want)
	}
}

func TestNoStdinPromptOffTerminal(t *testing.T) {
	_, errOut, code := runCLI(t, "", "clear", "--capture-dir", t.TempDir())
	if code != ExitOK || strings.Contains(errOut, stdinPrompt) {
		t.Errorf("exit %d, stderr %q: the prompt is for terminals only", code, errOut)
	}
}

// TestRunForegroundOnTerminal runs the wrapper on a pseudo-terminal: the child is the terminal's
// foreground job in its own process group, so Ctrl-C reaches the child (once, from the kernel), and
// the wrapper exits with its status.
func TestRunForegroundOnTerminal(t *testing.T) {
	cmd, ptmx, seen := onTerminal(t, "ready\r\n", append([]string{"run", "--rollout", "r1", "--gateway", listeningGateway(t)}, child("foreground")...)...)
	if lines := strings.Split(seen.String(), "\r\n"); !slices.Contains(lines, "foreground=true own-group=true") {
		t.Fatalf("child is not the foreground job in its own group: %q", lines)
	}
	if err := ctrlC(ptmx); err != nil {
		t.Fatal(err)
	}
	code, shown := finish(t, cmd, ptmx, seen)
	if !strings.Contains(shown, "got interrupt") {
		t.Errorf("child did not get SIGINT: %q", shown)
	}
	if want := 40 + int(syscall.SIGINT); code != want {
		t.Errorf("exit %d, want %d", code, want)
	}
}
