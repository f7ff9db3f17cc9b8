package gateway

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Connection hygiene: the http.Server and listener a gateway runs on (what `modelcalls proxy`
// uses; docs/reliability.md lists every limit).

// Defaults of ServerOptions.
const (
	// DefaultReadHeaderTimeout bounds the wait for a request's headers.
	DefaultReadHeaderTimeout = 30 * time.Second
	// DefaultKeepAliveTimeout bounds how long an idle keep-alive connection stays open (2 minutes:
	// longer than the 90 s idle timeout of Go's and most SDKs' client pools, so the client, not the
	// gateway, closes an idle connection and never sends a request on one the gateway just closed).
	DefaultKeepAliveTimeout = 2 * time.Minute
	// DefaultMaxHeaderBytes bounds a request's header block (1 MiB, net/http's own default).
	DefaultMaxHeaderBytes = 1 << 20
)

// File descriptors budgeted per client connection by DefaultMaxConnections: the client's socket,
// the upstream's, a response spool file and a capture write (capture file or claim) at once.
const fdsPerConn = 4

// ServerOptions configure NewServer. The zero value of every field means its default; a negative
// duration means no limit.
type ServerOptions struct {
	ReadHeaderTimeout time.Duration // default DefaultReadHeaderTimeout
	KeepAliveTimeout  time.Duration // http.Server.IdleTimeout; default DefaultKeepAliveTimeout
	MaxHeaderBytes    int           // default DefaultMaxHeaderBytes; larger header blocks get 431
}

// NewServer returns the http.Server the gateway runs on: h as its handler, HTTP/1.0, HTTP/1.1 and
// HTTP/2 cleartext with prior knowledge (curl --http2-prior-knowledge, gRPC-style clients) on the
// same port, and the timeouts and header limit of o. An "Upgrade: h2c" request is answered in
// HTTP/1.1 (the Handler declines the upgrade). Serve it on h.Listener to cap connections.
func (h *Handler) NewServer(o ServerOptions) *http.Server {
	h.once.Do(h.init)
	return NewHTTPServer(h, o, h.log)
}

// NewHTTPServer is NewServer for any handler (what `modelcalls replay` serves on): the same
// protocols, timeouts and header limit, the server's own errors logged to log at debug level.
func NewHTTPServer(handler http.Handler, o ServerOptions, log *slog.Logger) *http.Server {
	if log == nil {
		log = slog.Default()
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           handler,
		Protocols:         &p,
		ReadHeaderTimeout: orDefault(o.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		IdleTimeout:       orDefault(o.KeepAliveTimeout, DefaultKeepAliveTimeout),
		MaxHeaderBytes:    cmpOr(o.MaxHeaderBytes, DefaultMaxHeaderBytes),
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}

func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0 // net/http: zero is no limit
	}
	return d
}

func cmpOr(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// DefaultMaxConnections is the connection cap derived from the process's file-descriptor limit
// (RLIMIT_NOFILE, soft; Go raises it to the hard limit at start): the limit minus a reserve for the
// listeners, logs and capture dir (an eighth of the limit, 16 to 256 descriptors), divided by the
// descriptors one connection may need at once (fdsPerConn). 1024 descriptors give 224 connections.
// Where there is no such limit to read (Windows), it is 1000.
func DefaultMaxConnections() int {
	n, ok := fdLimit()
	if !ok {
		return 1000
	}
	if n > 1<<24 {
		n = 1 << 24
	}
	reserve := min(max(n/8, 16), 256)
	if n <= reserve+fdsPerConn {
		return 1
	}
	return int((n - reserve) / fdsPerConn)
}

// Listener wraps ln with the gateway's connection cap and accept hygiene:
//
//   - at most maxConns client connections are open at once (0: DefaultMaxConnections(), negative:
//     no cap); a connection past the cap is accepted, answered "503 Service Unavailable" with
//     Connection: close and closed, before the process runs out of descriptors;
//   - when accept itself fails for lack of descriptors (EMFILE, ENFILE), one reserved descriptor is
//     given up to accept and refuse the waiting connection the same way, so clients are answered
//     instead of hanging in the backlog;
//   - accept errors are logged at warn, at most once per 10 s (with the count since the last line),
//     and counted in modelcalls_gateway_connections_refused_total{reason="accept_error"}.
//
// It also reserves a few descriptors the Handler gives up to write the incomplete marker when a
// capture write fails for lack of descriptors, so such a call leaves a durable trace.
func (h *Handler) Listener(ln net.Listener, maxConns int) net.Listener {
	h.once.Do(h.init)
	h.fds.fill(markerFDs)
	return newCapListener(ln, maxConns, h.log, h.metrics)
}

// LimitListener is Handler.Listener for a server that is not a gateway (what `modelcalls replay`
// listens through): the same connection cap, 503 refusals and accept hygiene, logged to log, without
// the gateway's metrics or descriptor reserve for capture writes.
func LimitListener(ln net.Listener, maxConns int, log *slog.Logger) net.Listener {
	if log == nil {
		log = slog.Default()
	}
	return newCapListener(ln, maxConns, log, nil)
}

func newCapListener(ln net.Listener, maxConns int, log *slog.Logger, m *metrics) *capListener {
	if maxConns == 0 {
		maxConns = DefaultMaxConnections()
	}
	l := &capListener{Listener: ln, log: log, m: m, max: maxConns,
		capWarn: rateLimit{every: 10 * time.Second}, errWarn: rateLimit{every: 10 * time.Second}}
	l.spare.fill(1)
	return l
}

// capListener is the listener of Handler.Listener and LimitListener.
type capListener struct {
	net.Listener
	log     *slog.Logger
	m       *metrics // nil: not counted
	max     int
	open    atomic.Int64
	capWarn rateLimit
	errWarn rateLimit
	spare   fdReserve // one descriptor to accept and refuse with when accept hits EMFILE
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			l.refusedOne("accept_error")
			if n, ok := l.errWarn.allow(); ok {
				l.log.Warn("accept failed; connections wait in the backlog or are refused", "err", err,
					"since_last_warning", n, "max_connections", l.max)
			}
			if isFDExhausted(err) && l.spare.with(func() { l.refuseOne() }) {
				continue
			}
			return nil, err // http.Server retries temporary errors with a backoff
		}
		if l.max > 0 && l.open.Add(1) > int64(l.max) {
			l.open.Add(-1)
			l.refusedOne("limit")
			if n, ok := l.capWarn.allow(); ok {
				l.log.Warn("connection limit reached; refusing new connections with 503", "max_connections", l.max,
					"refused_since_last_warning", n, "hint", "raise --max-connections or the file-descriptor limit (ulimit -n)")
			}
			refuse(c)
			continue
		}
		if l.max <= 0 {
			l.open.Add(1)
		}
		if l.m != nil {
			l.m.connections.Inc()
		}
		return &capConn{Conn: c, l: l}, nil
	}
}

// refusedOne counts a refused connection or failed accept by reason.
func (l *capListener) refusedOne(reason string) {
	if l.m != nil {
		l.m.connsRefused.WithLabelValues(reason).Inc()
	}
}

// refuseOne accepts one waiting connection with the descriptor just freed, and refuses it at
// once (no lingering: the descriptor goes back to the reserve).
func (l *capListener) refuseOne() {
	c, err := l.Listener.Accept()
	if err != nil {
		return
	}
	l.refusedOne("limit")
	c.SetWriteDeadline(time.Now().Add(time.Second))
	c.Write(refused)
	c.Close()
}

// refused is the whole answer on a refused connection.
var refused = func() []byte {
	const body = "modelcalls: too many connections; retry in a moment\n"
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// lingering bounds the refused connections whose request bytes are being drained at once.
var lingering = make(chan struct{}, 32)

// refuse answers 503 on c and closes it. The write goes into an empty socket buffer, so it does
// not block (the deadline is a guard). The write side is shut first and what the client already
// sent is drained for up to half a second (at most 32 connections at a time), because closing a
// socket with unread bytes sends a reset that can destroy the answer before the client reads it.
func refuse(c net.Conn) {
	c.SetWriteDeadline(time.Now().Add(time.Second))
	c.Write(refused)
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return
	}
	tc.CloseWrite()
	select {
	case lingering <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-lingering }()
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		io.Copy(io.Discard, io.LimitReader(c, 64<<10))
		c.Close()
	}()
}

// capConn releases its slot in the cap once, when closed.
type capConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *capConn) Close() error {
	c.once.Do(func() {
		c.l.open.Add(-1)
		if c.l.m != nil {
			c.l.m.connections.Dec()
		}
	})
	return c.Conn.Close()
}

// isFDExhausted reports running out of file descriptors (per process or system-wide).
func isFDExhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// rateLimit lets one event through per interval and counts the ones held back.
type rateLimit struct {
	every time.Duration
	mu    sync.Mutex
	last  time.Time
	held  int
}

// allow reports whether to log now, and how many events were held back since the last one.
func (r *rateLimit) allow() (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < r.every {
		r.held++
		return 0, false
	}
	n := r.held
	r.last, r.held = now, 0
	return n, true
}

// fdReserve holds a few open descriptors (of /dev/null) that are given up, under a lock, when an
// operation failed for lack of descriptors and must not: writing the incomplete marker (the
// Handler's reserve), refusing a connection waiting in the backlog (the listener's).
type fdReserve struct {
	mu    sync.Mutex
	size  int
	files []*os.File
}

// markerFDs is the Handler's reserve: the marker file, the directory sync, one spare.
const markerFDs = 3

// fill sets the reserve's size and opens it; what cannot be opened now is retried after each use.
func (r *fdReserve) fill(size int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.size = size
	r.fillLocked()
}

func (r *fdReserve) fillLocked() {
	for len(r.files) < r.size {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return
		}
		r.files = append(r.files, f)
	}
}

// with gives up the reserved descriptors, runs fn, and takes them back. It reports false,
// without running fn, when the reserve is empty.
func (r *fdReserve) with(fn func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.files) == 0 {
		r.fillLocked() // another goroutine took the descriptors freed last time; try again
	}
	if len(r.files) == 0 {
		return false
	}
	for _, f := range r.files {
		f.Close()
	}
	r.files = r.files[:0]
	fn()
	r.fillLocked()
	return true
}

// markIncomplete writes the incomplete marker of rollout id; when that fails for lack of
// descriptors it tries once more with the reserve given up.
func (h *Handler) markIncomplete(id string) error {
	err := h.Store.MarkIncomplete(id)
	if err != nil && isFDExhausted(err) {
		h.fds.with(func() {
			if err = h.Store.MarkIncomplete(id); err == nil {
				h.log.Warn("out of file descriptors: wrote the incomplete marker with a reserved descriptor", "rollout_id", id)
			}
		})
	}
	return err
}
