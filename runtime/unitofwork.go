package runtime

import "context"

// Stores are the stores a use case works with, all over one database handle: those
// that UnitOfWork.Stores returns run each call on its own, those that WithinTx hands to
// its function share its transaction. A new area adds its store here, so that any use
// case can commit it together with the others.
type Stores struct {
	Messages      MessageStore
	Conversations ConversationStore
	Windows       WindowStore
	Operations    OperationStore
	Costs         CostStore
	Entries       EntryStore
	Recall        RecallStore
	Projection    ProjectionStore
	Jobs          JobQueue
	// Agents, AgentMessages, Tasks and Events are agent-to-agent coordination
	// (07-a2a.md); Events is also where other areas announce their changes.
	Agents        AgentStore
	AgentMessages AgentMessageStore
	Tasks         TaskStore
	Events        EventStore
	// Envelopes are the idempotency records of POST /handoff.
	Envelopes EnvelopeStore
	// Exports keeps export artifacts and walks records for exports and the advanced
	// operations; Steps runs the steps of operations runtime drives.
	Exports ExportStore
	Steps   StepStore
}

// UnitOfWork is how a use case commits several stores, background jobs and
// notifications as one: everything done through the Stores of one WithinTx call
// commits together or not at all.
type UnitOfWork interface {
	// Stores returns the stores outside any transaction; each call commits on its own
	// (a store method that writes several rows still writes them atomically).
	Stores() Stores
	// WithinTx runs fn with stores that share one transaction. It commits when fn
	// returns nil and rolls back otherwise, with every job enqueued in it: a job exists
	// exactly when the rows it works on do. Errors of the commit itself are
	// SERVICE_UNAVAILABLE.
	WithinTx(ctx context.Context, fn func(ctx context.Context, tx Stores) error) error
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

// ConversationStore keeps conversation heads: the row that exists once a conversation
// was named, allocates its sequences and carries its tombstone.
type ConversationStore interface {
	// Tombstone marks the conversation deleted (creating its head when it never
	// existed; an earlier tombstone keeps its time) and holds its head locked until
	// the transaction ends, so that no append, window or invocation of it commits
	// after the tombstone. Errors: SERVICE_UNAVAILABLE.
	Tombstone(ctx context.Context, scope Scope, conversationID string, nowMs int64) error
}
