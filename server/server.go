package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/cost"
	"github.com/agent-context/agent-context/runtime/knowledge"
	"github.com/agent-context/agent-context/runtime/memory"
	"github.com/agent-context/agent-context/runtime/operation"
	"github.com/agent-context/agent-context/runtime/transfer"
)

// ReadinessChecker reports whether the database answers and its schema is current.
type ReadinessChecker interface {
	Versions(ctx context.Context) (current, latest int64, err error)
}

// Config is what the host needs: its collaborators and its limits.
type Config struct {
	Logger *slog.Logger
	Auth   AuthConfig
	Ready  ReadinessChecker
	// MaxBodyBytes bounds every request body (default 32 MiB, the contract's limit).
	MaxBodyBytes int64
	// MaxInFlightBodyBytes bounds the bytes all requests together hold for their
	// bodies (default DefaultMaxInFlightBodyBytes); beyond it a request is refused
	// with 503 SERVICE_UNAVAILABLE, reason overloaded.
	MaxInFlightBodyBytes int64
	// Messages serves the conversation message routes.
	Messages *conversation.Messages
	// Windows serves the window, derivation, lineage and model invocation routes.
	Windows *conversation.Windows
	// Operations serves conversation deletion, retention, operations and the
	// maintenance status.
	Operations *operation.Operations
	// Knowledge serves the external knowledge facade.
	Knowledge *knowledge.Service
	// Instruments are the request metrics, tracing and what GET /metrics serves.
	Instruments Instruments
	// A2A serves the agent-to-agent routes.
	A2A *a2a.Service
	// Costs serves the cost attribution report.
	Costs *cost.Costs
	// RateLimiting limits every authenticated request.
	RateLimiting RateLimiting
	// Entries, Recall and Projection serve the entry, recall and projection rebuild
	// routes.
	Entries    *memory.Entries
	Recall     *memory.Recall
	Projection *memory.Projection
	// PublicURL is the base URL the agent card advertises; empty derives it from
	// each request.
	PublicURL string
	// Version is the build's version, shown in the agent card.
	Version string
	// Exports serves export, export artifacts, import and the advanced operations.
	Exports *transfer.Exports
	// Console, when set, is the operator console, served at /console/. It authenticates
	// its viewers itself (with its own sessions), so the API's credential check and
	// rate limits do not apply to it.
	Console http.Handler
}

// Server is the echo host.
type Server struct {
	echo     *echo.Echo
	log      *slog.Logger
	auth     AuthConfig
	ready    ReadinessChecker
	maxBody  bodyLimits
	draining atomic.Bool

	messages    *conversation.Messages
	windows     *conversation.Windows
	operations  *operation.Operations
	knowledge   *knowledge.Service
	a2a         *a2a.Service
	costs       *cost.Costs
	rateLimiter rateLimiter
	entries     *memory.Entries
	recall      *memory.Recall
	projection  *memory.Projection
	publicURL   string
	version     string
	exports     *transfer.Exports
}

// New builds the host with every route of contract.Routes registered.
func New(cfg Config) *Server {
	s := &Server{
		echo:    echo.New(),
		log:     cfg.Logger,
		auth:    cfg.Auth,
		ready:   cfg.Ready,
		maxBody: bodyLimits{maxBytes: cfg.MaxBodyBytes},
	}
	s.messages = cfg.Messages
	s.windows = cfg.Windows
	s.operations = cfg.Operations
	s.knowledge = cfg.Knowledge
	s.a2a = cfg.A2A
	s.costs = cfg.Costs
	s.rateLimiter = newRateLimiter(cfg.RateLimiting)
	s.entries, s.recall, s.projection = cfg.Entries, cfg.Recall, cfg.Projection
	s.publicURL, s.version = cfg.PublicURL, cfg.Version
	s.exports = cfg.Exports
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.maxBody.maxBytes <= 0 {
		s.maxBody.maxBytes = contract.MaxRequestBodyBytes
	}
	inFlight := cfg.MaxInFlightBodyBytes
	if inFlight <= 0 {
		inFlight = DefaultMaxInFlightBodyBytes
	}
	s.maxBody.budget = newBodyBudget(inFlight)
	s.echo.HideBanner = true
	s.echo.HidePort = true
	s.echo.HTTPErrorHandler = s.errorHandler
	s.echo.Use(requestIDMiddleware)
	s.echo.Use(cfg.Instruments.middleware()...)
	s.echo.Use(s.logMiddleware, s.recoverMiddleware)

	s.handle(contract.RouteHealth, s.health)
	s.handle(contract.RouteReady, s.readyHandler)
	s.handle(contract.RouteMetrics, metricsHandler(cfg.Instruments.Gatherer, s.log))
	s.openAPIRoutes()
	s.messageRoutes()
	s.windowRoutes()
	s.operationRoutes()
	s.knowledgeRoutes()
	s.a2aRoutes()
	s.costRoutes()
	s.entryRoutes()
	s.envelopeRoutes()
	s.protocolRoutes()
	s.exportRoutes()
	if cfg.Console != nil {
		console := echo.WrapHandler(cfg.Console)
		s.echo.Any(consolePrefix, console)
		s.echo.Any(consolePrefix+"/*", console)
	}
	return s
}

// consolePrefix is where the operator console is mounted.
const consolePrefix = "/console"

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }

// HTTPServer returns an http.Server for addr with the timeouts a public listener needs:
// a slow client cannot hold a connection open forever.
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s.echo,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// Drain marks the server as shutting down: /ready answers 503 so load balancers stop
// sending traffic while in-flight requests finish.
func (s *Server) Drain() { s.draining.Store(true) }

func (s *Server) health(c echo.Context) error {
	return writeJSON(c, http.StatusOK, contract.Health{Status: "ok", Service: contract.Service})
}

func (s *Server) readyHandler(c echo.Context) error {
	if s.draining.Load() {
		return runtime.Errorf(contract.CodeServiceUnavailable, "the server is draining").With("reason", "draining")
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	current, latest, err := s.ready.Versions(ctx)
	if err != nil {
		return (&runtime.Error{Code: contract.CodeServiceUnavailable, Message: "the database is unreachable", Err: err}).
			With("reason", "database")
	}
	if current < latest {
		return runtime.Errorf(contract.CodeServiceUnavailable, "the database schema is not current").
			With("reason", "migrations_pending").With("schemaVersion", current).With("latestVersion", latest)
	}
	return writeJSON(c, http.StatusOK, contract.Ready{Status: "ok", SchemaVersion: current, LatestVersion: latest})
}
