package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// projectionStatTimeout bounds a scrape's count of the projection's backlog.
const projectionStatTimeout = 2 * time.Second

// ProjectionCollector exports the vector projection's backlog: the entries of every
// scope written and not yet embedded, and how long the oldest has waited, counted in
// the database at each scrape. Every replica reports the same figures: aggregate with
// max, not sum. Scopes are not a label (unbounded, and one tenant's figures are not
// another's business); the maintenance status reports a scope's own.
type ProjectionCollector struct {
	pool    *pgxpool.Pool
	backlog *prometheus.Desc
	oldest  *prometheus.Desc
}

var _ prometheus.Collector = (*ProjectionCollector)(nil)

// NewProjectionCollector returns the projection collector of the database behind
// pool; register it once.
func NewProjectionCollector(pool *pgxpool.Pool) *ProjectionCollector {
	return &ProjectionCollector{
		pool: pool,
		backlog: prometheus.NewDesc("agent_context_vector_projection_backlog",
			"Entries written and not yet embedded into the vector projection, all scopes.", nil, nil),
		oldest: prometheus.NewDesc("agent_context_vector_projection_oldest_pending_age_seconds",
			"How long the oldest entry waiting to be embedded has waited (0 when none waits).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *ProjectionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.backlog
	ch <- c.oldest
}

// Collect implements prometheus.Collector. A failed count is reported as an invalid
// metric, which the metrics endpoint logs and leaves out.
func (c *ProjectionCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), projectionStatTimeout)
	defer cancel()
	var n int64
	var oldest *int64
	if err := c.pool.QueryRow(ctx, `SELECT count(*), min(created_at_ms) FROM entry_projection_queue`).Scan(&n, &oldest); err != nil {
		ch <- prometheus.NewInvalidMetric(c.backlog, err)
		return
	}
	age := 0.0
	if oldest != nil {
		age = max(float64(time.Now().UnixMilli()-*oldest)/1000, 0)
	}
	ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
}
