// Package hostcheck guards a local HTTP server against DNS rebinding: a web page whose name
// re-resolves to 127.0.0.1 can make the browser send it requests to a server on loopback, and read
// the answers, since to the browser they come from the page's own origin. Those requests carry the
// page's name in their Host header, so a server that answers only the names it is really reached
// by (loopback names and addresses, its own listen address, names the user adds) gives such a page
// nothing. `modelcalls view` and `modelcalls replay` serve through it.
package hostcheck

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
)

// maxWarned bounds the distinct refused hosts logged; the ones after it are refused silently.
const maxWarned = 256

// Guard is an http.Handler that passes a request on to Next only when its Host header names the
// server (Allowed); any other gets 403 with a JSON error naming the host and the flag that allows
// it.
type Guard struct {
	next    http.Handler
	allowed map[string]bool // lowercased hosts of the listen addresses and the names the user added
	flag    string          // the flag named in the 403 ("--allowed-host")
	log     *slog.Logger

	mu     sync.Mutex
	warned map[string]bool
}

// New returns a Guard in front of next for a server listening on listen (host:port addresses: the
// address as the user gave it and as it was bound; an empty host or an unspecified address such as
// 0.0.0.0 or [::] adds nothing), that also accepts the names and addresses in allowed (each a host or
// host:port; the port is ignored). flag is the option a user adds a host with, named in the 403; log
// receives one warn line per refused host (nil: none). An allowed entry that is empty gives an error.
func New(next http.Handler, listen, allowed []string, flag string, log *slog.Logger) (*Guard, error) {
	g := &Guard{next: next, allowed: map[string]bool{}, flag: flag, log: log, warned: map[string]bool{}}
	for _, l := range listen {
		if h := hostOnly(l); h != "" {
			if ip, err := netip.ParseAddr(h); err != nil || !ip.IsUnspecified() {
				g.allowed[h] = true
			}
		}
	}
	for _, a := range allowed {
		h := hostOnly(strings.TrimSpace(a))
		if h == "" {
			return nil, fmt.Errorf("%s %q: want a host name or address", flag, a)
		}
		g.allowed[h] = true
	}
	return g, nil
}

// Allowed reports whether host (a Host header: name or address, with or without a port) names the
// server: empty (an HTTP/1.0 client without Host: no browser), "localhost" or a name under
// ".localhost" (browsers resolve those to loopback themselves), a loopback address (127.0.0.0/8,
// ::1, also IPv4-mapped), the listen address's host, or one of the allowed names. Letter case and
// a trailing dot are ignored.
func (g *Guard) Allowed(host string) bool {
	if host == "" {
		return true
	}
	h := hostOnly(host)
	switch {
	case h == "":
		return false
	case h == "localhost" || strings.HasSuffix(h, ".localhost"):
		return true
	case g.allowed[h]:
		return true
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap().IsLoopback()
	}
	return false
}

func (g *Guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.Allowed(r.Host) {
		g.next.ServeHTTP(w, r)
		return
	}
	shown := r.Host
	if len(shown) > 100 {
		shown = shown[:100] + "..."
	}
	g.warn(shown, r)
	msg := fmt.Sprintf("host %q is not allowed: this server answers loopback names and addresses and its listen address only "+
		"(a page whose name resolves to this machine must not read it); to allow a name, restart with %s %s", shown, g.flag, hostOnly(r.Host))
	body, _ := json.Marshal(map[string]any{"error": map[string]string{"type": "forbidden", "code": "host_not_allowed", "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusForbidden)
	w.Write(body)
}

// warn logs a refused host once.
func (g *Guard) warn(host string, r *http.Request) {
	if g.log == nil {
		return
	}
	g.mu.Lock()
	first := !g.warned[host] && len(g.warned) < maxWarned
	if first {
		g.warned[host] = true
	}
	g.mu.Unlock()
	if first {
		g.log.Warn("refused a request for another host (DNS rebinding defence); logged once per host", "host", host,
			"path", r.URL.Path, "remote", r.RemoteAddr, "fix", "if this name is yours, add "+g.flag+" "+hostOnly(r.Host))
	}
}

// hostOnly is the host of a Host header or address, without its port or IPv6 brackets, lowercased,
// without a trailing dot; "" when there is none.
func hostOnly(hostport string) string {
	h := hostport
	if sh, _, err := net.SplitHostPort(hostport); err == nil {
		h = sh
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}
