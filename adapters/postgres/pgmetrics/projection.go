package pgmetrics

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// projectionStatTimeout bounds a scrape's count of the projection's backlog.
const projectionStatTimeout = 2 * time.Second

// ProjectionCollector exports the vector projection's backlog: the entries of every
// scope written and not yet embedded, how long the oldest has waited, and the stored
// vectors not yet folded into the HNSW graph (recallable, by an exact search), counted in
// the database at most once per refresh interval, whatever the scrape rate. Every replica reports the same figures: aggregate with
// max, not sum. Scopes are not a label (unbounded, and one tenant's figures are not
// another's business); the maintenance status reports a scope's own.
type ProjectionCollector struct {
	pool    *pgxpool.Pool
	backlog *prometheus.Desc
	oldest  *prometheus.Desc
	outside *prometheus.Desc
	stat    *scrapeCache[projectionBacklog]
}

// projectionBacklog is one read of the queue: its length and its oldest entry's time,
// and the vectors outside the graph.
type projectionBacklog struct {
	n       int64
	oldest  *int64
	outside int64
}

var _ prometheus.Collector = (*ProjectionCollector)(nil)

// NewProjectionCollector returns the projection collector of the database behind
// pool, counting at most every refresh (0: DefaultRefresh); register it once.
func NewProjectionCollector(pool *pgxpool.Pool, refresh time.Duration) *ProjectionCollector {
	c := &ProjectionCollector{
		pool: pool,
		backlog: prometheus.NewDesc("agent_context_vector_projection_backlog",
			"Entries written and not yet embedded into the vector projection, all scopes.", nil, nil),
		oldest: prometheus.NewDesc("agent_context_vector_projection_oldest_pending_age_seconds",
			"How long the oldest entry waiting to be embedded has waited (0 when none waits).", nil, nil),
		outside: prometheus.NewDesc("agent_context_vector_projection_unindexed",
			"Vectors stored and not yet folded into the HNSW graph, all scopes: recallable, by an exact search beside the graph.", nil, nil),
	}
	c.stat = newScrapeCache(refresh, c.read)
	return c
}

func (c *ProjectionCollector) read() (projectionBacklog, error) {
	ctx, cancel := context.WithTimeout(context.Background(), projectionStatTimeout)
	defer cancel()
	var b projectionBacklog
	err := c.pool.QueryRow(ctx, `SELECT count(*), min(created_at_ms) FROM entry_projection_queue`).Scan(&b.n, &b.oldest)
	if err != nil {
		return b, err
	}
	rows, err := c.pool.Query(ctx, `SELECT table_name FROM vector_models ORDER BY table_name`)
	if err != nil {
		return b, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(names) == 0 {
		return b, err
	}
	counts := make([]string, len(names))
	for i, n := range names {
		counts[i] = `(SELECT count(*) FROM ` + pgx.Identifier{n}.Sanitize() + ` WHERE NOT indexed)`
	}
	err = c.pool.QueryRow(ctx, `SELECT `+strings.Join(counts, " + ")).Scan(&b.outside)
	return b, err
}

// Describe implements prometheus.Collector.
func (c *ProjectionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.backlog
	ch <- c.oldest
	ch <- c.outside
}

// Collect implements prometheus.Collector. A failed count is reported as an invalid
// metric, which the metrics endpoint logs and leaves out.
func (c *ProjectionCollector) Collect(ch chan<- prometheus.Metric) {
	b, err := c.stat.get()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.backlog, err)
		return
	}
	age := 0.0
	if b.oldest != nil {
		age = max(float64(time.Now().UnixMilli()-*b.oldest)/1000, 0)
	}
	ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(b.n))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(c.outside, prometheus.GaugeValue, float64(b.outside))
}
