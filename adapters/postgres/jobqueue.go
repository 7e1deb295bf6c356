package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// JobQueue implements runtime.JobQueue on River, in the transaction of the unit of work
// it was built in (tx): a job is visible to workers exactly when that commits. Outside a
// unit of work (tx nil) a job is enqueued on its own.
type JobQueue struct {
	tx     pgx.Tx
	client *river.Client[pgx.Tx]
}

var _ runtime.JobQueue = (*JobQueue)(nil)

// Enqueue implements runtime.JobQueue, with one statement for all of jobs.
func (q *JobQueue) Enqueue(ctx context.Context, jobs ...runtime.Job) error {
	if len(jobs) == 0 {
		return nil
	}
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		params[i] = river.InsertManyParams{Args: j, InsertOpts: InsertOpts(j)}
	}
	var err error
	if q.tx != nil {
		_, err = q.client.InsertManyTx(ctx, q.tx, params)
	} else {
		_, err = q.client.InsertMany(ctx, params)
	}
	return translate(err)
}

// InsertOpts are the queue options of a job's kind, as JobQueue enqueues it.
func InsertOpts(j runtime.Job) *river.InsertOpts {
	switch j.(type) {
	case runtime.OperationJob:
		// Attempts beyond the operation's own: a job whose worker died in its last
		// attempt is rescued for another run instead of being discarded by River's
		// rescuer, which would leave the operation running forever.
		return &river.InsertOpts{MaxAttempts: OperationMaxAttempts + operationRescueAttempts}
	case memory.ProjectionJob:
		// Attempts back off as attempt⁴ seconds: a provider down for a day is retried
		// through it. A job that gives up leaves its entries queued for the sweep.
		return &river.InsertOpts{MaxAttempts: projectionMaxAttempts}
	}
	return nil
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
