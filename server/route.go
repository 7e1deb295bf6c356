package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

const ctxKeyRouteMatched = "agent-context.route"

// Handler is a use case behind a JSON route: it gets the authenticated caller and the
// strictly decoded request and returns the status and body to send.
type Handler[Req any] func(ctx context.Context, p runtime.Principal, req *Req) (int, any, error)

// jsonBody adapts a Handler to echo. The body is decoded only after the route's
// middleware has authenticated the caller and checked the capability; the memory
// reserved for it is held until the response is written, since the decoded request
// lives that long.
func jsonBody[Req any](limits bodyLimits, h Handler[Req]) echo.HandlerFunc {
	return func(c echo.Context) error {
		hold := &bodyHold{budget: limits.budget}
		defer hold.release()
		var req Req
		if err := decodeBody(c.Request(), &req, limits, hold); err != nil {
			return err
		}
		p, _ := c.Get(ctxKeyPrincipal).(runtime.Principal)
		status, body, err := h(c.Request().Context(), p, &req)
		if err != nil {
			return err
		}
		return writeJSON(c, status, body)
	}
}

// noBody adapts a handler of a GET route.
func noBody(h func(ctx context.Context, p runtime.Principal) (int, any, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, _ := c.Get(ctxKeyPrincipal).(runtime.Principal)
		status, body, err := h(c.Request().Context(), p)
		if err != nil {
			return err
		}
		return writeJSON(c, status, body)
	}
}

// handle registers route with its handler. The capability comes from the route table
// in contract, never from the call site, and is enforced before the handler runs.
func (s *Server) handle(route contract.Route, h echo.HandlerFunc) {
	if !declared(route) {
		panic(fmt.Sprintf("route %s %s is not in contract.Routes", route.Method, route.Path))
	}
	mw := s.routeMiddleware(route)
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

// routeMiddleware runs after routing (so an unknown route is ROUTE_NOT_FOUND with or
// without a credential): authentication, the rate limits, then the capability check.
// A per-call route (POST /internal/v1/mcp) is only authenticated here: its handler
// rate-limits and checks each call it carries.
func (s *Server) routeMiddleware(route contract.Route) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Set(ctxKeyRouteMatched, true)
			if route.Public() {
				return next(c)
			}
			p, err := s.auth.authenticate(c.Request())
			if err != nil {
				return err
			}
			c.Set(ctxKeyPrincipal, p)
			if route.PerCall() {
				return next(c)
			}
			if err := s.rateLimiter.Admit(c.Request().Context(), route.Method+" "+route.Path, p); err != nil {
				return err
			}
			if !holdsAny(p, route.Capabilities) {
				return runtime.Errorf(contract.CodeTokenForbidden, "the credential lacks the required capability").
					With("requiredCapability", route.Capabilities[0])
			}
			return next(c)
		}
	}
}

func holdsAny(p runtime.Principal, caps []string) bool {
	for _, c := range caps {
		if p.Can(c) {
			return true
		}
	}
	return false
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
