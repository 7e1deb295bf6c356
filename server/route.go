package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/runtime"
)

// Handler is a use case behind a JSON route: it gets the authenticated caller and the
// strictly decoded request and returns the status and body to send.
type Handler[Req any] func(ctx context.Context, p runtime.Principal, req *Req) (int, any, error)

// jsonBody adapts a Handler to echo. The body is decoded by the gate only after the
// route's middleware has authenticated the caller and admitted the request; the memory
// reserved for it is held until the response is written, since the decoded request
// lives that long.
func jsonBody[Req any](g *gate.Gate, h Handler[Req]) echo.HandlerFunc {
	return func(c echo.Context) error {
		var req Req
		release, err := g.Decode(c.Request(), &req)
		defer release()
		if err != nil {
			return err
		}
		status, body, err := h(c.Request().Context(), principal(c), &req)
		if err != nil {
			return err
		}
		return writeJSON(c, status, body)
	}
}

// noBody adapts a handler of a GET route.
func noBody(h func(ctx context.Context, p runtime.Principal) (int, any, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		status, body, err := h(c.Request().Context(), principal(c))
		if err != nil {
			return err
		}
		return writeJSON(c, status, body)
	}
}

// principal is the authenticated caller of c's request (the zero principal on a
// public route).
func principal(c echo.Context) runtime.Principal {
	if p := gate.RecordOf(c.Request().Context()).Principal; p != nil {
		return *p
	}
	return runtime.Principal{}
}

// writeJSON writes an answer the one way every door does (gate.WriteJSON).
func writeJSON(c echo.Context, status int, v any) error {
	return gate.WriteJSON(c.Response(), c.Request(), status, v)
}

// handle registers route with its handler. The capability comes from the route table
// in contract, never from the call site, and is enforced by the gate before the
// handler runs.
func (s *Server) handle(route contract.Route, h echo.HandlerFunc) {
	s.add(route, h, s.routeMiddleware(route))
}

// mount registers route as served by another door's handler, which authenticates and
// admits its requests through the gate itself.
func (s *Server) mount(route contract.Route, h http.Handler) {
	s.add(route, echo.WrapHandler(h), matched)
}

func (s *Server) add(route contract.Route, h echo.HandlerFunc, mw echo.MiddlewareFunc) {
	if !declared(route) {
		panic(fmt.Sprintf("route %s %s is not in contract.Routes", route.Method, route.Path))
	}
	s.echo.Add(route.Method, route.Path, h, mw)
	if route.Method == http.MethodGet {
		// HEAD is GET without the body (RFC 9110 §9.3.2); monitors and probes use it.
		// net/http drops the body a handler writes for HEAD.
		s.echo.Add(http.MethodHead, route.Path, h, mw)
	}
}

func declared(route contract.Route) bool {
	for _, r := range contract.Routes() {
		if r.Method == route.Method && r.Path == route.Path {
			return true
		}
	}
	return false
}

const ctxKeyRouteMatched = "agent-context.route"

// matched marks the request as routed, so its log line and metrics name the route.
func matched(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Set(ctxKeyRouteMatched, true)
		return next(c)
	}
}

// routeMiddleware runs after routing (so an unknown route is ROUTE_NOT_FOUND with or
// without a credential): the gate authenticates the caller and admits the request
// (the rate limits, then the capability) before a byte of the body is read; a number
// the route bounds is answered with its bound.
func (s *Server) routeMiddleware(route contract.Route) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return matched(func(c echo.Context) error {
			if route.Public() {
				return next(c)
			}
			r := c.Request()
			p, err := s.gate.Authenticate(r)
			if err != nil {
				return err
			}
			if err := s.gate.Admit(r.Context(), p, gate.RateName(route), route); err != nil {
				return err
			}
			return gate.Bound(route, next(c))
		})
	}
}

// checkRoutes compares the routes the router serves with the contract's table: every
// served route must be declared (and so carry a capability or be explicitly public),
// and every declared route must be served. HEAD may mirror a declared GET.
func checkRoutes(served []*echo.Route, declaredRoutes []contract.Route) error {
	want := map[string]bool{}
	for _, r := range declaredRoutes {
		want[r.Method+" "+r.Path] = true
	}
	got := map[string]bool{}
	for _, r := range served {
		if r.Method == echo.RouteNotFound {
			continue
		}
		key := r.Method + " " + r.Path
		got[key] = true
		if r.Method == http.MethodHead && want[http.MethodGet+" "+r.Path] {
			continue
		}
		if !want[key] {
			return fmt.Errorf("route %s is served but has no entry (and no capability) in contract.Routes", key)
		}
	}
	for key := range want {
		if !got[key] {
			return fmt.Errorf("route %s is declared in contract.Routes but not served", key)
		}
	}
	return nil
}

var errAbortHandler = http.ErrAbortHandler
