package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/mcpserver"
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

// Config is what the host needs: its cross-cutting collaborators and limits, then the
// use cases of each area, grouped as runtime's packages are.
type Config struct {
	Logger *slog.Logger
	Auth   AuthConfig
	Ready  ReadinessChecker
	// Instruments are the request metrics, tracing and what GET /metrics serves.
	Instruments Instruments
	// RateLimiter limits every authenticated request (nil: none); the console, when
	// mounted, is given the same one.
	RateLimiter *RateLimiter
	Bodies      BodyLimits
	// Version is the build's version, shown in the agent card.
	Version string
	// MCPAuthorizationServers are the OAuth authorization servers the MCP endpoint's
	// protected resource metadata names (may be none).
	MCPAuthorizationServers []string
	// Console, when set, is the operator console, served at /console/. It authenticates
	// its viewers itself (with its own sessions), so the API's credential check does
	// not apply to it; it checks the rate limits of its signed-in requests with the
	// RateLimiter it was built with (the same as RateLimiter).
	Console http.Handler

	Conversation ConversationConfig
	Operation    OperationConfig
	Memory       MemoryConfig
	A2A          A2AConfig
	Transfer     TransferConfig
	Knowledge    KnowledgeConfig
	Cost         CostConfig
}

// BodyLimits bound the request bodies.
type BodyLimits struct {
	// MaxBytes bounds every request body (default 32 MiB, the contract's limit).
	MaxBytes int64
	// MaxInFlightBytes bounds the bytes all requests together hold for their bodies
	// (default DefaultMaxInFlightBodyBytes); beyond it a request is refused with 503
	// SERVICE_UNAVAILABLE, reason overloaded.
	MaxInFlightBytes int64
}

// ConversationConfig serves the conversation routes.
type ConversationConfig struct {
	// Messages serves the message routes.
	Messages *conversation.Messages
	// Windows serves the window, derivation, lineage and model invocation routes.
	Windows *conversation.Windows
}

// OperationConfig serves conversation deletion, retention, operations and the
// maintenance status.
type OperationConfig struct {
	Operations *operation.Operations
}

// MemoryConfig serves the entry, recall and projection rebuild routes.
type MemoryConfig struct {
	Entries    *memory.Entries
	Recall     *memory.Recall
	Projection *memory.Projection
}

// A2AConfig serves the agent-to-agent routes, the envelopes and the Google A2A
// endpoint.
type A2AConfig struct {
	Service *a2a.Service
	// PublicURL is the base URL the agent card advertises; empty derives it from
	// each request.
	PublicURL string
	// StreamMax is how long a stream of POST /a2a lives at most (default
	// DefaultA2AStreamMax).
	StreamMax time.Duration
	// StreamKeepAlive is how long a stream stays silent at most (default
	// DefaultA2AStreamKeepAlive).
	StreamKeepAlive time.Duration
}

// TransferConfig serves export, export artifacts, import and the advanced operations.
type TransferConfig struct {
	Exports *transfer.Exports
}

// KnowledgeConfig serves the external knowledge facade.
type KnowledgeConfig struct {
	Service *knowledge.Service
}

// CostConfig serves the cost attribution report.
type CostConfig struct {
	Costs *cost.Costs
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
	rateLimiter *RateLimiter
	entries     *memory.Entries
	recall      *memory.Recall
	projection  *memory.Projection
	publicURL   string
	version     string
	exports     *transfer.Exports
	// mcp is the MCP door and mcpAuthServers what its metadata names.
	mcp            *mcpserver.Door
	mcpAuthServers []string
	streamMax      time.Duration
	// streamKeepAlive is how long a stream stays silent at most.
	streamKeepAlive time.Duration
}

// New builds the host with every route of contract.Routes registered.
func New(cfg Config) *Server {
	s := &Server{
		echo:    echo.New(),
		log:     cfg.Logger,
		auth:    cfg.Auth,
		ready:   cfg.Ready,
		maxBody: bodyLimits{maxBytes: cfg.Bodies.MaxBytes},
	}
	s.messages, s.windows = cfg.Conversation.Messages, cfg.Conversation.Windows
	s.operations = cfg.Operation.Operations
	s.entries, s.recall, s.projection = cfg.Memory.Entries, cfg.Memory.Recall, cfg.Memory.Projection
	s.a2a, s.publicURL = cfg.A2A.Service, cfg.A2A.PublicURL
	s.exports = cfg.Transfer.Exports
	s.knowledge = cfg.Knowledge.Service
	s.costs = cfg.Cost.Costs
	s.rateLimiter = cfg.RateLimiter
	s.version = cfg.Version
	s.streamMax = cfg.A2A.StreamMax
	if s.streamMax <= 0 {
		s.streamMax = DefaultA2AStreamMax
	}
	s.streamKeepAlive = cfg.A2A.StreamKeepAlive
	if s.streamKeepAlive <= 0 {
		s.streamKeepAlive = DefaultA2AStreamKeepAlive
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.maxBody.maxBytes <= 0 {
		s.maxBody.maxBytes = contract.MaxRequestBodyBytes
	}
	inFlight := cfg.Bodies.MaxInFlightBytes
	if inFlight <= 0 {
		inFlight = DefaultMaxInFlightBodyBytes
	}
	s.maxBody.budget = newBodyBudget(inFlight)
	s.echo.HideBanner = true
	s.echo.HidePort = true
	s.echo.HTTPErrorHandler = s.errorHandler
	s.echo.Pre(s.closeWhenDraining)
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
	s.mcpRoutes(cfg.MCPAuthorizationServers)
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
// sending traffic while in-flight requests finish, and every answer from now on
// carries Connection: close.
func (s *Server) Drain() { s.draining.Store(true) }

// closeWhenDraining answers with Connection: close once the drain started, so net/http
// closes each connection right after its answer and the client reconnects, through
// the load balancer, elsewhere. Unlike http.Server.SetKeepAlivesEnabled(false), it
// leaves connections that are idle at that moment open: closing one races with a
// client that is just sending its next request on it, which then sees a reset.
func (s *Server) closeWhenDraining(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.draining.Load() {
			c.Response().Header().Set(echo.HeaderConnection, "close")
		}
		return next(c)
	}
}

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
