package server

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// echoError maps the errors echo's router answers itself (no route, a method the
// route does not take) onto the contract's codes; every other error passes to the
// gate as it is.
func echoError(err error) error {
	var he *echo.HTTPError
	if !errors.As(err, &he) {
		return err
	}
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
	return err
}

// errorHandler is echo's HTTPErrorHandler: the gate answers every error, as it does
// for every door.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	s.gate.WriteError(c.Response(), c.Request(), echoError(err))
}
