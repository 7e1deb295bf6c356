package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-context/agent-context/a2arpc"
	"github.com/agent-context/agent-context/adapters/embedding"
	"github.com/agent-context/agent-context/adapters/jwtauth"
	providers "github.com/agent-context/agent-context/adapters/knowledge"
	"github.com/agent-context/agent-context/adapters/peerregistry"
	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgcluster"
	"github.com/agent-context/agent-context/adapters/postgres/pgmetrics"
	"github.com/agent-context/agent-context/adapters/postgres/worker"
	"github.com/agent-context/agent-context/adapters/telemetry"
	"github.com/agent-context/agent-context/adapters/webhook"
	"github.com/agent-context/agent-context/console"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/mcpserver"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/cost"
	"github.com/agent-context/agent-context/runtime/knowledge"
	"github.com/agent-context/agent-context/runtime/memory"
	"github.com/agent-context/agent-context/runtime/operation"
	"github.com/agent-context/agent-context/runtime/session"
	"github.com/agent-context/agent-context/runtime/transfer"
	"github.com/agent-context/agent-context/server"
)

// Main is the running service: its database (possibly an embedded cluster), pool and
// HTTP listener. Run starts it; Close drains and stops it in reverse order.
type Main struct {
	Config Config
	Log    *slog.Logger

	verifier           *jwtauth.Verifier
	cluster            *pgcluster.Cluster
	pool               *pgxpool.Pool
	server             *server.Server
	http               *http.Server
	listener           net.Listener
	served             chan error
	jobs               *worker.Jobs
	knowledgeProviders *providers.Client
	hub                *postgres.EventHub
	// Instruments (instruments.go). A test may set tracing before Run; uninstrumented
	// (benchmarks only) leaves out request metrics and tracing.
	registry       *prometheus.Registry
	tracing        *telemetry.Tracing
	uninstrumented bool
	// stopping serialises Shutdown: a Close while a Shutdown runs waits for it.
	stopping sync.Mutex
	// The postgres rate limiter's pool and the stop of its sweeper (limits.go), and
	// the memory limiter's clock, which a test may set before Run.
	ratePool  *pgxpool.Pool
	stopSweep func()
	rateClock runtime.Clock
	// stopSessionSweep stops the sweep of the console's expired sessions.
	stopSessionSweep func()
}

// NewMain returns a Main for cfg.
func NewMain(cfg Config) *Main {
	return &Main{Config: cfg, Log: cfg.NewLogger()}
}

// Run provisions the database, migrates when configured to, and starts serving. It
// returns once the listener accepts connections.
func (m *Main) Run(ctx context.Context) error {
	cfg := m.Config
	if err := m.startInstruments(ctx); err != nil {
		return err
	}
	var err error
	m.verifier, err = newTokenVerifier(ctx, cfg, m.Log, m.tracing)
	if err != nil {
		return err
	}
	pricing, err := loadPricing(cfg.PricingFile)
	if err != nil {
		return err
	}
	auth := gate.Auth{StaticToken: cfg.ServiceToken}
	if m.verifier != nil {
		auth.Verifier = m.verifier
	}
	if auth.Open() && !loopbackBind(cfg.Bind) && !cfg.AllowOpen {
		return fmt.Errorf("open mode (no AGENT_CONTEXT_SERVICE_TOKEN and no JWKS) refuses to bind non-loopback address %s; set AGENT_CONTEXT_ALLOW_OPEN=true to override", cfg.Bind)
	}
	// The first line says how callers are authenticated (docs/auth.md).
	m.Log.Info("agent-context starting",
		slog.String("auth_mode", auth.Mode()),
		slog.String("bind", cfg.Bind),
		slog.Bool("embedded_postgres", cfg.DatabaseURL == ""),
		slog.Int("knowledge_providers", len(cfg.Knowledge.Providers)),
		slog.Group("rate_limits", slog.String("backend", cfg.RateLimitBackend),
			slog.Int64("global_per_min", cfg.RateLimits.GlobalPerMin), slog.Int64("agent_per_min", cfg.RateLimits.AgentPerMin),
			slog.Int64("tool_per_min", cfg.RateLimits.ToolPerMin)))
	if auth.Open() {
		m.Log.Warn("open mode: every caller is trusted; for local development only")
	}
	// Before the database: a missing local model stops the start at once, naming
	// `make setup` and AGENT_CONTEXT_MODEL_DIR.
	embedders, err := newEmbedders(cfg, embedding.NewMetrics(m.registry))
	if err != nil {
		return err
	}
	dsn, err := m.databaseURL(ctx)
	if err != nil {
		return err
	}
	if cfg.AutoMigrate {
		if err := postgres.Migrate(ctx, dsn); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	m.pool, err = postgres.NewPool(ctx, dsn, postgres.PoolOptions{
		MaxConns:         cfg.MaxConns,
		StatementTimeout: cfg.StatementTimeout,
		Tracer:           m.tracing.QueryTracer(),
	})
	if err != nil {
		return err
	}
	m.registry.MustRegister(pgmetrics.NewPoolCollector(m.pool), pgmetrics.NewJobQueueCollector(m.pool))
	// Before the units of work: they hand it the scopes of their committed events.
	if m.hub, err = postgres.NewEventHub(ctx, m.pool, postgres.EventHubOptions{Logger: m.Log, Registerer: m.registry,
		DSN: cfg.ListenDatabaseURL, MetricsRefresh: cfg.MetricsRefresh}); err != nil {
		return err
	}
	db, err := postgres.NewDB(ctx, m.pool, postgres.DBOptions{Logger: m.Log, Hints: m.hub})
	if err != nil {
		return err
	}
	// Loaded once: every replica reads the same secret, so any replica verifies any
	// replica's cursors.
	cursorSecret, err := db.Secret(ctx, "cursor_hmac_v1")
	if err != nil {
		return fmt.Errorf("load the cursor secret: %w", err)
	}
	cursors := runtime.NewCursorCodec(cursorSecret)
	messages := conversation.NewMessages(db.Messages(), cursors, runtime.SystemClock{})
	windows := conversation.NewWindows(db.Conversation(), cursors, runtime.SystemClock{})
	projection := memory.NewProjection(memory.ProjectionConfig{DB: db.Memory(), Embedders: embedders, Logger: m.Log,
		Bounds: operation.StepBounds{Timeout: worker.StepTimeout(cfg.JobRescueAfter)}})
	if err := m.prepareProjection(ctx, db, projection); err != nil {
		return err
	}
	entries := memory.NewEntries(db.Memory(), cursors, runtime.SystemClock{}, embedders.Configured().Model())
	recall := memory.NewRecall(db.Recall(), projection, embedders, runtime.SystemClock{}, memory.WithQueryBudget(cfg.EmbeddingQuery))
	exports := transfer.NewExports(transfer.ExportsConfig{DB: db.Transfer(), Logger: m.Log, TTL: cfg.ExportTTL, StepBytes: cfg.ExportStepBytes,
		Bounds: operation.StepBounds{Timeout: worker.StepTimeout(cfg.JobRescueAfter)}, Model: embedders.Configured().Model()})
	operations := operation.NewMaintenance(operation.MaintenanceConfig{DB: db.Operation(), Schema: db,
		Logger: m.Log, DefaultMaxAge: cfg.RetentionMaxAge, StepTimeout: worker.StepTimeout(cfg.JobRescueAfter),
		Projection: projection, Rebuilds: projection, Exports: exports})
	if m.knowledgeProviders, err = providers.New(cfg.Knowledge, providers.Options{Logger: m.Log,
		Registerer: m.registry, Transport: m.tracing.Transport}); err != nil {
		return err
	}
	m.knowledgeProviders.Start()
	webhooks, err := webhook.New(webhook.Options{AllowHosts: cfg.A2ALive.PushAllowHosts, Registerer: m.registry})
	if err != nil {
		return err
	}
	a2aCfg := a2a.Config{DB: db.A2A(), Cursors: cursors, Notifier: m.hub, MaxMessages: cfg.A2AMaxMessages,
		MaxEnvelopes: cfg.A2AMaxEnvelopes, Webhooks: webhooks, PushBody: a2arpc.A2APushBody,
		TaskRetention: cfg.A2ATaskRetention, EventRetention: cfg.A2AEventRetention, HMACKeys: cfg.A2AHMACKeys,
		RequireSigned: cfg.A2ARequireSigned, DefaultAgent: cfg.A2ADefaultAgent, Artifacts: exports,
		MaxWaitersPerTenant: cfg.A2ALive.MaxWaitersPerTenant}
	if cfg.A2APeersFile != "" {
		peers, err := peerregistry.Open(cfg.A2APeersFile, m.Log)
		if err != nil {
			return fmt.Errorf("AGENT_CONTEXT_A2A_PEERS_FILE: %w", err)
		}
		a2aCfg.Peers = peers
	}
	coordination := a2a.NewCoordination(a2aCfg)
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: pgmetrics.Namespace, Subsystem: "a2a", Name: "waiters",
		Help: "Streams and long polls waiting on this replica now (AGENT_CONTEXT_MAX_WAITERS_PER_TENANT bounds each tenant's).",
	}, func() float64 { return float64(coordination.Events.Waiters()) }))
	rateLimits, err := m.startRateLimits(ctx, dsn)
	if err != nil {
		return err
	}
	costs := cost.NewAttribution(db.Costs(), pricing)
	limiter := gate.NewRateLimiter(gate.RateLimiting{Limits: rateLimits, Registerer: m.registry})
	entrance := gate.New(gate.Config{Auth: auth, RateLimiter: limiter, MaxInFlightBodyBytes: cfg.MaxInFlightBodyBytes,
		Logger: m.Log})
	knowledgeService := knowledge.New(m.knowledgeProviders)
	sessions := session.NewSessions(db.Sessions(), runtime.SystemClock{}, cfg.ServiceToken)
	m.startSessionSweep(sessions)
	operatorConsole := console.New(console.Config{Logger: m.Log, Gate: entrance,
		Sessions: sessions, Messages: messages, Windows: windows,
		Operations: operations, Entries: entries, Recall: recall, Agents: coordination.Agents,
		AgentMessages: coordination.Messages, Tasks: coordination.Tasks, Events: coordination.Events, Costs: costs})
	tools := mcpserver.New(mcpserver.Config{Gate: entrance, Logger: m.Log, Version: version,
		MaxBodyBytes: cfg.MCPMaxBodyBytes, PublicURL: cfg.PublicURL, AuthorizationServers: cfg.MCPAuthorizationServers,
		Messages: messages, Windows: windows, Entries: entries, Recall: recall, Knowledge: knowledgeService,
		A2A: mcpserver.A2A{Agents: coordination.Agents, Messages: coordination.Messages, Tasks: coordination.Tasks,
			Events: coordination.Events, Snapshots: coordination.Snapshots}})
	protocol := a2arpc.New(a2arpc.Config{Gate: entrance, Protocol: coordination.Protocol, Tasks: coordination.Tasks,
		Events: coordination.Events, Logger: m.Log, Version: version,
		PublicURL: cfg.PublicURL, StreamMax: cfg.A2ALive.StreamMax, StreamKeepAlive: cfg.A2ALive.StreamKeepAlive})
	m.server = server.New(server.Config{
		Logger: m.Log, Gate: entrance, Ready: db, Instruments: m.serverInstruments(),
		Doors:        []server.Door{{Routes: tools.Routes(), Handler: tools}, {Routes: protocol.Routes(), Handler: protocol}},
		Console:      operatorConsole,
		Conversation: server.ConversationConfig{Messages: messages, Windows: windows},
		Operation:    server.OperationConfig{Operations: operations},
		Memory:       server.MemoryConfig{Entries: entries, Recall: recall, Projection: projection},
		A2A: server.A2AConfig{Agents: coordination.Agents, Messages: coordination.Messages,
			Tasks: coordination.Tasks, Events: coordination.Events, Envelopes: coordination.Envelopes,
			Snapshots: coordination.Snapshots},
		Transfer:  server.TransferConfig{Exports: exports},
		Knowledge: server.KnowledgeConfig{Service: knowledgeService},
		Cost:      server.CostConfig{Costs: costs},
	})
	m.registry.MustRegister(pgmetrics.NewProjectionCollector(m.pool, cfg.MetricsRefresh))
	if cfg.JobWorkers > 0 {
		jobOpts := worker.JobOptions{LegacyWorkers: cfg.JobWorkers, Classes: cfg.JobClasses, RescueAfter: cfg.JobRescueAfter, Logger: m.Log,
			Metrics: m.registry, A2ASweeper: coordination.Sweeper, A2ASweepInterval: cfg.A2ASweepInterval,
			Projection: projection, ProjectionSweepInterval: cfg.ProjectionSweepInterval,
			ExportPurger: exports, ExportPurgeInterval: cfg.ExportPurgeInterval,
			Push: coordination.Push, PushTimeout: webhook.Timeout}
		if cfg.RetentionMaxAge > 0 {
			jobOpts.RetentionInterval = cfg.RetentionInterval
		}
		if m.jobs, err = worker.NewJobs(db, operations, jobOpts); err != nil {
			return err
		}
		if err := m.jobs.Start(ctx); err != nil {
			m.jobs = nil
			return err
		}
	}
	m.listener, err = net.Listen("tcp", cfg.Bind)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Bind, err)
	}
	m.http = m.server.HTTPServer(cfg.Bind)
	m.served = make(chan error, 1)
	go func() { m.served <- m.http.Serve(m.listener) }()
	m.Log.Info("agent-context serving", slog.String("addr", m.listener.Addr().String()))
	return nil
}

// sessionSweepInterval is how often serve deletes the console's expired sessions: a
// sign-in deletes a bounded batch only, and there may be none for long.
const sessionSweepInterval = 5 * time.Minute

// startSessionSweep sweeps the console's expired sessions every sessionSweepInterval
// until Shutdown. Every replica sweeps: the deletions of two sweeps do not conflict.
func (m *Main) startSessionSweep(sessions *session.Sessions) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	m.stopSessionSweep = func() { cancel(); <-done }
	go func() {
		defer close(done)
		ticker := time.NewTicker(sessionSweepInterval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				if _, err := sessions.Sweep(ctx); err != nil && ctx.Err() == nil {
					m.Log.Warn("sweeping expired console sessions failed", slog.Any("error", err))
				}
			}
		}
	}()
}

// prepareProjection creates the configured embedder's vector table. A database whose
// migrations are pending is left alone (/ready reports it; the table is created at
// the next start).
func (m *Main) prepareProjection(ctx context.Context, db *postgres.DB, projection *memory.Projection) error {
	current, latest, err := db.Versions(ctx)
	if err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	if current < latest {
		m.Log.Warn("migrations are pending: the vector projection is prepared at the next start",
			slog.Int64("schema_version", current), slog.Int64("latest_version", latest))
		return nil
	}
	if err := projection.Prepare(ctx); err != nil {
		return fmt.Errorf("prepare the vector projection: %w", err)
	}
	return nil
}

// databaseURL returns the configured DSN, or starts the embedded cluster.
func (m *Main) databaseURL(ctx context.Context) (string, error) {
	if m.Config.DatabaseURL != "" {
		return m.Config.DatabaseURL, nil
	}
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{
		DataDir: filepath.Join(m.Config.DataDir, "pg"),
		Logger:  m.Log,
	})
	if err != nil {
		return "", fmt.Errorf("embedded postgres: %w", err)
	}
	m.cluster = cluster
	return cluster.DSN(), nil
}

// Addr is the listener's address (useful with port 0).
func (m *Main) Addr() string { return m.listener.Addr().String() }

// Close stops the service as Shutdown does, without cutting the drain delay short.
func (m *Main) Close() error { return m.Shutdown(context.Background()) }

// Shutdown stops the service the way a load balancer can follow (docs/deploy.md):
// /ready answers 503 for the drain delay while every request is still served (ctx
// ending cuts the delay short: a second signal), then the listener closes and
// in-flight requests have the drain timeout to finish; connections still open after
// it are closed. Then jobs stop, the pool closes and the embedded cluster stops.
// Acknowledged writes are committed before their response, so nothing acknowledged
// is lost.
func (m *Main) Shutdown(ctx context.Context) error {
	m.stopping.Lock()
	defer m.stopping.Unlock()
	var errs []error
	if m.http != nil {
		// Each answer from now on closes its connection (Connection: close), so
		// clients that keep connections alive reconnect, through the load balancer,
		// elsewhere; connections idle now stay open until then, as closing them would
		// race with a client sending on them.
		m.server.Drain()
		m.Log.Info("agent-context draining", slog.Duration("drain_delay", m.Config.DrainDelay),
			slog.Duration("drain_timeout", m.Config.DrainTimeout))
		delay := time.NewTimer(m.Config.DrainDelay)
		select {
		case <-delay.C:
		case <-ctx.Done():
			delay.Stop()
		}
		if m.hub != nil {
			// Waiting long polls answer now with what they have, instead of holding
			// the drain for up to 30 s.
			m.hub.Close()
		}
		drain, cancel := context.WithTimeout(context.Background(), m.Config.DrainTimeout)
		if err := m.http.Shutdown(drain); err != nil {
			errs = append(errs, fmt.Errorf("drain: %w", err))
			// Past the drain timeout: the requests left are cut off before the pool
			// they use closes.
			_ = m.http.Close()
		}
		cancel()
		if err := <-m.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
		m.http = nil
	}
	if m.verifier != nil {
		m.verifier.Close()
		m.verifier = nil
	}
	if m.knowledgeProviders != nil {
		m.knowledgeProviders.Close()
		m.knowledgeProviders = nil
	}
	if m.jobs != nil {
		// Before the pool closes: running jobs finish their current run or go back to
		// the queue for another replica.
		ctx, cancel := context.WithTimeout(context.Background(), m.Config.DrainTimeout)
		if err := m.jobs.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
		m.jobs = nil
	}
	if m.hub != nil {
		m.hub.Close()
		m.hub = nil
	}
	if m.stopSweep != nil {
		m.stopSweep()
		m.stopSweep = nil
	}
	if m.stopSessionSweep != nil {
		m.stopSessionSweep()
		m.stopSessionSweep = nil
	}
	if m.ratePool != nil {
		m.ratePool.Close()
		m.ratePool = nil
	}
	if m.pool != nil {
		m.pool.Close()
		m.pool = nil
	}
	if err := m.stopInstruments(); err != nil {
		errs = append(errs, err)
	}
	if m.cluster != nil {
		if err := m.cluster.Stop(context.Background()); err != nil {
			errs = append(errs, fmt.Errorf("stop embedded postgres: %w", err))
		}
		m.cluster = nil
	}
	if len(errs) == 0 {
		m.Log.Info("agent-context stopped")
	}
	return errors.Join(errs...)
}
