package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
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

// Config is what the host needs: its cross-cutting collaborators, the other doors it
// mounts, then the use cases of each area, grouped as runtime's packages are.
type Config struct {
	Logger *slog.Logger
	// Gate authenticates, admits, reads and answers every request (the same gate as
	// every mounted door's).
	Gate  *gate.Gate
	Ready ReadinessChecker
	// Instruments are the request metrics, tracing and what GET /metrics serves.
	Instruments Instruments
	// Doors are the other doors served on the same listener (the MCP tools, Google
	// A2A JSON-RPC): each serves its routes through the gate itself; the host routes
	// to them, and logs, counts and traces their requests as its own.
	Doors []Door
	// Console, when set, is the operator console, served at /console/ and below. It
	// signs its viewers in itself (with its own sessions), through the same gate.
	Console http.Handler

	Conversation ConversationConfig
	Operation    OperationConfig
	Memory       MemoryConfig
	A2A          A2AConfig
	Transfer     TransferConfig
	Knowledge    KnowledgeConfig
	Cost         CostConfig
}

// Door is another door served on the host's listener: the routes of contract.Routes it
// serves and its handler.
type Door struct {
	Routes  []contract.Route
	Handler http.Handler
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
	Operations *operation.Maintenance
}

// MemoryConfig serves the entry, recall and projection rebuild routes.
type MemoryConfig struct {
	Entries    *memory.Entries
	Recall     *memory.Recall
	Projection *memory.Projection
}

// A2AConfig serves the agent-to-agent routes and the envelopes.
type A2AConfig struct {
	Agents    *a2a.Agents
	Messages  *a2a.Messages
	Tasks     *a2a.Tasks
	Events    *a2a.Events
	Envelopes *a2a.Envelopes
	Snapshots *a2a.Snapshots
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
	Costs *cost.Attribution
}

// Server is the echo host.
type Server struct {
	echo     *echo.Echo
	log      *slog.Logger
	gate     *gate.Gate
	ready    ReadinessChecker
	draining atomic.Bool

	messages   *conversation.Messages
	windows    *conversation.Windows
	operations *operation.Maintenance
	knowledge  *knowledge.Service
	a2a        A2AConfig
	costs      *cost.Attribution
	entries    *memory.Entries
	recall     *memory.Recall
	projection *memory.Projection
	exports    *transfer.Exports
}

// New builds the host with every route of contract.Routes registered.
func New(cfg Config) *Server {
	s := &Server{echo: echo.New(), log: cfg.Logger, gate: cfg.Gate, ready: cfg.Ready}
	s.messages, s.windows = cfg.Conversation.Messages, cfg.Conversation.Windows
	s.operations = cfg.Operation.Operations
	s.entries, s.recall, s.projection = cfg.Memory.Entries, cfg.Memory.Recall, cfg.Memory.Projection
	s.a2a = cfg.A2A
	s.exports = cfg.Transfer.Exports
	s.knowledge = cfg.Knowledge.Service
	s.costs = cfg.Cost.Costs
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.gate == nil {
		s.gate = gate.New(gate.Config{Logger: s.log})
	}
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
	s.exportRoutes()
	for _, d := range cfg.Doors {
		for _, route := range d.Routes {
			s.mount(route, d.Handler)
		}
	}
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
