package embedding

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-context/agent-context/runtime/memory"
)

// Metrics times every Embed call of the embedders it instruments, by model and
// outcome (ok, error), in agent_context_embedding_duration_seconds. A nil *Metrics
// instruments nothing.
type Metrics struct {
	duration *prometheus.HistogramVec
	texts    *prometheus.CounterVec
}

// NewMetrics registers the embedding metrics with reg; a nil reg gives nil (none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		return nil
	}
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agent_context_embedding_duration_seconds",
			Help:    "Duration of Embed calls (a query, or a batch of the projection) by model and outcome.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"model", "outcome"}),
		texts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agent_context_embedding_texts_total",
			Help: "Texts embedded, by model and outcome.",
		}, []string{"model", "outcome"}),
	}
	reg.MustRegister(m.duration, m.texts)
	return m
}

// Instrument returns e timed by m (e itself when m is nil).
func (m *Metrics) Instrument(e memory.Embedder) memory.Embedder {
	if m == nil {
		return e
	}
	return instrumented{Embedder: e, m: m}
}

type instrumented struct {
	memory.Embedder
	m *Metrics
}

// Embed implements memory.Embedder.
func (e instrumented) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	start := time.Now()
	v, err := e.Embedder.Embed(ctx, texts)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	model := e.Model().ID
	e.m.duration.WithLabelValues(model, outcome).Observe(time.Since(start).Seconds())
	e.m.texts.WithLabelValues(model, outcome).Add(float64(len(texts)))
	return v, err
}
