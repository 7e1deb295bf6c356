package server

import (
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Instruments are the host's observability collaborators. Every field is optional:
// without a Registerer no request is counted, without a TracerProvider no span is
// started (so an untraced service pays nothing for tracing), and without a Gatherer
// GET /metrics serves an empty set.
type Instruments struct {
	// Registerer receives the request metrics (docs/observability.md).
	Registerer prometheus.Registerer
	// Gatherer is what GET /metrics serves: the process's registry.
	Gatherer prometheus.Gatherer
	// TracerProvider starts a server span per request.
	TracerProvider trace.TracerProvider
	// Propagator reads the caller's trace context (W3C traceparent when nil).
	Propagator propagation.TextMapPropagator
}

// middleware returns the instruments' middleware in the order they wrap a request:
// the span first (so the metrics and everything below run inside it), then metrics.
func (in Instruments) middleware() []echo.MiddlewareFunc {
	var mws []echo.MiddlewareFunc
	if in.TracerProvider != nil {
		prop := in.Propagator
		if prop == nil {
			prop = propagation.TraceContext{}
		}
		mws = append(mws, tracingMiddleware(in.TracerProvider, prop))
	}
	if in.Registerer != nil {
		mws = append(mws, newRequestMetrics(in.Registerer).middleware)
	}
	return mws
}
