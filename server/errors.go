package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// toError maps any error a handler or middleware returns to a runtime.Error. Errors
// that are not runtime.Errors are internal: their text stays in the log.
func toError(err error) *runtime.Error {
	var re *runtime.Error
	if errors.As(err, &re) {
		if _, known := contract.Codes[re.Code]; known {
			return re
		}
		return &runtime.Error{Code: contract.CodeInternal, Message: "internal error", Err: err}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return runtime.Errorf(contract.CodeRouteNotFound, "no such route")
		case http.StatusMethodNotAllowed:
			return runtime.Errorf(contract.CodeMethodNotAllowed, "method not allowed on this route")
		case http.StatusRequestEntityTooLarge:
			return runtime.TooLarge("body", contract.MaxRequestBodyBytes)
		case http.StatusUnsupportedMediaType:
			return runtime.Errorf(contract.CodeUnsupportedMediaType, "the request body must be application/json")
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return (&runtime.Error{Code: contract.CodeServiceUnavailable, Message: "the request did not finish in time", Err: err}).
			With("reason", "timeout")
	}
	return &runtime.Error{Code: contract.CodeInternal, Message: "internal error", Err: err}
}

// errorHandler is echo's HTTPErrorHandler: it owns the code → status table and the
// envelope, and logs internal errors with the request ID.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	e := s.errorBody(c, err)
	info := contract.Codes[e.Code]
	if e.Code == contract.CodeRateLimited {
		if ms, ok := e.Details["retryAfterMs"].(int64); ok {
			c.Response().Header().Set("Retry-After", retryAfterSeconds(ms))
		}
	}
	if info.Status == http.StatusUnauthorized {
		// RFC 9110 §11.6.1: a 401 names the scheme that would be accepted. The MCP
		// endpoint also points an MCP client at its protected resource metadata
		// (RFC 9728), where it finds the authorization servers.
		challenge := `Bearer realm="` + contract.Service + `"`
		if c.Path() == contract.PathMCP {
			challenge = `Bearer resource_metadata="` + s.baseURL(c) + contract.PathOAuthProtectedResource + `", realm="` + contract.Service + `"`
		}
		c.Response().Header().Set("WWW-Authenticate", challenge)
	}
	body := contract.ErrorResponse{Status: info.Status, Message: e.Message, Error: e}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(info.Status)
		return
	}
	if werr := writeJSON(c, info.Status, body); werr != nil {
		s.log.WarnContext(c.Request().Context(), "writing error response failed",
			slog.String("request_id", e.RequestID), slog.Any("error", werr))
	}
}

// errorBody maps err to the envelope's error object, logs an internal cause with the
// request ID (the client never sees it) and records the code for the request's log
// line, metrics and span. The HTTP error handler and the MCP door's tool errors both
// answer with it.
func (s *Server) errorBody(c echo.Context, err error) contract.ErrorBody {
	re := toError(err)
	info := contract.Codes[re.Code]
	requestID := requestIDFrom(c)
	if info.Status >= 500 && (re.Err != nil || re.Code == contract.CodeInternal) {
		// A failure with a cause to investigate; a deliberate refusal (draining,
		// overloaded) has none and is only a WARN request line.
		c.Set(ctxKeyServerFault, true)
		s.log.ErrorContext(c.Request().Context(), "request failed",
			slog.String("request_id", requestID),
			slog.String("code", re.Code),
			slog.Any("error", err))
	}
	details := re.Details
	if details == nil {
		details = map[string]any{}
	}
	c.Set(ctxKeyErrorCode, re.Code)
	return contract.ErrorBody{
		Code:      re.Code,
		Message:   re.Message,
		Category:  info.Category,
		Retryable: info.Retryable,
		RequestID: requestID,
		Details:   details,
	}
}

func retryAfterSeconds(ms int64) string {
	secs := (ms + 999) / 1000
	if secs < 1 {
		secs = 1
	}
	return itoa(secs)
}
