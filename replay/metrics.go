package replay

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the replay's counters, kept as atomics (for Summary) and exported as Prometheus
// counters on their own registry:
//
//	modelcalls_replay_served_total        calls answered from a capture
//	modelcalls_replay_misses_total        calls no recorded request matched
//	modelcalls_replay_exhausted_total     calls whose matching recorded answers were all served
//	modelcalls_replay_forwarded_total     requests sent to the upstream (--on-miss forward)
//	modelcalls_replay_not_recorded_total  requests that are not model calls under a rollout prefix
//	modelcalls_replay_unused_answers      recorded answers of the rollouts asked for, not yet served (gauge)
type metrics struct {
	reg                                               *prometheus.Registry
	served, misses, exhausted, forwarded, notRecorded atomic.Int64
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	m.reg.MustRegister(
		counter("modelcalls_replay_served_total", "Model calls answered from a capture.", &m.served),
		counter("modelcalls_replay_misses_total", "Model calls no recorded request matched.", &m.misses),
		counter("modelcalls_replay_exhausted_total", "Model calls whose matching recorded answers were all served.", &m.exhausted),
		counter("modelcalls_replay_forwarded_total", "Requests forwarded to the upstream instead of answered.", &m.forwarded),
		counter("modelcalls_replay_not_recorded_total", "Requests that are not model calls under a rollout prefix.", &m.notRecorded),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "modelcalls_replay_unused_answers",
			Help: "Recorded answers of the rollouts asked for that were not served yet."}, func() float64 { return float64(s.unused()) }),
	)
	return m
}

func (m *metrics) add(c *atomic.Int64) { c.Add(1) }
