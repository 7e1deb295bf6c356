package server

import (
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the server's instrumentation scope.
const tracerName = "github.com/agent-context/agent-context/server"

// Span attributes of the service's own (the rest are OpenTelemetry's conventions).
const (
	attrRequestID = attribute.Key("agent_context.request_id")
	attrErrorCode = attribute.Key("agent_context.error_code")
)

// tracingMiddleware starts a server span per request, continuing the caller's trace
// when it sends a W3C traceparent, and puts it into the request's context so that the
// database spans below become its children. It runs outside the log middleware, so the
// span ends with the final status.
func tracingMiddleware(tp trace.TracerProvider, prop propagation.TextMapPropagator) echo.MiddlewareFunc {
	tracer := tp.Tracer(tracerName)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			ctx := prop.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
			ctx, span := tracer.Start(ctx, req.Method, trace.WithSpanKind(trace.SpanKindServer))
			defer span.End()
			c.SetRequest(req.WithContext(ctx))
			err := next(c)
			// The attributes are set once, when the answer is final.
			status := finalStatus(c)
			attrs := make([]attribute.KeyValue, 0, 5)
			attrs = append(attrs, semconv.HTTPRequestMethodKey.String(req.Method), semconv.HTTPResponseStatusCode(status),
				attrRequestID.String(requestIDFrom(c)))
			if route := routeLabel(c); route != routeUnmatched {
				span.SetName(req.Method + " " + route)
				attrs = append(attrs, semconv.HTTPRoute(route))
			} else {
				attrs = append(attrs, semconv.URLPath(req.URL.Path))
			}
			if code := record(c).Code; code != "" {
				attrs = append(attrs, attrErrorCode.String(code))
			}
			span.SetAttributes(attrs...)
			// OpenTelemetry's HTTP conventions: a server span is an error for 5xx only;
			// 4xx (and a client gone, 499) are the client's.
			if status >= 500 {
				span.SetStatus(codes.Error, "")
			}
			return err
		}
	}
}
