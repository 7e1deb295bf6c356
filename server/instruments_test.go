package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
)

// TestClientGoneIsNot5xx: a request whose client went away (its context canceled)
// before the answer counts as 499 (not the 503 the handler's error maps to), adds
// nothing to the errors by code, and does not mark its span as an error.
func TestClientGoneIsNot5xx(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	b := setup(t, Config{Instruments: Instruments{Registerer: reg, Gatherer: reg, TracerProvider: tp}})
	route := contract.Route{Method: http.MethodGet, Path: "/internal/v1/test/wait"}
	b.server.handleForTest(t, route, func(c echo.Context) error {
		<-c.Request().Context().Done()
		return c.Request().Context().Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest(http.MethodGet, route.Path, nil).WithContext(ctx)
	b.server.Handler().ServeHTTP(httptest.NewRecorder(), req)
	// And one ordinary 503 for contrast: a server error stays a server error.
	b.server.Drain()
	b.do(t, http.MethodGet, contract.PathReady, "", "")

	families, err := reg.Gather()
	require.NoError(t, err)
	counts := map[string]float64{}
	for _, f := range families {
		if f.GetName() != gate.MetricsNamespace+"_http_requests_total" && f.GetName() != gate.MetricsNamespace+"_http_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			counts[key] = m.GetCounter().GetValue()
		}
	}
	require.Equal(t, map[string]float64{
		"agent_context_http_requests_total method=GET route=/internal/v1/test/wait status=499": 1,
		"agent_context_http_requests_total method=GET route=/ready status=503":                 1,
		"agent_context_http_errors_total code=SERVICE_UNAVAILABLE route=/ready":                1,
	}, counts)

	spans := recorder.Ended()
	require.Len(t, spans, 2)
	for _, s := range spans {
		require.Equal(t, trace.SpanKindServer, s.SpanKind())
	}
	require.Equal(t, "GET "+route.Path, spans[0].Name())
	require.EqualValues(t, 0, spans[0].Status().Code, "a client gone is not a server error")
	require.Equal(t, "GET "+contract.PathReady, spans[1].Name())
	require.EqualValues(t, 1, spans[1].Status().Code, "a 503 is")
}
