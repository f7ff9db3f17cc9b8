//go:build unix

package reliability

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/modelcalls/modelcalls/internal/cli"
)

// The real `modelcalls proxy` command in a helper process, for the tests that need several gateway
// processes or a fault that is set per process (a file size limit).

// argSep separates the proxy's arguments in MR_ARGS.
const argSep = "\x1f"

// proxyRole runs `modelcalls proxy` with the arguments in MR_ARGS through the command line's own
// entry point (cli.Main), after lowering RLIMIT_FSIZE to MR_FSIZE bytes when set (writes past it
// fail with EFBIG, as on a full disk; Go ignores SIGXFSZ) and RLIMIT_NOFILE to MR_NOFILE
// descriptors when set. Once the proxy listens it prints "record <the listening log record>" and
// then "listening <url>" (followed by the admin URL with --admin-listen) on stdout, and "draining"
// when it starts to shut down; its log goes to stderr. SIGTERM drains and exits.
func proxyRole() int {
	if v := os.Getenv("MR_FSIZE"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		var lim unix.Rlimit
		if err == nil {
			err = unix.Getrlimit(unix.RLIMIT_FSIZE, &lim)
		}
		if err == nil {
			lim.Cur = n
			err = unix.Setrlimit(unix.RLIMIT_FSIZE, &lim)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "set RLIMIT_FSIZE:", err)
			return 1
		}
	}
	if v := os.Getenv("MR_NOFILE"); v != "" {
		// The file-descriptor limit, soft and hard (Go raised the soft one to the hard one at start).
		n, err := strconv.ParseUint(v, 10, 64)
		if err == nil {
			err = unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "set RLIMIT_NOFILE:", err)
			return 1
		}
	}
	args := append([]string{"proxy"}, strings.Split(os.Getenv("MR_ARGS"), argSep)...)
	return cli.Main(args, os.Stdin, os.Stdout, &listenWatcher{w: os.Stderr})
}

// listenWatcher passes the proxy's log through and announces its URL on stdout when the
// "modelcalls proxy listening" record goes by (slog writes one record per Write).
type listenWatcher struct {
	w    io.Writer
	once sync.Once
}

func (l *listenWatcher) Write(p []byte) (int, error) {
	// The record goes to stderr before its announcement on stdout. That alone does not let a test
	// read it from stderr once it saw the announcement: the test's copy of stderr is a pipe drained
	// by another goroutine, which may lag behind the stdout line (cap -1 under load). So the
	// announcement carries the record itself.
	n, err := l.w.Write(p)
	if bytes.Contains(p, []byte(`msg="shutting down: finishing in-flight calls"`)) {
		fmt.Println("draining")
	}
	if bytes.Contains(p, []byte(`msg="modelcalls proxy listening"`)) {
		var u, admin string
		for _, f := range strings.Fields(string(p)) {
			if v, ok := strings.CutPrefix(f, "url="); ok {
				u = v
			}
			if v, ok := strings.CutPrefix(f, "admin_url="); ok && v != `""` {
				admin = " " + v
			}
		}
		if u != "" {
			l.once.Do(func() { fmt.Printf("record %s\nlistening %s%s\n", bytes.TrimSpace(p), u, admin) })
		}
	}
	return n, err
}

// proxyProc is a running proxy helper.
type proxyProc struct {
	*helperProc
	url    string // http://127.0.0.1:port
	admin  string // the admin endpoints' base URL with --admin-listen, else ""
	record string // the "modelcalls proxy listening" log record (fields such as max_connections)
}

// startProxy starts `modelcalls proxy --upstream upstream --capture-dir dir --listen 127.0.0.1:0`
// plus extra arguments in a helper process with extra environment, and waits until it listens.
func startProxy(t testing.TB, upstream, dir string, extra []string, env ...string) *proxyProc {
	t.Helper()
	args := append([]string{"--upstream", upstream, "--capture-dir", dir, "--listen", "127.0.0.1:0", "--log-level", "debug"}, extra...)
	p := startHelper(t, "proxy", append([]string{"MR_ARGS=" + strings.Join(args, argSep)}, env...)...)
	record := strings.TrimPrefix(p.expect("record "), "record ")
	line := p.expect("listening ")
	u, admin, _ := strings.Cut(strings.TrimPrefix(line, "listening "), " ")
	return &proxyProc{helperProc: p, url: u, admin: admin, record: record}
}

// stop sends SIGTERM (graceful drain) and waits for a clean exit.
func (p *proxyProc) stop() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(); err != nil {
		p.t.Errorf("proxy exit: %v; log:\n%s", err, tail(p.stderr.String(), 3000))
	}
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
