package pgmetrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-context/agent-context/contract"
)

// a2aStateTimeout bounds the statement a scrape runs, so a slow database slows a scrape
// by at most this much (the gauges are then missing from that scrape).
const a2aStateTimeout = 2 * time.Second

// A2AStateCollector exports the A2A tasks by state and the messages by state (live,
// or expired and awaiting the purge), over all scopes, counted at most once per
// refresh interval whatever the scrape rate.
type A2AStateCollector struct {
	pool            *pgxpool.Pool
	log             *slog.Logger
	tasks, messages *prometheus.Desc
	counts          *scrapeCache[a2aStateCounts]
}

// a2aStateCounts is one read of the A2A state gauges.
type a2aStateCounts struct{ tasks, messages map[string]float64 }

// NewA2AStateCollector returns the A2A state collector of the database behind pool,
// counting at most every refresh (0: DefaultRefresh), logging to log; register it once.
func NewA2AStateCollector(pool *pgxpool.Pool, log *slog.Logger, refresh time.Duration) *A2AStateCollector {
	c := &A2AStateCollector{
		pool: pool, log: log,
		tasks: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "a2a", "tasks"),
			"A2A tasks by state, over every scope.", []string{"state"}, nil),
		messages: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "a2a", "messages"),
			"A2A messages by state (live, or expired and not yet purged), over every scope.", []string{"state"}, nil),
	}
	c.counts = newScrapeCache(refresh, func() (a2aStateCounts, error) {
		tasks, messages, err := c.count()
		return a2aStateCounts{tasks: tasks, messages: messages}, err
	})
	return c
}

// Describe implements prometheus.Collector.
func (c *A2AStateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tasks
	ch <- c.messages
}

// Collect implements prometheus.Collector. When the database fails, the scrape goes on
// without these gauges and the failure is logged.
func (c *A2AStateCollector) Collect(ch chan<- prometheus.Metric) {
	counts, err := c.counts.get()
	if err != nil {
		c.log.Warn("a2a metrics: counting tasks and messages failed", slog.Any("error", err))
		return
	}
	for state, n := range counts.tasks {
		ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, n, state)
	}
	for state, n := range counts.messages {
		ch <- prometheus.MustNewConstMetric(c.messages, prometheus.GaugeValue, n, state)
	}
}

// count reads the tasks and messages by state, every state present.
func (c *A2AStateCollector) count() (tasks, messages map[string]float64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), a2aStateTimeout)
	defer cancel()
	rows, err := c.pool.Query(ctx, `
		SELECT 'task', state, count(*) FROM a2a_tasks GROUP BY state
		UNION ALL
		SELECT 'message', CASE WHEN expires_at_ms > $1 THEN 'live' ELSE 'expired' END, count(*)
		FROM a2a_messages GROUP BY 2`, time.Now().UnixMilli())
	if err != nil {
		return nil, nil, err
	}
	tasks = map[string]float64{}
	for _, s := range contract.TaskStates {
		tasks[s] = 0
	}
	messages = map[string]float64{"live": 0, "expired": 0}
	var kind, state string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&kind, &state, &n}, func() error {
		if kind == "task" {
			tasks[state] = float64(n)
		} else {
			messages[state] = float64(n)
		}
		return nil
	})
	return tasks, messages, err
}
