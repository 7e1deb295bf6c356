package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-context/agent-context/runtime"
)

// EventHubOptions tune the event hub.
type EventHubOptions struct {
	// Registerer receives the hub's metrics and the A2A state gauges; nil registers
	// none.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Keepalive is how long the listening connection may be silent before it is
	// pinged (default 30 s), so a connection that died without a word is noticed.
	Keepalive time.Duration
	// MetricsRefresh is how often, at most, the A2A state gauges are counted
	// (default DefaultMetricsRefresh).
	MetricsRefresh time.Duration
}

// Reconnection backoff of the listening connection.
const (
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// EventHub is runtime.EventNotifier on Postgres LISTEN/NOTIFY: one connection per
// replica (outside the pool) listens on the event channel, and each notification
// wakes the in-process subscriptions of its scope. An append notifies in its own
// transaction, so a wake-up means a commit on some replica. When the connection
// drops, the hub reconnects with backoff and then wakes every subscription, since
// notifications sent while it was gone are lost: each long poll re-checks the log.
type EventHub struct {
	config    *pgx.ConnConfig
	log       *slog.Logger
	keepalive time.Duration

	mu   sync.Mutex
	subs map[runtime.Scope]map[*eventSubscription]struct{}

	waiting  atomic.Int64
	connects atomic.Int64
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

var _ runtime.EventNotifier = (*EventHub)(nil)

// NewEventHub connects the listening connection (with the pool's settings), starts
// listening and returns the hub; Close stops it. The first connection must succeed;
// later ones are retried for as long as the hub runs.
func NewEventHub(ctx context.Context, pool *pgxpool.Pool, opts EventHubOptions) (*EventHub, error) {
	h := &EventHub{
		config: pool.Config().ConnConfig.Copy(), log: opts.Logger, keepalive: opts.Keepalive,
		subs: map[runtime.Scope]map[*eventSubscription]struct{}{}, stop: make(chan struct{}), done: make(chan struct{}),
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.keepalive <= 0 {
		h.keepalive = 30 * time.Second
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
	go h.run(conn)
	return h, nil
}

func (h *EventHub) register(reg prometheus.Registerer, pool *pgxpool.Pool, refresh time.Duration) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: "a2a", Name: "poll_waiters",
			Help: "Event polls waiting for an event to commit now.",
		}, func() float64 { return float64(h.waiting.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: "a2a", Name: "listener_connects_total",
			Help: "Connections the event listener made (the first, then one per reconnection).",
		}, func() float64 { return float64(h.connects.Load()) }),
		newA2AStateCollector(pool, h.log, refresh),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register the A2A metrics: %w", err)
		}
	}
	return nil
}

// connect opens the listening connection and starts listening.
func (h *EventHub) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, h.config)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{eventChannel}.Sanitize()); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	h.connects.Add(1)
	return conn, nil
}

// run receives notifications until Close, reconnecting whenever the connection fails.
func (h *EventHub) run(conn *pgx.Conn) {
	defer close(h.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-h.stop
		cancel()
	}()
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
		// Commits during the outage notified nobody: every poll looks again.
		h.wakeAll()
	}
}

// receive wakes the subscriptions named by each notification on conn until the
// connection fails or ctx ends. A connection silent for the keepalive is pinged.
func (h *EventHub) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		wait, cancel := context.WithTimeout(ctx, h.keepalive)
		n, err := conn.WaitForNotification(wait)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && pgconn.Timeout(err):
			if err := conn.Ping(ctx); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			h.notified(n.Payload)
		}
	}
}

// notified wakes the subscriptions of the scope a notification names; one it cannot
// read wakes them all, which costs a re-check and loses nothing.
func (h *EventHub) notified(payload string) {
	var names [2]string
	if err := json.Unmarshal([]byte(payload), &names); err != nil {
		h.wakeAll()
		return
	}
	scope := runtime.Scope{TenantID: names[0], ProjectID: names[1]}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[scope] {
		s.signal()
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

// Waiting is the number of polls waiting in Wait now.
func (h *EventHub) Waiting() int64 { return h.waiting.Load() }

// Connects is the number of times the hub connected: 1 plus its reconnections.
func (h *EventHub) Connects() int64 { return h.connects.Load() }

// Close stops listening and ends every wait (polls then answer with what they have);
// it returns once the listening connection is closed.
func (h *EventHub) Close() {
	h.stopOnce.Do(func() { close(h.stop) })
	<-h.done
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
