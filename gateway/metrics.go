package gateway

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metric names the gateway exports on its own registry (docs/gateway.md).
const (
	MetricCalls           = "modelcalls_gateway_calls_total"                  // captured calls; labels dialect, status_class, error_category
	MetricUncaptured      = "modelcalls_gateway_uncaptured_requests_total"    // forwarded without capture; label reason
	MetricCaptureWrites   = "modelcalls_gateway_capture_writes_total"         // label result: ok | failed (marker written) | lost (marker failed too)
	MetricCaptureWriteSec = "modelcalls_gateway_capture_write_seconds"        // append + fsync latency
	MetricInFlight        = "modelcalls_gateway_calls_in_flight"              // captured calls whose capture is not yet finished
	MetricBytes           = "modelcalls_gateway_relayed_bytes_total"          // label direction: request | response
	MetricInvalidIDs      = "modelcalls_gateway_invalid_rollout_ids_total"    // prefixed requests answered 400
	MetricClaimFailures   = "modelcalls_gateway_capture_claim_failures_total" // claims that could not be created
	MetricRoutingMistakes = "modelcalls_gateway_routing_mistakes_total"       // label kind (logged once per kind)
	MetricConnections     = "modelcalls_gateway_connections_open"             // client connections accepted and not yet closed
	MetricConnsRefused    = "modelcalls_gateway_connections_refused_total"    // label reason: limit (connection cap) | accept_error
)

// metrics are the gateway's Prometheus collectors, registered on reg.
type metrics struct {
	reg           *prometheus.Registry
	calls         *prometheus.CounterVec
	uncaptured    *prometheus.CounterVec
	writes        *prometheus.CounterVec
	writeSeconds  prometheus.Histogram
	inFlight      prometheus.Gauge
	bytes         *prometheus.CounterVec
	invalidIDs    prometheus.Counter
	claimFailures prometheus.Counter

	routingMistakes *prometheus.CounterVec
	connections     prometheus.Gauge
	connsRefused    *prometheus.CounterVec

	reqBytes, respBytes prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		calls: counterVec(MetricCalls,
			"Captured model calls by dialect, HTTP status class (2xx..5xx, none) and error category (none when clean).",
			"dialect", "status_class", "error_category"),
		uncaptured: counterVec(MetricUncaptured,
			"Requests forwarded without capture, by reason (unprefixed, not_observed, upgrade, no_store).", "reason"),
		writes: counterVec(MetricCaptureWrites,
			"Capture line writes: ok, failed (incomplete marker written) or lost (marker failed too).", "result"),
		writeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricCaptureWriteSec,
			Help:    "Time to append one capture line including fsync, in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12), // 0.1 ms .. ~2.4 s
		}),
		inFlight: gauge(MetricInFlight, "Captured calls in flight (capture line not yet durable or marked)."),
		bytes: counterVec(MetricBytes,
			"Body bytes relayed, by direction (request: client to upstream, response: upstream to client).", "direction"),
		invalidIDs: counter(MetricInvalidIDs, "Prefixed requests whose rollout id is invalid (answered 400, not captured)."),
		claimFailures: counter(MetricClaimFailures,
			"Captured calls whose claim file could not be created (the call still proceeds)."),
		routingMistakes: counterVec(MetricRoutingMistakes,
			"Requests showing a routing mistake, by kind (prefixed_path_missing_v1, prefixed_path_extra_segments, upstream_path_v1, upstream_404); each kind is logged once at warn.",
			"kind"),
		connections: gauge(MetricConnections, "Client connections accepted through Handler.Listener and not yet closed."),
		connsRefused: counterVec(MetricConnsRefused,
			"Client connections refused (reason limit: past the connection cap, answered 503 and closed) and failed accepts (reason accept_error, e.g. out of file descriptors).",
			"reason"),
	}
	m.reg.MustRegister(m.calls, m.uncaptured, m.writes, m.writeSeconds, m.inFlight, m.bytes, m.invalidIDs,
		m.claimFailures, m.routingMistakes, m.connections, m.connsRefused, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reqBytes = m.bytes.WithLabelValues("request")
	m.respBytes = m.bytes.WithLabelValues("response")
	for _, r := range []string{"ok", "failed", "lost"} {
		m.writes.WithLabelValues(r)
	}
	return m
}

// counterVec, counter and gauge build one collector from its name, help text and labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// statusClass is the status_class label: "2xx".."5xx", "none" when no status was seen.
func statusClass(code int) string {
	if code <= 0 {
		return "none"
	}
	return strconv.Itoa(code/100) + "xx"
}
