package main

import (
	"context"
	"fmt"
	goruntime "runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agent-context/agent-context/adapters/telemetry"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/server"
)

// startInstruments creates the process's metrics registry, which every component that
// has metrics registers into (docs/observability.md), and the tracing the OTEL_*
// environment asks for.
func (m *Main) startInstruments(ctx context.Context) error {
	m.registry = prometheus.NewRegistry()
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(),
	)
	if m.tracing != nil || m.uninstrumented {
		return nil
	}
	cfg := m.Config.Tracing
	cfg.ServiceVersion = version
	tracing, err := telemetry.New(ctx, cfg)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	m.tracing = tracing
	if tracing != nil {
		m.Log.Info("tracing on", "exporter", cfg.Exporter, "protocol", cfg.Protocol, "endpoint", cfg.Endpoint)
	}
	return nil
}

// serverInstruments hands the host its share: the registry for its request metrics
// and to serve, and the tracer provider.
func (m *Main) serverInstruments() server.Instruments {
	in := server.Instruments{Gatherer: m.registry}
	if m.uninstrumented {
		return in
	}
	in.Registerer = m.registry
	in.TracerProvider = m.tracing.TracerProvider()
	in.Propagator = m.tracing.TextMapPropagator()
	return in
}

// stopInstruments flushes the spans still buffered.
func (m *Main) stopInstruments() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := m.tracing.Shutdown(ctx)
	m.tracing = nil
	if err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}

// buildInfo is agent_context_build_info: always 1, the build in its labels.
func buildInfo() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: gate.MetricsNamespace, Name: "build_info",
		Help:        "The running build: version, commit and Go version in the labels; always 1.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision(), "goversion": goruntime.Version()},
	})
	g.Set(1)
	return g
}
