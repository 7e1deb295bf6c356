package a2arpc

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// Defaults of the streams.
const (
	// DefaultStreamMax is how long a stream lives at most
	// (AGENT_CONTEXT_A2A_STREAM_MAX).
	DefaultStreamMax = 30 * time.Minute
	// DefaultStreamKeepAlive is how long a stream stays silent at most: then it
	// writes a comment, which also re-checks the log for a lost wake-up.
	DefaultStreamKeepAlive = 15 * time.Second
)

// Config is what the door needs: the gate, the A2A use cases and its settings.
type Config struct {
	// Gate authenticates, admits, reads and answers every request, as for every door.
	Gate *gate.Gate
	// Protocol, Tasks and Events are the A2A concepts the methods serve.
	Protocol *a2a.Protocol
	Tasks    *a2a.Tasks
	Events   *a2a.Events
	Logger   *slog.Logger
	// Version is the build's version, shown in the agent card.
	Version string
	// PublicURL is the base URL the agent card advertises; empty derives it from
	// each request.
	PublicURL string
	// StreamMax is how long a stream lives at most (default DefaultStreamMax).
	StreamMax time.Duration
	// StreamKeepAlive is how long a stream stays silent at most (default
	// DefaultStreamKeepAlive).
	StreamKeepAlive time.Duration
}

// Door is the Google A2A door: the agent card and the JSON-RPC endpoint with its
// streams and push notification configs.
type Door struct {
	gate            *gate.Gate
	protocol        *a2a.Protocol
	tasks           *a2a.Tasks
	events          *a2a.Events
	log             *slog.Logger
	version         string
	publicURL       string
	streamMax       time.Duration
	streamKeepAlive time.Duration
}

// New returns the door of cfg.
func New(cfg Config) *Door {
	d := &Door{gate: cfg.Gate, protocol: cfg.Protocol, tasks: cfg.Tasks, events: cfg.Events, log: cfg.Logger, version: cfg.Version, publicURL: cfg.PublicURL,
		streamMax: cfg.StreamMax, streamKeepAlive: cfg.StreamKeepAlive}
	if d.log == nil {
		d.log = slog.Default()
	}
	if d.streamMax <= 0 {
		d.streamMax = DefaultStreamMax
	}
	if d.streamKeepAlive <= 0 {
		d.streamKeepAlive = DefaultStreamKeepAlive
	}
	return d
}

// Routes are the routes the door serves: the agent card (three paths, one body) and
// POST /a2a.
func (d *Door) Routes() []contract.Route {
	return []contract.Route{contract.RouteA2AAgentCard, contract.RouteWellKnownAgentCard, contract.RouteWellKnownAgentJSON,
		contract.RouteA2AJSONRPC}
}

// ServeHTTP serves the door's routes.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == contract.PathA2AJSONRPC {
		d.jsonRPC(w, r)
		return
	}
	d.agentCard(w, r)
}
