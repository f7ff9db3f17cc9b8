package gateway

import (
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/modelcalls/modelcalls/dialect"
	"github.com/modelcalls/modelcalls/rollout"
)

// prefixKey keys the rollout id of a prefixed request in its context (and so in the context of the
// outbound request ReverseProxy derives from it).
type prefixKey struct{}

// dropH2CUpgrade removes an HTTP/2 cleartext upgrade offer (RFC 7540 section 3.2: "Upgrade: h2c"
// with an HTTP2-Settings header, both named in Connection) from a request's headers. The gateway
// declines the offer by ignoring it, which the RFC allows: the request is answered in HTTP/1.1,
// captured like any other, and the offer does not reach the upstream. An Upgrade header naming any
// other protocol (WebSocket) is left alone.
func dropH2CUpgrade(h http.Header) {
	ups := h["Upgrade"]
	if len(ups) == 0 {
		return
	}
	for _, v := range ups {
		for tok := range strings.SplitSeq(v, ",") {
			if !strings.EqualFold(strings.TrimSpace(tok), "h2c") {
				return
			}
		}
	}
	h.Del("Upgrade")
	h.Del("Http2-Settings")
	conn := h["Connection"]
	if len(conn) == 0 {
		return
	}
	var keep []string
	for _, v := range conn {
		for tok := range strings.SplitSeq(v, ",") {
			tok = strings.TrimSpace(tok)
			if tok != "" && !strings.EqualFold(tok, "upgrade") && !strings.EqualFold(tok, "http2-settings") {
				keep = append(keep, tok)
			}
		}
	}
	if len(keep) == 0 {
		h.Del("Connection")
		return
	}
	h["Connection"] = []string{strings.Join(keep, ", ")}
}

// warnOnce logs a routing mistake at warn the first time its kind is seen, and counts every
// occurrence in modelcalls_gateway_routing_mistakes_total{kind}.
func (h *Handler) warnOnce(kind, msg string, args ...any) {
	h.metrics.routingMistakes.WithLabelValues(kind).Inc()
	if _, seen := h.warned.LoadOrStore(kind, struct{}{}); seen {
		return
	}
	h.log.Warn(msg, append(args, "kind", kind, "note", "logged once per kind; counted in "+MetricRoutingMistakes)...)
}

// checkModelPath names a prefixed request on a path that is not a model path but looks meant to
// be one: the base URL the client was given lacks /v1 (/ng-rollout/r1/chat/completions) or has a
// path too many (/ng-rollout/r1/v1/v1/chat/completions). Such a call goes upstream uncaptured. It
// reports whether path is such a mistake.
func (h *Handler) checkModelPath(id, path string) bool {
	for _, d := range dialect.All {
		p := d.Path()
		switch {
		case path == strings.TrimPrefix(p, "/v1"):
			h.warnOnce("prefixed_path_missing_v1", "a prefixed request is not on a model path, so it is forwarded uncaptured: the client's base URL lacks /v1",
				"rollout_id", id, "path", path, "want_path", p,
				"fix", "give OpenAI clients the base URL with /v1 ("+rollout.PathPrefix(id)+"/v1); Anthropic clients get it without /v1 ("+rollout.PathPrefix(id)+")")
			return true
		case strings.HasSuffix(path, p):
			h.warnOnce("prefixed_path_extra_segments", "a prefixed request is not on a model path, so it is forwarded uncaptured: the client's base URL has extra path segments",
				"rollout_id", id, "path", path, "want_path", p,
				"fix", "the path after "+rollout.PathPrefix(id)+" must be exactly "+p+" (OpenAI clients: base URL "+rollout.PathPrefix(id)+"/v1; Anthropic clients: "+rollout.PathPrefix(id)+")")
			return true
		}
	}
	return false
}

// checkBuriedPrefix names an unprefixed request whose path holds a rollout prefix after other
// segments, on a model path: /base/ng-rollout/r1/v1/chat/completions, which a client given the base
// URL http://GATEWAY/base/ng-rollout/r1/v1 sends. The gateway reads the prefix only where the path
// starts (NeMo Gym's prefix protocol), so such a call goes upstream uncaptured; that is right behind
// an ingress that strips /base on its way to the gateway, which then never sees this path, and a
// mistake when the client talks to the gateway directly. escaped is the path as the client wrote it.
// It reports whether escaped is such a path.
func (h *Handler) checkBuriedPrefix(escaped string) bool {
	at := strings.Index(escaped, "/"+rollout.PrefixSegment+"/")
	if at <= 0 {
		return false
	}
	id, rest, ok := rollout.SplitPath(escaped[at:])
	if !ok {
		return false
	}
	if _, model := dialect.ForPath(rest); !model {
		return false
	}
	before := escaped[:at]
	h.warnOnce("prefix_not_leading", "a request's path holds a rollout prefix after other segments, so it is forwarded uncaptured: the gateway reads the prefix only at the start of the path",
		"path", escaped, "rollout_id", id, "before_prefix", before,
		"fix", "give the client the gateway's own address with the prefix first (http://GATEWAY"+rollout.PathPrefix(id)+"/v1 for OpenAI clients), or strip "+before+" in front of the gateway")
	return true
}

// checkUnprefixed names a model call (path is an observed path) that came without a
// /ng-rollout/<id> prefix at all: the client was given the gateway's address as a plain base URL,
// so none of its calls is captured. host is the address the client used for the gateway.
func (h *Handler) checkUnprefixed(host, path string) {
	if host == "" {
		host = "GATEWAY"
	}
	base := "http://" + host + rollout.PathPrefix("ROLLOUT_ID")
	h.warnOnce("unprefixed_model_call", "a model call came without the /"+rollout.PrefixSegment+"/<rollout id> prefix, so it is forwarded uncaptured",
		"path", path,
		"fix", "give the client the base URL "+base+"/v1 (OpenAI clients; Anthropic clients without /v1), or start it with: modelcalls run --rollout ROLLOUT_ID --upstream URL --capture-dir DIR -- COMMAND")
}

// checkUpstreamPath names an Upstream whose path ends in /v1: the client's /v1/... is appended to
// it, so calls would go to /v1/v1/....
func (h *Handler) checkUpstreamPath() {
	if p := strings.TrimRight(h.Upstream.Path, "/"); p == "/v1" || strings.HasSuffix(p, "/v1") {
		h.warnOnce("upstream_path_v1", "the upstream URL ends in /v1, and the client's path (/v1/...) is appended to it: calls would go to "+p+"/v1/...",
			"upstream", h.Upstream.Redacted(), "fix", "give the upstream without /v1, e.g. "+(&url.URL{Scheme: h.Upstream.Scheme, Host: h.Upstream.Host, Path: strings.TrimSuffix(p, "/v1")}).String())
	}
}

// rewriteLocation keeps a redirect inside the gateway, as nginx's "proxy_redirect default" does: a
// Location on the upstream's own origin (same scheme and host, port defaults made explicit) under
// the upstream's base path, or a path-absolute Location under that base path, becomes the
// path-absolute reference the client must request from the gateway for it: the base path replaced
// by the request's /ng-rollout/<id> prefix (none for an unprefixed request). A path-absolute
// Location resolves against the gateway's own address, so the client's follow-up call comes back
// through the gateway, under the same rollout, and never learns the upstream's address. Locations
// on other origins, outside the base path, or relative to the request path (which already resolve
// under the prefix) pass through unchanged.
func (h *Handler) rewriteLocation(hdr http.Header, id string) {
	locs := hdr[textproto.CanonicalMIMEHeaderKey("Location")]
	if len(locs) != 1 {
		return
	}
	loc, err := url.Parse(locs[0])
	if err != nil || loc.Opaque != "" {
		return
	}
	if loc.Host != "" || loc.Scheme != "" {
		if !sameOrigin(loc, h.Upstream) {
			return
		}
	} else if !strings.HasPrefix(loc.Path, "/") {
		return // relative to the request path: resolves under the prefix already
	}
	base := strings.TrimRight(h.Upstream.EscapedPath(), "/")
	p := loc.EscapedPath()
	rest, ok := strings.CutPrefix(p, base)
	if !ok || (rest != "" && rest[0] != '/') {
		return // outside the upstream's base path: the gateway has no address for it
	}
	if rest == "" {
		rest = "/"
	}
	out := rollout.PathPrefix(id) + rest
	if out == p && loc.Host == "" {
		return
	}
	if loc.RawQuery != "" || loc.ForceQuery {
		out += "?" + loc.RawQuery
	}
	if loc.Fragment != "" {
		out += "#" + loc.EscapedFragment()
	}
	hdr.Set("Location", out)
}

// sameOrigin reports whether u (absolute or scheme-relative) names the origin of base.
func sameOrigin(u, base *url.URL) bool {
	scheme := u.Scheme
	if scheme == "" {
		scheme = base.Scheme
	}
	if !strings.EqualFold(scheme, base.Scheme) || u.User != nil {
		return false
	}
	return strings.EqualFold(u.Hostname(), base.Hostname()) && originPort(u, scheme) == originPort(base, base.Scheme)
}

func originPort(u *url.URL, scheme string) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(scheme, "https") {
		return "443"
	}
	return "80"
}
