package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcalls/modelcalls/dialect"
	"github.com/modelcalls/modelcalls/rollout"
)

// ReasonCrossSite is the reason code of the 403 a request a browser marks as cross-site gets (not
// forwarded, not captured).
const ReasonCrossSite = "cross_site_request"

// maxWarnedOrigins bounds the distinct refused origins logged at warn; later ones get the access
// log line only.
const maxWarnedOrigins = 256

// Cross-site requests. Any web page the user visits can make the browser send a request to the
// gateway on loopback: a POST with Content-Type text/plain needs no CORS preflight, so without a
// check it is forwarded and captured as a call of the rollout it names. Browsers mark such requests:
// an Origin header naming the page's origin (on every POST, and on any request a page makes with
// fetch across origins), and Sec-Fetch-Site ("cross-site" for a page of another site). SDKs and
// harnesses send neither, so they are never refused.

// refuseCrossSite answers 403 cross_site_request, without forwarding or capturing anything, to a
// request a browser marks as coming from another origin: an Origin header that is neither the
// gateway's own origin (scheme://host[:port] it is reached at, from the request's Host) nor one of
// AllowedOrigins, or, without Origin, Sec-Fetch-Site: cross-site. It reports whether it answered.
// Each refused origin is logged once at warn; every refusal gets an access log line at info.
func (h *Handler) refuseCrossSite(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	fetchSite := r.Header.Get("Sec-Fetch-Site")
	switch {
	case origin != "":
		if h.allowedOrigin(origin, r) {
			return false
		}
	case strings.EqualFold(fetchSite, "cross-site"):
	default:
		return false
	}
	shown := origin
	if len(shown) > 200 {
		shown = shown[:200] + "..."
	}
	// The set of origins warned about stops growing at maxWarnedOrigins: a client inventing origins
	// gets access log lines, not memory.
	if h.warnedCount.Load() < maxWarnedOrigins {
		if _, seen := h.warnedOrigins.LoadOrStore(shown, struct{}{}); !seen {
			h.warnedCount.Add(1)
			fix := "if this page is yours, add --allow-origin " + shown
			if _, err := ParseOrigin(origin); err != nil {
				fix = "none: the request names no origin that could be allowed"
			}
			h.log.Warn("refused a cross-site request from a web page; nothing forwarded or captured (logged once per origin)",
				"origin", shown, "sec_fetch_site", fetchSite, "path", r.URL.Path, "fix", fix)
		}
	}
	h.log.Info("cross-site request refused", "status", http.StatusForbidden, "method", r.Method, "path", r.URL.Path,
		"origin", shown, "sec_fetch_site", fetchSite, "remote", r.RemoteAddr)
	d := dialect.Chat
	if _, rest, ok := rollout.SplitPath(r.URL.EscapedPath()); ok {
		if dd, ok := dialect.ForPath(rest); ok {
			d = dd
		}
	}
	msg := "a web page's cross-site request (Origin " + shown + ") is not forwarded: only clients without an Origin, the gateway's own origin and --allow-origin origins are served"
	if origin == "" {
		msg = "a web page's cross-site request (Sec-Fetch-Site: cross-site) is not forwarded"
	}
	writeJSON(w, http.StatusForbidden, dialect.ErrorBody(d, http.StatusForbidden, ReasonCrossSite, localMessage(ReasonCrossSite, msg)), nil)
	return true
}

// allowedOrigin reports whether origin is the gateway's own origin as r reached it, or one of
// AllowedOrigins (compared by scheme, host and port; letter case and default ports ignored).
func (h *Handler) allowedOrigin(origin string, r *http.Request) bool {
	o, ok := normalOrigin(origin)
	if !ok {
		return false // "null" (a sandboxed page, a file) or garbage: never a page of ours
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if own, ok := normalOrigin(scheme + "://" + r.Host); ok && own == o {
		return true
	}
	for _, a := range h.allowedOrigins {
		if a == o {
			return true
		}
	}
	return false
}

// normalOrigin is origin (scheme://host[:port]) lowercased, without a default port (80 for http,
// 443 for https) and without a trailing slash; ok is false when it is not such an origin.
func normalOrigin(origin string) (string, bool) {
	u, err := url.Parse(strings.TrimSuffix(origin, "/"))
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, true
}

// ParseOrigin checks an allowed origin (an --allow-origin value): scheme://host[:port], nothing
// else (https://ui.example, http://localhost:3000, or an app's own scheme such as
// vscode-webview://ID). It returns the origin in the form requests are compared in.
func ParseOrigin(origin string) (string, error) {
	o, ok := normalOrigin(origin)
	if !ok || strings.HasPrefix(o, "://") {
		return "", fmt.Errorf("%q is not an origin: want scheme://host[:port], as a browser sends it in Origin", origin)
	}
	return o, nil
}
