package runtime

import "context"

// UnitOfWork is how a use case commits several stores, background jobs and
// notifications as one: everything done through the stores S of one WithinTx call
// commits together or not at all. Each area names the stores it works with as S.
type UnitOfWork[S any] interface {
	// Stores returns the stores outside any transaction; each call commits on its own
	// (a store method that writes several rows still writes them atomically).
	Stores() S
	// WithinTx runs fn with stores that share one transaction. It commits when fn
	// returns nil and rolls back otherwise, with every job enqueued in it: a job exists
	// exactly when the rows it works on do. When the database aborts the
	// transaction because it collided with another one (a deadlock, a serialization
	// failure), fn runs again in a new transaction a bounded number of times, so fn
	// must be safe to run more than once (assign its results, never accumulate them).
	// Errors of the commit itself, and a collision that persists, are
	// SERVICE_UNAVAILABLE.
	WithinTx(ctx context.Context, fn func(ctx context.Context, tx S) error) error
}

// Job is the argument of a background job: IDs and parameters, never content, since
// it is stored in the queue's table, which conversation deletion does not scan. Kind
// names the job's kind; a store's worker of that kind runs it.
type Job interface {
	Kind() string
}

// JobQueue enqueues background jobs. Inside WithinTx the jobs become visible to
// workers when the transaction commits, and vanish with it on rollback.
type JobQueue interface {
	Enqueue(ctx context.Context, jobs ...Job) error
}

// OperationJob runs one operation (deletion, retention, ...) to its end.
type OperationJob struct {
	TenantID    string `json:"tenantId"`
	ProjectID   string `json:"projectId"`
	OperationID string `json:"operationId"`
}

// Kind implements Job.
func (OperationJob) Kind() string { return "agent_context_operation" }

func NewOperationJob(scope Scope, id string) OperationJob {
	return OperationJob{TenantID: scope.TenantID, ProjectID: scope.ProjectID, OperationID: id}
}
