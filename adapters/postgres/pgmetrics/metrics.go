package pgmetrics

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Namespace is the service's metric prefix (docs/observability.md).
const Namespace = "agent_context"

// PoolCollector exports the connection pool's statistics, read from pool.Stat() at
// each scrape (no bookkeeping on the query path).
type PoolCollector struct {
	pool *pgxpool.Pool

	acquired, idle, constructing, total, max   *prometheus.Desc
	acquires, acquireSeconds, emptyAcquires    *prometheus.Desc
	emptyAcquireWaitSeconds, canceledAcquires  *prometheus.Desc
	newConns, lifetimeDestroyed, idleDestroyed *prometheus.Desc
}

// NewPoolCollector returns the collector of pool; register it once.
func NewPoolCollector(pool *pgxpool.Pool) *PoolCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "db_pool", name), help, nil, nil)
	}
	return &PoolCollector{
		pool:                    pool,
		acquired:                d("acquired_connections", "Connections in use by a query or transaction now."),
		idle:                    d("idle_connections", "Open connections waiting for work now."),
		constructing:            d("constructing_connections", "Connections being opened now."),
		total:                   d("connections", "Open connections now (acquired + idle + constructing)."),
		max:                     d("max_connections", "The pool's bound."),
		acquires:                d("acquires_total", "Successful acquisitions of a connection."),
		acquireSeconds:          d("acquire_seconds_total", "Time spent acquiring connections, successful acquisitions only."),
		emptyAcquires:           d("empty_acquires_total", "Acquisitions that had to wait because no connection was idle."),
		emptyAcquireWaitSeconds: d("empty_acquire_wait_seconds_total", "Time spent waiting in acquisitions that found no idle connection."),
		canceledAcquires:        d("canceled_acquires_total", "Acquisitions given up because their context ended (e.g. the client went away)."),
		newConns:                d("new_connections_total", "Connections opened."),
		lifetimeDestroyed:       d("max_lifetime_closed_total", "Connections closed for reaching their maximum lifetime."),
		idleDestroyed:           d("max_idle_closed_total", "Connections closed for idling too long."),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.acquired, c.idle, c.constructing, c.total, c.max, c.acquires,
		c.acquireSeconds, c.emptyAcquires, c.emptyAcquireWaitSeconds, c.canceledAcquires, c.newConns,
		c.lifetimeDestroyed, c.idleDestroyed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(c.acquired, float64(s.AcquiredConns()))
	gauge(c.idle, float64(s.IdleConns()))
	gauge(c.constructing, float64(s.ConstructingConns()))
	gauge(c.total, float64(s.TotalConns()))
	gauge(c.max, float64(s.MaxConns()))
	counter(c.acquires, float64(s.AcquireCount()))
	counter(c.acquireSeconds, s.AcquireDuration().Seconds())
	counter(c.emptyAcquires, float64(s.EmptyAcquireCount()))
	counter(c.emptyAcquireWaitSeconds, s.EmptyAcquireWaitTime().Seconds())
	counter(c.canceledAcquires, float64(s.CanceledAcquireCount()))
	counter(c.newConns, float64(s.NewConnsCount()))
	counter(c.lifetimeDestroyed, float64(s.MaxLifetimeDestroyCount()))
	counter(c.idleDestroyed, float64(s.MaxIdleDestroyCount()))
}

// jobStates are River's states of a job not yet finished: the queue's depth (and the
// states queueStatsSQL counts).
var jobStates = []string{"available", "pending", "retryable", "running", "scheduled"}

// queueStatTimeout bounds a scrape's look at the job table.
const queueStatTimeout = 2 * time.Second

// JobQueueCollector exports the depth of the job queue by queue and state, and the age
// of the oldest job waiting to run, counted in the database at each scrape. Every
// replica reports the same queue: aggregate with max, not sum.
type JobQueueCollector struct {
	pool       *pgxpool.Pool
	jobs       *prometheus.Desc
	oldestWait *prometheus.Desc
}

// NewJobQueueCollector returns the queue collector of the database behind pool.
func NewJobQueueCollector(pool *pgxpool.Pool) *JobQueueCollector {
	return &JobQueueCollector{
		pool: pool,
		jobs: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "jobs", "queued"),
			"Jobs not yet finished, by queue and River state (available = waiting for a worker).",
			[]string{"queue", "state"}, nil),
		oldestWait: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "jobs", "oldest_available_age_seconds"),
			"How long the oldest job ready to run has waited for a worker (0 when none waits).",
			[]string{"queue"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *JobQueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.jobs
	ch <- c.oldestWait
}

// queueStatsSQL counts unfinished jobs; river_job's (state, queue, ...) index serves
// the state filter, so the cost follows the backlog, not the finished jobs kept.
const queueStatsSQL = `
SELECT queue, state::text, count(*), greatest(extract(epoch FROM now() - min(scheduled_at)), 0)::float8
FROM river_job
WHERE state IN ('available', 'pending', 'retryable', 'running', 'scheduled')
GROUP BY queue, state`

// Collect implements prometheus.Collector. A failed count is reported as an invalid
// metric, which the metrics endpoint logs and leaves out.
func (c *JobQueueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), queueStatTimeout)
	defer cancel()
	rows, err := c.pool.Query(ctx, queueStatsSQL)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.jobs, err)
		return
	}
	defer rows.Close()
	counts := map[[2]string]float64{}
	oldest := map[string]float64{river.QueueDefault: 0}
	for _, s := range jobStates {
		counts[[2]string{river.QueueDefault, s}] = 0
	}
	for rows.Next() {
		var queue, state string
		var n int64
		var age float64
		if err := rows.Scan(&queue, &state, &n, &age); err != nil {
			ch <- prometheus.NewInvalidMetric(c.jobs, err)
			return
		}
		counts[[2]string{queue, state}] = float64(n)
		if state == "available" {
			oldest[queue] = age
		} else if _, ok := oldest[queue]; !ok {
			oldest[queue] = 0
		}
	}
	if err := rows.Err(); err != nil {
		ch <- prometheus.NewInvalidMetric(c.jobs, err)
		return
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, n, k[0], k[1])
	}
	for queue, age := range oldest {
		ch <- prometheus.MustNewConstMetric(c.oldestWait, prometheus.GaugeValue, age, queue)
	}
}

// JobMetrics is River worker middleware that counts every run of a job by kind and
// outcome and times it.
type JobMetrics struct {
	river.MiddlewareDefaults
	runs     *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

var _ rivertype.WorkerMiddleware = (*JobMetrics)(nil)

// NewJobMetrics returns the job middleware, its metrics registered with reg.
func NewJobMetrics(reg prometheus.Registerer) *JobMetrics {
	f := promauto.With(reg)
	return &JobMetrics{
		runs: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "jobs", Name: "runs_total",
			Help: "Job runs on this replica by kind and outcome: completed, snoozed (more work follows), cancelled (given up), errored (will be retried or discarded), panicked.",
		}, []string{"kind", "outcome"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "jobs", Name: "run_duration_seconds",
			Help:    "Duration of job runs by kind and outcome.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"kind", "outcome"}),
	}
}

// Work implements rivertype.WorkerMiddleware.
func (m *JobMetrics) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) (err error) {
	start := time.Now()
	returned := false
	defer func() {
		outcome := "panicked"
		if returned {
			outcome = jobOutcome(err)
		}
		m.runs.WithLabelValues(job.Kind, outcome).Inc()
		m.duration.WithLabelValues(job.Kind, outcome).Observe(time.Since(start).Seconds())
	}()
	err = doInner(ctx)
	returned = true
	return err
}

func jobOutcome(err error) string {
	var snooze *river.JobSnoozeError
	var cancel *river.JobCancelError
	switch {
	case err == nil:
		return "completed"
	case errors.As(err, &snooze):
		return "snoozed"
	case errors.As(err, &cancel):
		return "cancelled"
	default:
		return "errored"
	}
}
