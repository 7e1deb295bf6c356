// Package telemetry sets up OpenTelemetry tracing from the standard OTEL_* environment
// and hands the adapters their instruments: a pgx tracer for SQL spans and an HTTP
// transport for outbound calls. A nil *Tracing is tracing switched off: every method
// then returns what costs nothing (no tracer, the base transport).
package telemetry
