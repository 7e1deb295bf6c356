package knowledge

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
)

// Metric names (docs/knowledge.md, docs/observability.md: knowledge provider latency and circuit state).
const (
	MetricCallDuration = "agent_context_knowledge_provider_call_duration_seconds"
	MetricCircuitState = "agent_context_knowledge_provider_circuit_state"
)

// Operations, the operation label of MetricCallDuration.
const (
	OperationCapabilities = "capabilities"
	OperationQuery        = "query"
	OperationResolve      = "resolve"
)

// Outcomes, the outcome label of MetricCallDuration, besides the degradation reasons
// (provider_timeout, circuit_open, ...).
const (
	OutcomeOK = "ok"
	// OutcomeCanceled: the caller went away before the provider answered.
	OutcomeCanceled = "canceled"
)

// metrics are one Client's collectors.
type metrics struct {
	calls   *prometheus.HistogramVec
	circuit *circuitCollector
}

func newMetrics(providers []*provider) *metrics {
	return &metrics{
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: MetricCallDuration,
			Help: "Latency of calls to knowledge providers, by provider, operation and outcome " +
				"(ok, or the degradation reason; circuit_open calls reach no provider).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"provider", "operation", "outcome"}),
		circuit: &circuitCollector{
			providers: providers,
			desc: prometheus.NewDesc(MetricCircuitState,
				"Circuit breaker state per knowledge provider: 0 closed, 1 half-open, 2 open.",
				[]string{"provider"}, nil),
		},
	}
}

// register adds the collectors to r; a nil r registers nothing.
func (m *metrics) register(r prometheus.Registerer) error {
	if r == nil {
		return nil
	}
	if err := r.Register(m.calls); err != nil {
		return err
	}
	if err := r.Register(m.circuit); err != nil {
		r.Unregister(m.calls)
		return err
	}
	return nil
}

func (m *metrics) observe(provider, operation, outcome string, took time.Duration) {
	m.calls.WithLabelValues(provider, operation, outcome).Observe(took.Seconds())
}

// circuitCollector reads each breaker's state when scraped, so an open circuit that
// has become half-open by time alone is reported as such.
type circuitCollector struct {
	providers []*provider
	desc      *prometheus.Desc
}

func (c *circuitCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *circuitCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.providers {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, circuitValue(p.breaker.State()), p.cfg.Name)
	}
}

func circuitValue(s gobreaker.State) float64 {
	switch s {
	case gobreaker.StateHalfOpen:
		return 1
	case gobreaker.StateOpen:
		return 2
	default:
		return 0
	}
}
