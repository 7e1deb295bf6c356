package gate

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// Config is what the gate is built from.
type Config struct {
	Auth Auth
	// RateLimiter limits every authenticated request (nil: none).
	RateLimiter *RateLimiter
	// MaxBodyBytes bounds a request body (default contract.MaxRequestBodyBytes); a door
	// may bound its own bodies tighter (ReadBody's max).
	MaxBodyBytes int64
	// MaxInFlightBodyBytes bounds the bytes all requests together hold for their
	// bodies (default DefaultMaxInFlightBodyBytes); beyond it a request is refused
	// with 503 SERVICE_UNAVAILABLE, reason overloaded.
	MaxInFlightBodyBytes int64
	// Logger receives the causes of internal errors (slog.Default when nil).
	Logger *slog.Logger
}

// Gate is the one way in: one per process, shared by every door.
type Gate struct {
	auth    Auth
	limiter *RateLimiter
	maxBody int64
	budget  *bodyBudget
	log     *slog.Logger
}

// New returns the gate of cfg.
func New(cfg Config) *Gate {
	g := &Gate{auth: cfg.Auth, limiter: cfg.RateLimiter, maxBody: cfg.MaxBodyBytes, log: cfg.Logger}
	if g.maxBody <= 0 {
		g.maxBody = contract.MaxRequestBodyBytes
	}
	inFlight := cfg.MaxInFlightBodyBytes
	if inFlight <= 0 {
		inFlight = DefaultMaxInFlightBodyBytes
	}
	g.budget = newBodyBudget(inFlight)
	if g.log == nil {
		g.log = slog.Default()
	}
	return g
}

// Auth is the gate's authentication mode.
func (g *Gate) Auth() Auth { return g.auth }

// MaxBodyBytes is the bound of a request body.
func (g *Gate) MaxBodyBytes() int64 { return g.maxBody }

// Authenticate resolves the caller of r and records it for the request's log line.
func (g *Gate) Authenticate(r *http.Request) (runtime.Principal, error) {
	p, err := g.auth.Authenticate(r)
	if err == nil {
		RecordOf(r.Context()).Principal = &p
	}
	return p, err
}

// RateName is the name a route's requests are rate-limited under ("POST <path>").
func RateName(route contract.Route) string { return route.Method + " " + route.Path }

// Admit admits one request of p: first the rate limits under name (RateName of the
// route for the API, mcp:<tool> for an MCP tool call, the page's pattern for the
// console), so that every authenticated request counts, including those then
// refused; then the capability of each route the request reads or writes.
func (g *Gate) Admit(ctx context.Context, p runtime.Principal, name string, routes ...contract.Route) error {
	if err := g.limiter.take(ctx, name, p); err != nil {
		return err
	}
	for _, route := range routes {
		if err := Permit(p, route); err != nil {
			return err
		}
	}
	return nil
}

// Permit checks that p holds one of the capabilities route requires (INTERNAL_TOKEN_FORBIDDEN
// naming the first otherwise). A public or per-call route requires none.
func Permit(p runtime.Principal, route contract.Route) error {
	if len(route.Capabilities) == 0 {
		return nil
	}
	for _, c := range route.Capabilities {
		if p.Can(c) {
			return nil
		}
	}
	return runtime.Forbidden(route.Capabilities[0])
}

// BaseURL is the URL the service is reached at: public (AGENT_CONTEXT_PUBLIC_URL) when
// set, else the request's scheme and Host, so a test server on port 0 advertises a
// reachable URL.
func BaseURL(r *http.Request, public string) string {
	if public != "" {
		return public
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
