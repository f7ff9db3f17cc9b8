package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcalls/modelcalls/capture"
)

// upstreamTransport is the transport every in-process proxy uses towards the upstream: the default
// one with a keep-alive pool big enough for 64 concurrent rollouts (the default keeps 2 idle
// connections per host, which would make every proxy open and close connections under load).
func upstreamTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = 1024
	tr.IdleConnTimeout = 5 * time.Minute
	return tr
}

// server is an in-process HTTP server on a loopback port.
type server struct {
	srv *http.Server
	url string
}

func serve(h http.Handler) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &server{srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, url: "http://" + ln.Addr().String()}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *server) close() { s.shutdown(5 * time.Second) }

// shutdown stops the server, waiting up to timeout for requests in flight.
func (s *server) shutdown(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// proxies are in-process subjects in front of the upstream (the bare ReverseProxy, the gateway
// with capture off, the gateway with capture on), each served on its own loopback port.
type proxies struct {
	servers map[string]*server // by subject name: sBare, sGwOff, sGwOn
	gwOn    http.Handler       // the capturing gateway (nil unless sGwOn was asked for), for its capture-write metric
	stops   []func()           // drain the gateways
}

// startProxies builds and serves the named subjects (sBare, sGwOff, sGwOn; the capturing gateway
// writes to capDir) in front of upstreamURL. close stops them.
func startProxies(upstreamURL, capDir string, names ...string) (*proxies, error) {
	p := &proxies{servers: map[string]*server{}}
	for _, name := range names {
		var h http.Handler
		var err error
		switch name {
		case sBare:
			h, err = bareProxy(upstreamURL)
		case sBareSync:
			var d *durableProxy
			if d, err = newDurableProxy(upstreamURL, filepath.Join(capDir, "durable-floor")); err == nil {
				h = d
				p.stops = append(p.stops, d.close)
			}
		case sGwOff, sGwOn:
			var stop func()
			if h, stop, err = gatewayHandler(upstreamURL, capDir, name == sGwOn); err == nil {
				p.stops = append(p.stops, stop)
			}
		default:
			err = fmt.Errorf("no in-process subject %q", name)
		}
		if err == nil {
			p.servers[name], err = serve(h)
		}
		if err != nil {
			p.close()
			return nil, err
		}
		if name == sGwOn {
			p.gwOn = h
		}
	}
	return p, nil
}

// close stops the servers, then drains the gateways' capture writes.
func (p *proxies) close() {
	for _, s := range p.servers {
		s.close()
	}
	for i := len(p.stops) - 1; i >= 0; i-- {
		p.stops[i]()
	}
}

// bareProxy is the baseline proxy: httputil.ReverseProxy with nothing but a target (paths forwarded
// unchanged, SSE flushed as it arrives, which ReverseProxy does by itself for text/event-stream).
//
// It enables full duplex on each request. Without it, an HTTP/1 server closes the unread rest of
// the request body when the handler starts its response; an upstream that answers the instant the
// last request byte arrives (ours does) then races the transport's final read of the request body,
// the transport sees "invalid Read on closed Body", closes the upstream connection and the response
// body being relayed is cut ("ReverseProxy read error during body copy: use of closed network
// connection", golang/go#40747). This harness hit it on about one 100 MiB stream in ten.
func bareProxy(target string) (http.Handler, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("bare proxy target: %w", err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
		Transport: upstreamTransport(),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	}), nil
}

// mitm is a running mitmdump in reverse-proxy mode recording every flow to a file.
type mitm struct {
	cmd     *exec.Cmd
	url     string
	flows   string
	version string
	stderr  *bytes.Buffer
}

// findMitmdump returns the mitmdump path, installing the Debian package first when install is set
// (apt-get, as root). It returns "" without error when mitmdump is absent and install is not set.
func findMitmdump(install bool, logf func(string, ...any)) (string, error) {
	if p, err := exec.LookPath("mitmdump"); err == nil {
		return p, nil
	}
	if !install {
		return "", nil
	}
	logf("installing mitmproxy from Debian packages (apt-get install mitmproxy)")
	cmd := exec.Command("apt-get", "install", "-y", "--no-install-recommends", "mitmproxy")
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get install mitmproxy: %w\n%s", err, tail(out, 2000))
	}
	return exec.LookPath("mitmdump")
}

// startMitm starts mitmdump reverse-proxying to target and writing flows under dir. It returns when
// the proxy answers a call.
func startMitm(bin, target, dir string) (*mitm, error) {
	ver, _ := exec.Command(bin, "--version").Output()
	version := strings.TrimSpace(strings.SplitN(string(ver), "\n", 2)[0])
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("mitm port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	flows := filepath.Join(dir, "mitm.flows")
	m := &mitm{url: fmt.Sprintf("http://127.0.0.1:%d", port), flows: flows, version: version, stderr: &bytes.Buffer{}}
	m.cmd = exec.Command(bin, "--mode", "reverse:"+target, "--listen-host", "127.0.0.1", "-p", fmt.Sprint(port),
		"-w", flows, "-q", "--set", "termlog_verbosity=error")
	m.cmd.Stderr = m.stderr
	m.cmd.Stdout = m.stderr
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start mitmdump: %w", err)
	}
	c := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if m.cmd.ProcessState != nil {
			break
		}
		resp, err := c.Post(m.url+"/v1/responses", "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m, nil
			}
		}
	}
	m.stop()
	return nil, fmt.Errorf("mitmdump did not come up: %w\n%s", errUnexpected, tail(m.stderr.Bytes(), 2000))
}

// stop ends the mitmdump this harness started (by its pid) and waits for it.
func (m *mitm) stop() {
	if m.cmd.Process == nil {
		return
	}
	m.cmd.Process.Signal(os.Interrupt)
	waitOrKill(m.cmd, 10*time.Second)
}

// waitOrKill waits for cmd, a process this harness started, to exit; after d it kills it (by pid).
func waitOrKill(cmd *exec.Cmd, d time.Duration) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
	}
}

// flowBytes returns the size of the flow file written so far.
func (m *mitm) flowBytes() int64 {
	st, err := os.Stat(m.flows)
	if err != nil {
		return 0
	}
	return st.Size()
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// fsyncProbe measures write+fsync of one capture-sized line appended to a file in dir: the disk the
// capture store writes to, in the same run.
type fsyncProbe struct {
	f    *os.File
	line []byte
}

func newFsyncProbe(dir string, lineLen int) (*fsyncProbe, error) {
	f, err := os.OpenFile(filepath.Join(dir, "fsync-probe.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("fsync probe: %w", err)
	}
	line := bytes.Repeat([]byte("x"), lineLen-1)
	line = append(line, '\n')
	return &fsyncProbe{f: f, line: line}, nil
}

// run times n append+fsync pairs: fsyncs is each fsync alone, whole each write and fsync together
// (what the store does for a line: the copy into the page cache is part of making it durable).
func (p *fsyncProbe) run(n int) (fsyncs, whole durations, err error) {
	fsyncs, whole = make(durations, 0, n), make(durations, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := p.f.Write(p.line); err != nil {
			return nil, nil, fmt.Errorf("fsync probe write: %w", err)
		}
		t := time.Now()
		if err := p.f.Sync(); err != nil {
			return nil, nil, fmt.Errorf("fsync probe: %w", err)
		}
		end := time.Now()
		fsyncs = append(fsyncs, end.Sub(t))
		whole = append(whole, end.Sub(t0))
	}
	return fsyncs, whole, nil
}

func (p *fsyncProbe) close() error {
	return errors.Join(p.f.Close(), os.Remove(p.f.Name()))
}

// claimProbe times capture.Store.Claim and Claim.Release, which the gateway does around every
// captured call (the claim before forwarding), on the capture disk in the same run.
type claimProbe struct {
	store *capture.Store
}

// run times n claim/release pairs of one rollout.
func (p *claimProbe) run(n int) (claim, release durations, err error) {
	for range n {
		t := time.Now()
		c, err := p.store.Claim("claim-probe", capture.NewModelCallID())
		if err != nil {
			return nil, nil, err
		}
		t1 := time.Now()
		if err := c.Release(); err != nil {
			return nil, nil, err
		}
		claim = append(claim, t1.Sub(t))
		release = append(release, time.Since(t1))
	}
	return claim, release, nil
}

// storeLoad runs, without HTTP, what the gateway does to the store for every captured call — Claim,
// Append of one line, Release — from workers goroutines for about dur, worker w into rollout
// idOf(w). Its rate is the ceiling the disk puts on captured calls per second.
func storeLoad(store *capture.Store, line []byte, workers int, dur time.Duration, idOf func(int) string) (loadResult, error) {
	return runStoreOps(func(id string, line []byte) error {
		c, err := store.Claim(id, capture.NewModelCallID())
		if err != nil {
			return err
		}
		if err := store.Append(id, line); err != nil {
			return err
		}
		return c.Release()
	}, line, workers, dur, idOf)
}
