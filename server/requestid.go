package server

import (
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

const (
	headerRequestID = "X-Request-Id"
	ctxKeyRequestID = "agent-context.request-id"
	ctxKeyErrorCode = "agent-context.error-code"
	ctxKeyPrincipal = "agent-context.principal"
	// ctxKeyRouteLabel replaces the route template in the request's log line, metrics
	// and span: mcp:<tool> for an MCP tool call.
	ctxKeyRouteLabel = "agent-context.route-label"
	// ctxKeyClientGone marks a request whose client went away before its answer.
	ctxKeyClientGone = "agent-context.client-gone"
	// ctxKeyServerFault marks a request whose failure was logged as an error.
	ctxKeyServerFault = "agent-context.server-fault"
)

// requestIDMiddleware keeps a caller's valid X-Request-Id (1–128 visible ASCII
// characters) and replaces a missing or invalid one with a fresh ID.
func requestIDMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(headerRequestID)
		if !validRequestID(id) {
			id = runtime.NewID()
		}
		c.Set(ctxKeyRequestID, id)
		c.Response().Header().Set(headerRequestID, id)
		return next(c)
	}
}

func validRequestID(id string) bool {
	if id == "" || len(id) > contract.MaxRequestIDChars {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

func requestIDFrom(c echo.Context) string {
	id, _ := c.Get(ctxKeyRequestID).(string)
	return id
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
