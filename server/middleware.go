package server

import (
	"fmt"
	"log/slog"
	goruntime "runtime"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agent-context/agent-context/runtime"
)

// recoverMiddleware turns a handler panic into a 500 envelope (never a dropped
// connection) and logs the panic and its stack with the request ID.
func (s *Server) recoverMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			r := recover()
			if r == nil {
				return
			}
			if r == errAbortHandler {
				panic(r)
			}
			stack := make([]byte, 16<<10)
			stack = stack[:goruntime.Stack(stack, false)]
			s.log.ErrorContext(c.Request().Context(), "handler panicked",
				slog.String("request_id", requestIDFrom(c)),
				slog.String("panic", fmt.Sprint(r)),
				slog.String("stack", string(stack)))
			err = fmt.Errorf("handler panic: %v", r)
		}()
		return next(c)
	}
}

// logMiddleware writes one structured line per request: request ID, route, status,
// latency, tenant and subject. It never logs credentials or content.
func (s *Server) logMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		status := c.Response().Status
		attrs := []slog.Attr{
			slog.String("request_id", requestIDFrom(c)),
			slog.String("method", c.Request().Method),
			slog.String("route", routeLabel(c)),
			slog.Int("status", status),
			slog.Float64("latency_ms", float64(time.Since(start).Microseconds())/1000),
		}
		if code, ok := c.Get(ctxKeyErrorCode).(string); ok {
			attrs = append(attrs, slog.String("code", code))
		}
		if p, ok := c.Get(ctxKeyPrincipal).(runtime.Principal); ok {
			attrs = append(attrs, slog.String("tenant", p.TenantID), slog.String("project", p.ProjectID),
				slog.String("subject", p.Subject))
			if p.TokenID != "" {
				attrs = append(attrs, slog.String("jti", p.TokenID))
			}
		}
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		s.log.LogAttrs(c.Request().Context(), level, "request", attrs...)
		return nil
	}
}

// routeLabel is the matched route template, or "unmatched" so that scanners probing
// random paths cannot blow up log and metric cardinality.
func routeLabel(c echo.Context) string {
	if p := c.Path(); p != "" && c.Get(ctxKeyRouteMatched) != nil {
		return p
	}
	return routeUnmatched
}

const routeUnmatched = "unmatched"
