package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	goruntime "runtime"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agent-context/agent-context/gate"
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

// StatusClientClosedRequest is the status a request is logged and counted under when
// its client went away before the answer (nginx's 499): the client's doing, not a
// server error. It is never sent: there is no one to send it to.
const StatusClientClosedRequest = 499

// logMiddleware writes one structured line per request: request ID, route, status,
// latency, tenant and subject. It never logs credentials or content.
//
// A request whose client disconnected or timed out mid-request (its body broke off,
// or its context was canceled while the handler waited, on the database say) is not
// a server failure: it is logged at INFO as 499, no envelope is written, and the
// connection is dropped, so that a client that only half-closed never reads a
// default 200 for a request that did nothing.
func (s *Server) logMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		gone := err != nil && !c.Response().Committed && clientGone(c.Request(), err)
		if gone {
			record(c).ClientGone = true
		} else if err != nil {
			c.Error(err)
		}
		status := finalStatus(c)
		attrs := []slog.Attr{
			slog.String("request_id", requestIDFrom(c)),
			slog.String("method", c.Request().Method),
			slog.String("route", routeLabel(c)),
			slog.Int("status", status),
			slog.Float64("latency_ms", float64(time.Since(start).Microseconds())/1000),
		}
		rec := record(c)
		if rec.Code != "" {
			attrs = append(attrs, slog.String("code", rec.Code))
		}
		if p := rec.Principal; p != nil {
			attrs = append(attrs, slog.String("tenant", p.TenantID), slog.String("project", p.ProjectID),
				slog.String("subject", p.Subject))
			if p.TokenID != "" {
				attrs = append(attrs, slog.String("jti", p.TokenID))
			}
		}
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelWarn
		}
		if rec.Fault {
			level = slog.LevelError
		}
		s.log.LogAttrs(c.Request().Context(), level, "request", attrs...)
		if gone {
			dropConnection(c)
		}
		return nil
	}
}

// clientGone reports whether err ended r because its client went away: reading the
// body failed, or the request's context was canceled (net/http cancels it when the
// connection closes) and the handler stopped because of that.
func clientGone(r *http.Request, err error) bool {
	if errors.Is(err, gate.ErrClientClosed) {
		return true
	}
	return errors.Is(err, context.Canceled) && errors.Is(r.Context().Err(), context.Canceled)
}

// dropConnection closes the connection of c without an answer. net/http writes
// nothing on a hijacked connection; a writer that cannot be hijacked (a test
// recorder) is left unwritten.
func dropConnection(c echo.Context) {
	hj, ok := c.Response().Writer.(http.Hijacker)
	if !ok {
		return
	}
	if conn, _, err := hj.Hijack(); err == nil {
		_ = conn.Close()
	}
}

// routeLabel is the matched route template, or "unmatched" so that scanners probing
// random paths cannot blow up log and metric cardinality.
func routeLabel(c echo.Context) string {
	if label := record(c).Route; label != "" {
		return label
	}
	if p := c.Path(); p != "" && c.Get(ctxKeyRouteMatched) != nil {
		return p
	}
	return routeUnmatched
}

const routeUnmatched = "unmatched"
