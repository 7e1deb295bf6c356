package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agent-context/agent-context/adapters/telemetry"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		env  map[string]string
		want telemetry.Config
	}{
		"nothing set: off": {nil, telemetry.Config{}},
		"an endpoint switches OTLP/HTTP on, with the traces path": {
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
			telemetry.Config{Exporter: "otlp", Protocol: "http/protobuf", Endpoint: "http://collector:4318/v1/traces"}},
		"the traces endpoint is used as it is": {
			map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/custom", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"},
			telemetry.Config{Exporter: "otlp", Protocol: "http/protobuf", Endpoint: "http://c:4318/custom"}},
		"gRPC takes the base endpoint": {
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			telemetry.Config{Exporter: "otlp", Protocol: "grpc", Endpoint: "http://c:4317"}},
		"the traces protocol wins": {
			map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
			telemetry.Config{Exporter: "otlp", Protocol: "grpc"}},
		"console":          {map[string]string{"OTEL_TRACES_EXPORTER": "console"}, telemetry.Config{Exporter: "console", Protocol: "http/protobuf"}},
		"none wins":        {map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, telemetry.Config{}},
		"the SDK disabled": {map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, telemetry.Config{}},
	} {
		got, err := telemetry.ConfigFromEnv(env(tc.env))
		require.NoError(t, err, name)
		require.Equal(t, tc.want, got, name)
	}
	for variable, value := range map[string]string{
		"OTEL_TRACES_EXPORTER":        "zipkin",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
		"OTEL_SDK_DISABLED":           "maybe",
	} {
		_, err := telemetry.ConfigFromEnv(env(map[string]string{variable: value, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}))
		require.ErrorContains(t, err, variable)
	}
}

// TestOffCostsNothing: a nil Tracing (tracing off) hands out no tracer and the base
// transport unchanged.
func TestOffCostsNothing(t *testing.T) {
	t.Parallel()
	off, err := telemetry.New(context.Background(), telemetry.Config{})
	require.NoError(t, err)
	require.Nil(t, off)
	require.Nil(t, off.TracerProvider())
	require.Nil(t, off.QueryTracer())
	base := &http.Transport{}
	require.Same(t, base, off.Transport(base))
	require.NoError(t, off.Shutdown(context.Background()))
}

// TestTransportTracesOutboundCalls: the transport adapters use makes a client span of
// each call and sends the W3C traceparent of that span to the server called.
func TestTransportTracesOutboundCalls(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
	}))
	t.Cleanup(upstream.Close)
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	tracing := telemetry.NewWithProvider(tp)

	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, upstream.URL, nil)
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: tracing.Transport(nil)}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	parent.End()

	spans := recorder.Ended()
	require.Len(t, spans, 2)
	client := spans[0]
	require.Equal(t, trace.SpanKindClient, client.SpanKind())
	require.Equal(t, parent.SpanContext().SpanID(), client.Parent().SpanID())
	require.Equal(t, "00-"+client.SpanContext().TraceID().String()+"-"+client.SpanContext().SpanID().String()+"-01", <-got)
}
