package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// JobQueue implements runtime.JobQueue on River, in the transaction (or savepoint) of
// the handle it was built over: a job is visible to workers exactly when that commits.
type JobQueue struct {
	db     DBTX
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
		params[i] = river.InsertManyParams{Args: j, InsertOpts: insertOpts(j)}
	}
	var err error
	if tx, ok := q.db.(pgx.Tx); ok {
		_, err = q.client.InsertManyTx(ctx, tx, params)
	} else {
		_, err = q.client.InsertMany(ctx, params)
	}
	return translate(err)
}

// insertOpts are the queue options of a job's kind.
func insertOpts(j runtime.Job) *river.InsertOpts {
	switch j.(type) {
	case runtime.OperationJob:
		// Attempts beyond the operation's own: a job whose worker died in its last
		// attempt is rescued for another run instead of being discarded by River's
		// rescuer, which would leave the operation running forever.
		return &river.InsertOpts{MaxAttempts: operationMaxAttempts + operationRescueAttempts}
	case memory.ProjectionJob:
		// Attempts back off as attempt⁴ seconds: a provider down for a day is retried
		// through it. A job that gives up leaves its entries queued for the sweep.
		return &river.InsertOpts{MaxAttempts: projectionMaxAttempts}
	}
	return nil
}
