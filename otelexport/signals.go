package otelexport

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Signals says which signals are exported, as the OpenTelemetry SDK environment variables set it:
// OTEL_SDK_DISABLED=true turns both off; OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER, when set,
// must be otlp (on) or none (off). Unset, each signal is on.
type Signals struct{ Traces, Metrics bool }

// EnvSignals reads Signals from the environment; a value other than otlp or none (console,
// zipkin, prometheus: exporters this program does not have) is an error naming the variable.
func EnvSignals() (Signals, error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return Signals{}, nil
	}
	traces, err := exporterOn("OTEL_TRACES_EXPORTER")
	if err != nil {
		return Signals{}, err
	}
	metrics, err := exporterOn("OTEL_METRICS_EXPORTER")
	if err != nil {
		return Signals{}, err
	}
	return Signals{Traces: traces, Metrics: metrics}, nil
}

// exporterOn reads one OTEL_<SIGNAL>_EXPORTER variable: a comma-separated list of exporter names
// whose only supported members are otlp and none.
func exporterOn(name string) (bool, error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return true, nil
	}
	on := false
	for part := range strings.SplitSeq(v, ",") {
		switch strings.ToLower(strings.TrimSpace(part)) {
		case "otlp":
			on = true
		case "none", "":
		default:
			return false, fmt.Errorf("%s=%s: want otlp or none (%q is not an exporter this program has)", name, v, strings.TrimSpace(part))
		}
	}
	return on, nil
}

// httpRefusal matches the OTLP/HTTP metric exporter's error for a status the endpoint answers when
// it has no metrics endpoint at all: 404 Not Found, 405 Method Not Allowed, 501 Not Implemented.
var httpRefusal = regexp.MustCompile(`failed to send metrics to \S+: (404|405|501)\b`)

// metricsRefused reports whether err says the endpoint does not take metrics at all (a traces-only
// backend such as Jaeger, Langfuse or Phoenix), rather than that one upload failed: an HTTP 404, 405
// or 501, or gRPC Unimplemented.
func metricsRefused(err error) bool {
	if err == nil {
		return false
	}
	if httpRefusal.MatchString(err.Error()) {
		return true
	}
	for e := err; e != nil; {
		if st, ok := status.FromError(e); ok && st.Code() == grpccodes.Unimplemented {
			return true
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				if metricsRefused(x) {
					return true
				}
			}
			return false
		}
		e = errors.Unwrap(e)
	}
	return false
}
