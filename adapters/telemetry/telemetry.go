package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Exporters OTEL_TRACES_EXPORTER may name.
const (
	ExporterOTLP    = "otlp"
	ExporterConsole = "console"
	ExporterNone    = "none"
)

// OTLP protocols OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL may name.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Config is the tracing part of the standard OpenTelemetry environment. The exporter
// also reads its own variables (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION,
// _CERTIFICATE ...), the SDK the sampler (OTEL_TRACES_SAMPLER, _ARG) and batching
// (OTEL_BSP_*), and the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
type Config struct {
	// Exporter is ExporterOTLP, ExporterConsole, or "" when tracing is off.
	Exporter string
	// Protocol is the OTLP protocol (ProtocolHTTP by default).
	Protocol string
	// Endpoint is the OTLP endpoint URL as the exporter takes it: for HTTP the full
	// URL of the traces path. Empty uses the exporter's default (localhost).
	Endpoint string
	// ServiceVersion is reported as service.version.
	ServiceVersion string
}

// ConfigFromEnv reads Config from getenv. Tracing is on when OTEL_TRACES_EXPORTER
// names an exporter, or when it is unset and an OTLP endpoint is set; OTEL_SDK_DISABLED
// =true switches it off. A value it cannot honour is an error naming the variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var cfg Config
	if v := getenv("OTEL_SDK_DISABLED"); v != "" {
		disabled, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("OTEL_SDK_DISABLED must be true or false, got %q", v)
		}
		if disabled {
			return cfg, nil
		}
	}
	base := getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	signal := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	switch exporter {
	case "":
		if base == "" && signal == "" {
			return cfg, nil
		}
		exporter = ExporterOTLP
	case ExporterNone:
		return cfg, nil
	case ExporterOTLP, ExporterConsole:
	default:
		return cfg, fmt.Errorf("OTEL_TRACES_EXPORTER must be otlp, console or none, got %q", exporter)
	}
	cfg.Exporter = exporter
	protoVar := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	cfg.Protocol = getenv(protoVar)
	if cfg.Protocol == "" {
		protoVar = "OTEL_EXPORTER_OTLP_PROTOCOL"
		cfg.Protocol = getenv(protoVar)
	}
	switch cfg.Protocol {
	case "":
		cfg.Protocol = ProtocolHTTP
	case ProtocolHTTP, ProtocolGRPC:
	default:
		return cfg, fmt.Errorf("%s must be http/protobuf or grpc, got %q", protoVar, cfg.Protocol)
	}
	switch {
	case signal != "":
		cfg.Endpoint = signal
	case base != "" && cfg.Protocol == ProtocolHTTP:
		// The base endpoint gets the signal's path appended (OTLP exporter spec).
		cfg.Endpoint = strings.TrimRight(base, "/") + "/v1/traces"
	default:
		cfg.Endpoint = base
	}
	return cfg, nil
}

// Tracing is the process's tracer provider and propagator. Nil means off.
type Tracing struct {
	provider   trace.TracerProvider
	propagator propagation.TextMapPropagator
	shutdown   func(context.Context) error
}

// New builds tracing for cfg, or returns nil when cfg switches it off.
func New(ctx context.Context, cfg Config) (*Tracing, error) {
	if cfg.Exporter == "" {
		return nil, nil
	}
	exp, err := newExporter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("agent-context"), semconv.ServiceVersion(cfg.ServiceVersion)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{provider: tp, propagator: Propagator(), shutdown: tp.Shutdown}, nil
}

func newExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	switch {
	case cfg.Exporter == ExporterConsole:
		return stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
	case cfg.Protocol == ProtocolGRPC:
		var opts []otlptracegrpc.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		}
		return otlptracegrpc.New(ctx, opts...)
	default:
		var opts []otlptracehttp.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(cfg.Endpoint))
		}
		return otlptracehttp.New(ctx, opts...)
	}
}

// NewWithProvider wraps a tracer provider the caller owns (tests use one with an
// in-memory exporter); Shutdown leaves it alone.
func NewWithProvider(tp trace.TracerProvider) *Tracing {
	return &Tracing{provider: tp, propagator: Propagator()}
}

// Propagator is the W3C trace context and baggage, what the service reads from callers
// and writes to the services it calls.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// TracerProvider returns the provider, or nil when tracing is off.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.provider
}

// TextMapPropagator returns the propagator, or nil when tracing is off.
func (t *Tracing) TextMapPropagator() propagation.TextMapPropagator {
	if t == nil {
		return nil
	}
	return t.propagator
}

// QueryTracer returns the pgx tracer that makes a span of every statement run inside
// a traced request (statement text, never its parameters), or nil when tracing is off.
func (t *Tracing) QueryTracer() pgx.QueryTracer {
	if t == nil {
		return nil
	}
	// No span per pool acquisition and no connection attributes on every span: they
	// cost a tenth of a read's throughput, and the pool's metrics show waits for a
	// connection (agent_context_db_pool_empty_acquire_wait_seconds_total).
	return otelpgx.NewTracer(otelpgx.WithTracerProvider(t.provider),
		otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()), otelpgx.WithTrimSQLInSpanName(),
		otelpgx.WithDisableAcquireTracer(), otelpgx.WithDisableConnectionDetailsInAttributes())
}

// Transport wraps base (http.DefaultTransport when nil) so that every outbound request
// is a client span and carries the trace context; with tracing off it returns base.
// Every adapter that calls out over HTTP builds its client's transport with it.
func (t *Tracing) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if t == nil {
		return base
	}
	return otelhttp.NewTransport(base, otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(t.propagator))
}

// Shutdown flushes the spans still buffered and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}
