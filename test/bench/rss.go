package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/modelcalls/modelcalls/capture"
	"github.com/modelcalls/modelcalls/dialect"
)

// The peak-memory row runs the proxy under test in a child process (this binary re-executed with
// -child), so that the parent's upstream, clients and other data do not count. The child reports its
// own /proc/self/status on memPath.
const memPath = "/__bench/mem"

// memStatus is a process's resident memory, from /proc/self/status, in KiB.
type memStatus struct {
	VmRSS int64 `json:"vm_rss_kib"` // resident now
	VmHWM int64 `json:"vm_hwm_kib"` // peak resident since start
	Heap  int64 `json:"heap_inuse_kib"`
}

func readMemStatus() (memStatus, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return memStatus{}, fmt.Errorf("read /proc/self/status: %w", err)
	}
	var m memStatus
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			m.VmRSS = n
		case "VmHWM":
			m.VmHWM = n
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.Heap = int64(ms.HeapInuse >> 10)
	return m, nil
}

// childMain serves the proxy named by mode ("gateway" or "bare") on a loopback port, prints
// "LISTEN <url>" on stdout, and exits when stdin closes.
func childMain(mode, upstreamURL, captureDir string) error {
	var (
		h    http.Handler
		stop = func() {}
		err  error
	)
	switch mode {
	case "gateway":
		h, stop, err = gatewayHandler(upstreamURL, captureDir, true)
	case "gateway-otel": // row 7 (otel.go)
		h, stop, err = otelChildHandler(upstreamURL, captureDir)
	case "bare":
		h, err = bareProxy(upstreamURL)
	default:
		err = fmt.Errorf("unknown child mode %q", mode)
	}
	if err != nil {
		return err
	}
	defer stop()
	mux := http.NewServeMux()
	mux.HandleFunc(memPath, func(w http.ResponseWriter, r *http.Request) {
		m, err := readMemStatus()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		json.NewEncoder(w).Encode(m)
	})
	mux.Handle("/", h)
	s, err := serve(mux)
	if err != nil {
		return fmt.Errorf("child %w", err)
	}
	fmt.Printf("LISTEN %s\n", s.url)
	io.Copy(io.Discard, os.Stdin)
	return s.shutdown(10 * time.Second)
}

// child is a running child process serving one proxy.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
}

// startChild starts this binary with -child mode; env entries ("GOMAXPROCS=8") are added to the
// child's environment.
func startChild(mode, upstreamURL, captureDir string, env ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	return startChildExe(exe, mode, upstreamURL, captureDir, env...)
}

// startChildExe is startChild running the bench binary exe, this one or another build of this
// package (a variant's, otelVariantsEnv): the child protocol is the same, so any build serves.
func startChildExe(exe, mode, upstreamURL, captureDir string, env ...string) (*child, error) {
	cmd := exec.Command(exe, "-child", mode, "-child-upstream", upstreamURL, "-child-capture-dir", captureDir)
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start child %s: %w", exe, err)
	}
	c := &child{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "LISTEN ") {
		c.stop()
		return nil, fmt.Errorf("child %s %s did not start (%q): %w", exe, mode, line, errors.Join(err, errUnexpected))
	}
	c.url = strings.TrimSpace(strings.TrimPrefix(line, "LISTEN "))
	return c, nil
}

func (c *child) mem() (memStatus, error) {
	var m memStatus
	resp, err := http.Get(c.url + memPath)
	if err != nil {
		return m, fmt.Errorf("child mem: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return m, fmt.Errorf("child mem: %w", err)
	}
	return m, nil
}

// stop closes the child's stdin (it shuts down) and waits; it kills the child (by pid) after 15 s.
func (c *child) stop() {
	c.stdin.Close()
	waitOrKill(c.cmd, 15*time.Second)
}

// rssResult is the peak-memory row for one proxy.
type rssResult struct {
	mode       string
	shape      string
	idle, peak memStatus
	bytes      int64
	elapsed    time.Duration
}

// growthKiB is the peak resident size while the stream passed minus the idle resident size.
func (r rssResult) growthKiB() int64 { return r.peak.VmHWM - r.idle.VmRSS }

// runRSS starts a child serving mode, warms it with small captured calls, reads its idle RSS,
// passes one stream of total bytes of the given shape through it, and reads its peak RSS.
func runRSS(ctx context.Context, mode, upstreamURL, captureDir string, fx *fixtures, total int64, shape string) (rssResult, error) {
	res := rssResult{mode: mode, shape: shape}
	c, err := startChild(mode, upstreamURL, captureDir)
	if err != nil {
		return res, err
	}
	defer c.stop()
	s := newSubject("child-"+mode, c.url, true)
	defer s.closeIdle()
	for range 3 {
		if _, err := s.call(ctx, "rss-warm", fx, make([]byte, 32<<10)); err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
		if _, _, err := s.bigStream(ctx, fx, "rss-warm", 64<<10, shape); err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if res.idle, err = c.mem(); err != nil {
		return res, err
	}
	if res.bytes, res.elapsed, err = s.bigStream(ctx, fx, "rss-big", total, shape); err != nil {
		return res, err
	}
	if res.peak, err = c.mem(); err != nil {
		return res, err
	}
	if mode == "gateway" {
		if err := checkBigLine(captureDir, "rss-big", res.bytes); err != nil {
			return res, err
		}
	}
	return res, nil
}

// checkBigLine checks the shape the gateway recorded for the big stream: one line, no error
// category, response_raw the whole body, and a response equal, byte for byte, to the in-memory
// reassembly of that body (the gateway's spooled and streamed reconstruction changes nothing).
func checkBigLine(captureDir, id string, n int64) error {
	store, err := capture.Open(captureDir)
	if err != nil {
		return err
	}
	entries, err := store.Read(id)
	if err != nil {
		return fmt.Errorf("big stream line: %w", err)
	}
	if len(entries) != 1 {
		return fmt.Errorf("big stream: %d capture lines, want 1: %w", len(entries), errUnexpected)
	}
	var line struct {
		ErrorCategory *string         `json:"error_category"`
		Response      json.RawMessage `json:"response"`
		ResponseRaw   string          `json:"response_raw"`
	}
	if err := json.Unmarshal(entries[0].Data, &line); err != nil {
		return fmt.Errorf("big stream line: %w", err)
	}
	if line.ErrorCategory != nil || int64(len(line.ResponseRaw)) != n {
		return fmt.Errorf("big stream line: error_category %v, response_raw %d bytes (client read %d): %w",
			*line.ErrorCategory, len(line.ResponseRaw), n, errUnexpected)
	}
	s := dialect.NewStream(dialect.Chat)
	s.Write([]byte(line.ResponseRaw))
	s.End()
	if want := s.Response(); string(want) != string(line.Response) {
		return fmt.Errorf("big stream line: recorded response (%d bytes) differs from the reassembly of its body (%d bytes): %w",
			len(line.Response), len(want), errUnexpected)
	}
	return nil
}
