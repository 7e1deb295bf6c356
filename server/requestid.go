package server

import (
	"github.com/labstack/echo/v4"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/runtime"
)

const headerRequestID = "X-Request-Id"

// requestIDMiddleware keeps a caller's valid X-Request-Id (1–128 visible ASCII
// characters) and replaces a missing or invalid one with a fresh ID. It opens the
// request's gate.Record, which every door fills in for the log line, the metrics and
// the span.
func requestIDMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(headerRequestID)
		if !validRequestID(id) {
			id = runtime.NewID()
		}
		c.SetRequest(c.Request().WithContext(gate.WithRecord(c.Request().Context(), &gate.Record{RequestID: id})))
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

// record is the gate.Record of c's request.
func record(c echo.Context) *gate.Record { return gate.RecordOf(c.Request().Context()) }

func requestIDFrom(c echo.Context) string { return record(c).RequestID }
