package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/memory"
)

// The job classes, each a River queue with workers of its own, so that jobs of one
// class never wait behind those of another: a flood of push deliveries to slow
// webhooks leaves embeddings and deletions their workers.
const (
	// QueuePush holds the A2A push deliveries.
	QueuePush = "push"
	// QueueProjection holds the vector projection's jobs and its periodic sweep.
	QueueProjection = "projection"
	// QueueOperations holds the operations' jobs (deletions, retention, exports,
	// imports, rebuilds) and the periodic sweeps that clean up (retention's
	// scheduling, the A2A purge, the export purge).
	QueueOperations = "operations"
)

// JobQueue implements runtime.JobQueue on River, in the transaction of the unit of work
// it was built in (tx): a job is visible to workers exactly when that commits. Outside a
// unit of work (tx nil) a job is enqueued on its own. db is tx, or the pool outside a
// unit of work.
type JobQueue struct {
	tx     pgx.Tx
	db     DBTX
	client *river.Client[pgx.Tx]
}

var _ runtime.JobQueue = (*JobQueue)(nil)

// Enqueue implements runtime.JobQueue, with one statement for all of jobs. A scope's
// projection job is left out while one is waiting to start (see waitingProjections).
func (q *JobQueue) Enqueue(ctx context.Context, jobs ...runtime.Job) error {
	jobs, err := q.waitingProjections(ctx, jobs)
	if err != nil || len(jobs) == 0 {
		return err
	}
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		params[i] = river.InsertManyParams{Args: j, InsertOpts: InsertOpts(j)}
	}
	if q.tx != nil {
		_, err = q.client.InsertManyTx(ctx, q.tx, params)
	} else {
		_, err = q.client.InsertMany(ctx, params)
	}
	return translate(err)
}

// waitingProjections drops from jobs the projection jobs of scopes that already have
// one waiting to start, and repeats: a scope's job claims every queued entry of the
// scope in batches until none is left, so entries posted one per request need not
// each bring a job (one each made the queue, not the embedder, the bottleneck). A
// running job does not count: it may have made its last claim already, and River's
// unique jobs cannot leave running ones out (their states must include running), so
// the check is this query instead. Two transactions enqueuing at once may both insert
// one; the second finds little to claim.
func (q *JobQueue) waitingProjections(ctx context.Context, jobs []runtime.Job) ([]runtime.Job, error) {
	var tenants, projects []string
	for _, j := range jobs {
		if p, ok := j.(memory.ProjectionJob); ok {
			tenants, projects = append(tenants, p.TenantID), append(projects, p.ProjectID)
		}
	}
	if len(tenants) == 0 {
		return jobs, nil
	}
	rows, err := q.db.Query(ctx, `
		SELECT s.tenant, s.project FROM unnest($1::text[], $2::text[]) AS s(tenant, project)
		WHERE EXISTS (SELECT FROM river_job j WHERE j.kind = $3 AND j.state IN ('available', 'scheduled', 'pending')
		                AND j.args @> jsonb_build_object('tenantId', s.tenant, 'projectId', s.project))`,
		tenants, projects, memory.ProjectionJob{}.Kind())
	if err != nil {
		return nil, translate(err)
	}
	waiting := map[memory.ProjectionJob]bool{}
	for rows.Next() {
		var p memory.ProjectionJob
		if err := rows.Scan(&p.TenantID, &p.ProjectID); err != nil {
			rows.Close()
			return nil, translate(err)
		}
		waiting[p] = true
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	kept := jobs[:0:0]
	for _, j := range jobs {
		if p, ok := j.(memory.ProjectionJob); ok {
			if waiting[p] {
				continue
			}
			waiting[p] = true
		}
		kept = append(kept, j)
	}
	return kept, nil
}

// InsertOpts are the queue options of a job's kind, as JobQueue enqueues it: its class
// (queue) and attempts. Kinds not named here (the periodic sweeps) are operations.
func InsertOpts(j river.JobArgs) *river.InsertOpts {
	switch j.(type) {
	case runtime.OperationJob:
		// Attempts beyond the operation's own: a job whose worker died in its last
		// attempt is rescued for another run instead of being discarded by River's
		// rescuer, which would leave the operation running forever.
		return &river.InsertOpts{Queue: QueueOperations, MaxAttempts: OperationMaxAttempts + operationRescueAttempts}
	case memory.ProjectionJob:
		// Attempts back off as attempt⁴ seconds: a provider down for a day is retried
		// through it. A job that gives up leaves its entries queued for the sweep.
		return &river.InsertOpts{Queue: QueueProjection, MaxAttempts: projectionMaxAttempts}
	case a2a.PushJob:
		return &river.InsertOpts{Queue: QueuePush}
	}
	return &river.InsertOpts{Queue: QueueOperations}
}

// OperationMaxAttempts is how often an operation's job may fail before its operation is
// marked failed. River's backoff (attempt⁴ seconds) spreads ten attempts over about
// four hours, so a database outage of that length does not fail the operation.
const OperationMaxAttempts = 10

// operationRescueAttempts is how many more runs River allows, for jobs rescued after a
// crash once the failures used up OperationMaxAttempts.
const operationRescueAttempts = 15

// projectionMaxAttempts is how often a projection job runs before River discards it:
// with River's backoff (attempt⁴ seconds), about a week of a provider outage. Its
// entries stay queued either way, and the sweep enqueues a new job for them.
const projectionMaxAttempts = 25

// DeferTenant makes way in queue for the other tenants: when a job of another tenant
// than tenant is available to start, it moves tenant's available jobs of the queue
// behind them by wait (as River's short snooze does: available, later), and reports
// that it did. Jobs without a tenant (the periodic sweeps) count as tenant "".
// Moving every waiting job of the tenant at once, rather than each as a worker
// fetches it, lets the next fetch reach the other tenants' jobs instead of snoozing
// one of the tenant's at a time through all of them that came first.
func (db *DB) DeferTenant(ctx context.Context, queue, tenant string, wait time.Duration) (bool, error) {
	var others bool
	err := db.Pool.QueryRow(ctx, `
		SELECT EXISTS (SELECT FROM river_job WHERE state = 'available' AND queue = $1 AND scheduled_at <= now()
		                 AND coalesce(args->>'tenantId', '') <> $2)`, queue, tenant).Scan(&others)
	if err != nil || !others {
		return false, translate(err)
	}
	_, err = db.Pool.Exec(ctx, `
		UPDATE river_job SET scheduled_at = now() + $3::bigint * interval '1 millisecond'
		WHERE state = 'available' AND queue = $1 AND scheduled_at <= now() AND coalesce(args->>'tenantId', '') = $2`,
		queue, tenant, wait.Milliseconds())
	return true, translate(err)
}
