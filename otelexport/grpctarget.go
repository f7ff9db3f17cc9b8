package otelexport

import (
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// GRPCTarget returns the host:port that the trace exporter of an Exporter with Config.Protocol
// protocol and Config.Endpoint endpoint connects to straight, when that exporter speaks OTLP/gRPC:
// the endpoint, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT (a URL or
// a bare host[:port]), with port 4317, the OTLP/gRPC default, when it names none. ok is false when
// the protocol is not gRPC (or not valid), when the endpoint URL does not parse (New reports it),
// or when the exporter would connect through a proxy (HTTPS_PROXY), where a direct connection
// would prove nothing.
//
// The OTLP/HTTP exporter fails at once on a refused connection, but the gRPC exporter reports it as
// UNAVAILABLE and retries it until its own 10 s timeout, for every batch: a caller that exports once
// can dial the target first and give up early.
func GRPCTarget(protocol, endpoint string) (hostport string, ok bool) {
	if p, err := ResolveProtocol(protocol); err != nil || p != ProtocolGRPC {
		return "", false
	}
	for _, env := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if endpoint == "" {
			endpoint = os.Getenv(env)
		}
	}
	host := endpoint
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return "", false
		}
		host = u.Host
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(strings.Trim(host, "[]"), "4317")
	}
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: &url.URL{Scheme: "https", Host: host}}); err != nil || p != nil {
		return "", false
	}
	return host, true
}
