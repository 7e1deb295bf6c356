package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-context/agent-context/adapters/postgres/pgmetrics"
	"github.com/agent-context/agent-context/runtime"
)

// EventHubOptions tune the event hub.
type EventHubOptions struct {
	// Registerer receives the hub's metrics and the A2A state gauges; nil registers
	// none.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// DSN is the database the hub listens and sends its hints on
	// (AGENT_CONTEXT_LISTEN_DATABASE_URL): a direct connection when the pool goes
	// through PgBouncer in transaction mode, which cannot hold a LISTEN. Empty uses
	// the pool's settings.
	DSN string
	// Keepalive is how long the listening connection may be silent before it is
	// pinged, and how long the ping (and a hint's NOTIFY) may take before the
	// connection counts as dead (default 5 s): a TCP path that died without a word is
	// noticed within two keepalives, not the kernel's quarter of an hour.
	Keepalive time.Duration
	// HintInterval is the least time between two NOTIFY statements of this replica
	// (default 2 ms): the scopes committed in between go out together.
	HintInterval time.Duration
	// MetricsRefresh is how often, at most, the A2A state gauges are counted
	// (default pgmetrics.DefaultRefresh).
	MetricsRefresh time.Duration
}

// Defaults of EventHubOptions.
const (
	DefaultListenKeepalive = 5 * time.Second
	DefaultHintInterval    = 2 * time.Millisecond
)

// Reconnection backoff of the listening connection.
const (
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// The application names of the hub's two sessions end in these.
const (
	listenerName = "a2a-listener"
	hintsName    = "a2a-hints"
)

// maxHintPayload bounds one NOTIFY payload (Postgres allows just under 8,000 bytes);
// more scopes go out in several notifications of one statement.
const maxHintPayload = 7000

// EventHub is runtime.EventNotifier on Postgres LISTEN/NOTIFY, and the hints of the
// units of work (EventHints). One connection per replica (outside the pool) listens
// on the event channel, and each notification wakes the in-process subscriptions of
// the scopes it names. The notifications are hints sent after commits: a unit of work
// that appended events hands its scopes to Hint once it committed, which wakes this
// replica's subscriptions at once and queues the scopes for a second connection that
// sends them to every other replica, all scopes hinted meanwhile in one NOTIFY
// statement at most every HintInterval. No writing transaction ever notifies, so no
// commit waits on Postgres's notification lock. A hint can be lost (a replica dying
// after its commit, a listener reconnecting): long polls (through their scope's feed)
// and streams re-check the log on their own every second or keep-alive, so a lost
// hint delays an answer, never loses it. When the
// listening connection drops, the hub reconnects with backoff and then wakes every
// subscription.
type EventHub struct {
	config       *pgx.ConnConfig
	log          *slog.Logger
	keepalive    time.Duration
	hintInterval time.Duration

	mu      sync.Mutex
	subs    map[runtime.Scope]map[*eventSubscription]struct{}
	pending map[runtime.Scope]struct{}
	kick    chan struct{}

	// senderPID is the backend of the hint connection: the listener skips this
	// replica's own hints, whose subscriptions Hint woke already.
	senderPID atomic.Uint32
	waiting   atomic.Int64
	connects  atomic.Int64
	hintsSent atomic.Int64
	stop      chan struct{}
	stopOnce  sync.Once
	done      sync.WaitGroup
}

var (
	_ runtime.EventNotifier = (*EventHub)(nil)
	_ EventHints            = (*EventHub)(nil)
)

// NewEventHub connects the listening connection (to opts.DSN, else with the pool's
// settings), starts listening and sending hints, and returns the hub; Close stops it.
// The first connection must succeed; later ones are retried for as long as the hub
// runs.
func NewEventHub(ctx context.Context, pool *pgxpool.Pool, opts EventHubOptions) (*EventHub, error) {
	config := pool.Config().ConnConfig.Copy()
	if opts.DSN != "" {
		parsed, err := pgx.ParseConfig(opts.DSN)
		if err != nil {
			return nil, fmt.Errorf("parse the listen database URL: %w", err)
		}
		config = parsed
	}
	// Named apart from the pool's sessions, so operators (and tests) tell them apart
	// in pg_stat_activity.
	name := config.RuntimeParams["application_name"]
	if name == "" {
		name = "agent-context"
	}
	config.RuntimeParams["application_name"] = name + " " + listenerName
	h := &EventHub{
		config: config, log: opts.Logger, keepalive: opts.Keepalive, hintInterval: opts.HintInterval,
		subs: map[runtime.Scope]map[*eventSubscription]struct{}{}, pending: map[runtime.Scope]struct{}{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}),
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.keepalive <= 0 {
		h.keepalive = DefaultListenKeepalive
	}
	if h.hintInterval <= 0 {
		h.hintInterval = DefaultHintInterval
	}
	conn, err := h.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("listen for A2A events: %w", err)
	}
	if opts.Registerer != nil {
		if err := h.register(opts.Registerer, pool, opts.MetricsRefresh); err != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	h.done.Add(3)
	go func() {
		defer h.done.Done()
		<-h.stop
		cancel()
	}()
	go h.run(runCtx, conn)
	go h.sendHints(runCtx)
	return h, nil
}

func (h *EventHub) register(reg prometheus.Registerer, pool *pgxpool.Pool, refresh time.Duration) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: pgmetrics.Namespace, Subsystem: "a2a", Name: "poll_waiters",
			Help: "Subscriptions waiting for a wake-up now: one per scope with waiting long polls, one per stream.",
		}, func() float64 { return float64(h.waiting.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: pgmetrics.Namespace, Subsystem: "a2a", Name: "listener_connects_total",
			Help: "Connections the event listener made (the first, then one per reconnection).",
		}, func() float64 { return float64(h.connects.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: pgmetrics.Namespace, Subsystem: "a2a", Name: "hint_notifications_total",
			Help: "NOTIFY statements this replica sent to wake other replicas' long polls after commits.",
		}, func() float64 { return float64(h.hintsSent.Load()) }),
		pgmetrics.NewA2AStateCollector(pool, h.log, refresh),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register the A2A metrics: %w", err)
		}
	}
	return nil
}

// connect opens the listening connection and starts listening, within the keepalive.
func (h *EventHub) connect(ctx context.Context) (*pgx.Conn, error) {
	connect, cancel := context.WithTimeout(ctx, h.keepalive)
	defer cancel()
	conn, err := pgx.ConnectConfig(connect, h.config)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(connect, "LISTEN "+pgx.Identifier{eventChannel}.Sanitize()); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	h.connects.Add(1)
	return conn, nil
}

// run receives notifications until Close, reconnecting whenever the connection fails.
func (h *EventHub) run(ctx context.Context, conn *pgx.Conn) {
	defer h.done.Done()
	backoff := listenBackoffMin
	for {
		err := h.receive(ctx, conn)
		_ = conn.Close(context.WithoutCancel(ctx))
		if ctx.Err() != nil {
			return
		}
		h.log.Warn("a2a event listener lost its connection; reconnecting", slog.Any("error", err))
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			if conn, err = h.connect(ctx); err == nil {
				break
			}
			backoff = min(backoff*2, listenBackoffMax)
			h.log.Warn("a2a event listener cannot reconnect yet", slog.Any("error", err))
		}
		backoff = listenBackoffMin
		h.log.Info("a2a event listener reconnected")
		// Hints sent during the outage reached nobody: every poll looks again.
		h.wakeAll()
	}
}

// receive wakes the subscriptions named by each notification on conn until the
// connection fails or ctx ends. A connection silent for the keepalive is pinged, and
// a ping without an answer within the keepalive ends it: a dead TCP path otherwise
// looks silent until the kernel gives up on it.
func (h *EventHub) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		wait, cancel := context.WithTimeout(ctx, h.keepalive)
		n, err := conn.WaitForNotification(wait)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && pgconn.Timeout(err):
			ping, cancel := context.WithTimeout(ctx, h.keepalive)
			err := conn.Ping(ping)
			cancel()
			if err != nil {
				return err
			}
		case err != nil:
			return err
		case n.PID != 0 && n.PID == h.senderPID.Load():
			// This replica's own hint: Hint woke its subscriptions already.
		default:
			h.notified(n.Payload)
		}
	}
}

// Hint implements EventHints: it wakes this replica's subscriptions of scopes at once
// and queues the scopes for the other replicas. It never blocks on the database.
func (h *EventHub) Hint(scopes ...runtime.Scope) {
	h.mu.Lock()
	for _, scope := range scopes {
		for s := range h.subs[scope] {
			s.signal()
		}
		h.pending[scope] = struct{}{}
	}
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// sendHints sends the queued scopes, at most one NOTIFY statement per hint interval,
// on a connection of its own (connected when first needed, and again after a
// failure). A hint that cannot be sent is dropped: the polls' re-checks cover it.
func (h *EventHub) sendHints(ctx context.Context) {
	defer h.done.Done()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
		}
	}()
	var retryAt time.Time
	backoff := listenBackoffMin
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.kick:
		}
		h.mu.Lock()
		scopes := make([]runtime.Scope, 0, len(h.pending))
		for s := range h.pending {
			scopes = append(scopes, s)
		}
		clear(h.pending)
		h.mu.Unlock()
		if len(scopes) == 0 {
			continue
		}
		if conn == nil && time.Now().After(retryAt) {
			var err error
			if conn, err = h.connectSender(ctx); err != nil {
				conn, retryAt, backoff = nil, time.Now().Add(backoff), min(backoff*2, listenBackoffMax)
				h.log.Warn("a2a hint sender cannot connect; long polls fall back to their re-checks", slog.Any("error", err))
			} else {
				backoff = listenBackoffMin
			}
		}
		if conn != nil {
			if err := h.send(ctx, conn, scopes); err != nil {
				_ = conn.Close(context.WithoutCancel(ctx))
				conn = nil
				h.senderPID.Store(0)
				if ctx.Err() != nil {
					return
				}
				h.log.Warn("a2a hint sender lost its connection", slog.Any("error", err))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.hintInterval):
		}
	}
}

// connectSender opens the hint connection. Its notifying transactions write no rows,
// and their commits need not wait for the WAL flush.
func (h *EventHub) connectSender(ctx context.Context) (*pgx.Conn, error) {
	config := h.config.Copy()
	config.RuntimeParams["synchronous_commit"] = "off"
	config.RuntimeParams["application_name"] = strings.TrimSuffix(config.RuntimeParams["application_name"], listenerName) + hintsName
	connect, cancel := context.WithTimeout(ctx, h.keepalive)
	defer cancel()
	conn, err := pgx.ConnectConfig(connect, config)
	if err != nil {
		return nil, err
	}
	h.senderPID.Store(conn.PgConn().PID())
	return conn, nil
}

// send notifies the scopes in one statement: its own transaction, which writes
// nothing else.
func (h *EventHub) send(ctx context.Context, conn *pgx.Conn, scopes []runtime.Scope) error {
	var payloads []string
	var buf []byte
	for _, s := range scopes {
		pair, err := json.Marshal([2]string{s.TenantID, s.ProjectID})
		if err != nil {
			return err
		}
		if len(buf) > 0 && len(buf)+len(pair)+2 > maxHintPayload {
			payloads = append(payloads, string(append(buf, ']')))
			buf = nil
		}
		if len(buf) == 0 {
			buf = append(buf, '[')
		} else {
			buf = append(buf, ',')
		}
		buf = append(buf, pair...)
	}
	if len(buf) > 0 {
		payloads = append(payloads, string(append(buf, ']')))
	}
	send, cancel := context.WithTimeout(ctx, h.keepalive)
	defer cancel()
	if _, err := conn.Exec(send, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, eventChannel, payloads); err != nil {
		return err
	}
	h.hintsSent.Add(1)
	return nil
}

// notified wakes the subscriptions of the scopes a notification names; one it cannot
// read wakes them all, which costs a re-check and loses nothing.
func (h *EventHub) notified(payload string) {
	var pairs [][2]string
	if err := json.Unmarshal([]byte(payload), &pairs); err != nil {
		h.wakeAll()
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range pairs {
		for s := range h.subs[runtime.Scope{TenantID: p[0], ProjectID: p[1]}] {
			s.signal()
		}
	}
}

func (h *EventHub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, subs := range h.subs {
		for s := range subs {
			s.signal()
		}
	}
}

// Subscribe implements runtime.EventNotifier.
func (h *EventHub) Subscribe(scope runtime.Scope) runtime.EventSubscription {
	s := &eventSubscription{hub: h, scope: scope, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[scope] == nil {
		h.subs[scope] = map[*eventSubscription]struct{}{}
	}
	h.subs[scope][s] = struct{}{}
	return s
}

// Waiting is the number of subscriptions waiting in Wait now.
func (h *EventHub) Waiting() int64 { return h.waiting.Load() }

// Connects is the number of times the hub connected: 1 plus its reconnections.
func (h *EventHub) Connects() int64 { return h.connects.Load() }

// Close stops listening and sending and ends every wait (polls then answer with what
// they have); it returns once both connections are closed.
func (h *EventHub) Close() {
	h.stopOnce.Do(func() { close(h.stop) })
	h.done.Wait()
}

// eventSubscription is one long poll's subscription; wake holds at most one pending
// wake-up, so wake-ups coalesce and none is lost between a query and the wait.
type eventSubscription struct {
	hub   *EventHub
	scope runtime.Scope
	wake  chan struct{}
}

func (s *eventSubscription) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Wait implements runtime.EventSubscription.
func (s *eventSubscription) Wait(ctx context.Context) bool {
	s.hub.waiting.Add(1)
	defer s.hub.waiting.Add(-1)
	select {
	case <-s.wake:
		return true
	case <-ctx.Done():
		return false
	case <-s.hub.stop:
		return false
	}
}

// Close implements runtime.EventSubscription.
func (s *eventSubscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	subs := s.hub.subs[s.scope]
	delete(subs, s)
	if len(subs) == 0 {
		delete(s.hub.subs, s.scope)
	}
}
