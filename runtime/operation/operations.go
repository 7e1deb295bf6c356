package operation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// Stores are the stores of operations, deletion and retention.
type Stores struct {
	Operations    OperationStore
	Conversations ConversationStore
	Jobs          runtime.JobQueue
}

// OperationStore is the storage the operation use cases and their background jobs
// need. Every method is confined to one scope (ScheduleRetention walks them all); an
// operation of another scope is NOT_FOUND exactly like a missing one. A job step is one
// transaction that also records its progress, so a step interrupted by a crash left
// nothing behind and a step that committed is never counted twice.
type OperationStore interface {
	// CreateOperations stores ops as pending operations. Their jobs are the caller's
	// to enqueue in the same transaction. Errors: SERVICE_UNAVAILABLE.
	CreateOperations(ctx context.Context, ops []NewOperation) error
	// Operation returns one operation. Errors: NOT_FOUND, SERVICE_UNAVAILABLE.
	Operation(ctx context.Context, scope runtime.Scope, id string) (contract.Operation, error)
	// ConversationDeletion returns the deletion operation of a conversation. Errors:
	// NOT_FOUND (none yet), SERVICE_UNAVAILABLE.
	ConversationDeletion(ctx context.Context, scope runtime.Scope, conversationID string) (contract.Operation, error)
	// RestartOperation moves a failed operation back to pending, without its error,
	// and returns it; its job is the caller's to enqueue. An operation in another state
	// is returned unchanged. Errors: NOT_FOUND, SERVICE_UNAVAILABLE.
	RestartOperation(ctx context.Context, scope runtime.Scope, id string, nowMs int64) (contract.Operation, error)
	// MaintenanceCounts counts the scope's pending and running operations and those
	// that failed at or after failedSinceMs, and returns when the scope's latest
	// succeeded retention run (dry runs excluded) completed. Errors:
	// SERVICE_UNAVAILABLE.
	MaintenanceCounts(ctx context.Context, scope runtime.Scope, failedSinceMs int64) (counts contract.OperationCounts, lastRetentionMs *int64, err error)
	// RecentOperations returns up to limit of the scope's operations, the newest
	// created first. Errors: SERVICE_UNAVAILABLE.
	RecentOperations(ctx context.Context, scope runtime.Scope, limit int) ([]contract.Operation, error)
	// RecordCounts counts the scope's records, each count stopping at bound (a count
	// of bound means "bound or more"); entries by their stored status. Errors:
	// SERVICE_UNAVAILABLE.
	RecordCounts(ctx context.Context, scope runtime.Scope, bound, nowMs int64) (RecordCounts, error)

	// StartOperation moves a pending operation to running and returns it; one that
	// is already running (a job resumed after a crash) stays running, and a finished
	// one is returned unchanged. Errors: NOT_FOUND, SERVICE_UNAVAILABLE.
	StartOperation(ctx context.Context, scope runtime.Scope, id string, nowMs int64) (contract.Operation, error)
	// DeleteConversationStep removes rows of the conversation from the
	// per-conversation tables, within bounds, and adds them to the operation's
	// progress. When none remained it marks the operation succeeded and reports
	// done. An operation that is no longer running is done without any change.
	DeleteConversationStep(ctx context.Context, scope runtime.Scope, operationID, conversationID string, bounds StepBounds, nowMs int64) (done bool, err error)
	// RetentionStep deletes (or, in a dry run, counts) the next messages plan
	// selects, within bounds, after the operation's cursor, and advances the cursor
	// and the counts. When none is left it marks the operation succeeded with its
	// RetentionResult and reports done. An operation that is no longer running is
	// done without any change.
	RetentionStep(ctx context.Context, scope runtime.Scope, operationID string, plan RetentionPlan, bounds StepBounds, nowMs int64) (done bool, err error)
	// FailOperation marks a pending or running operation failed with opErr.
	FailOperation(ctx context.Context, scope runtime.Scope, id string, opErr contract.OperationError, nowMs int64) error

	// DueRetentionScopes examines up to limit scopes that hold messages, in order
	// after the scope after (nil: from the first), and returns those that have had
	// no default-policy retention created at or after sinceMs and have none pending
	// or running, and the last scope examined (nil when none was left).
	DueRetentionScopes(ctx context.Context, after *runtime.Scope, sinceMs int64, limit int) (due []runtime.Scope, last *runtime.Scope, err error)
}

// RecordCounts are how many records a scope holds. Counting every row of a large
// scope would read all of it, so each count stops at a bound; Bound says where, and a
// count equal to it means that many or more. Entries count by their stored status:
// an active entry whose expiresAt has passed counts as active (recall and the lists
// treat it as expired).
type RecordCounts struct {
	Bound         int64
	Conversations int64
	Messages      int64
	Windows       int64
	Invocations   int64
	// Entries maps each entry status (contract.EntryStatuses) to its count.
	Entries map[string]int64
}

// AtLeast reports whether n is a count that stopped at the bound.
func (c RecordCounts) AtLeast(n int64) bool { return n >= c.Bound }

// DefaultCountBound is where the record counts stop. A count reads one index entry
// per record counted; the overview's eight counts to 1,000 read at most 8,000, a few
// milliseconds, and "1,000 or more" is what a debugging operator needs to know of a
// large scope. Exact totals would need running counters that every write updates.
const DefaultCountBound = 1_000

// MaxRecentOperations bounds a list of recent operations.
const MaxRecentOperations = 100

// NewOperation is an operation to store with what its job needs besides its request.
type NewOperation struct {
	Scope     runtime.Scope
	Operation contract.Operation
	// ConversationID is the conversation a deletion removes; empty for other kinds.
	ConversationID string
	// DefaultPolicy marks a run of the configured default retention policy.
	DefaultPolicy bool
	DryRun        bool
}

// StepBounds bound the work of one job step, and so the length of its transaction
// and the time it holds locks: at most Rows rows, holding at most about Bytes bytes
// as stored, and no statement longer than Timeout. Bytes matter as much as rows,
// because one row may hold megabytes (a window item up to 4 MiB, a message up to
// 1 MiB): a thousand of them would make a step of gigabytes that outlives the job's
// timeout. A step always takes at least one row, so it progresses even past a row
// larger than Bytes.
type StepBounds struct {
	Rows  int
	Bytes int64
	// Timeout bounds every statement of a step (0: the connection's own bound). The
	// job queue's timeout of a run must exceed it, so that a statement never outlives
	// the run that waits for it.
	Timeout time.Duration
}

// WithDefaults fills the row and byte bounds b leaves at 0 with the defaults.
func (b StepBounds) WithDefaults() StepBounds {
	if b.Rows <= 0 {
		b.Rows = DefaultOperationBatch
	}
	if b.Bytes <= 0 {
		b.Bytes = DefaultOperationBatchBytes
	}
	return b
}

// SchemaInfo reports the database's applied and newest known schema versions.
type SchemaInfo interface {
	Versions(ctx context.Context) (current, latest int64, err error)
}

// MaintenanceConfig configures the operation use cases.
type MaintenanceConfig struct {
	DB     runtime.UnitOfWork[Stores]
	Schema SchemaInfo
	Clock  runtime.Clock
	// Logger records why operations failed (their error carries only a safe message).
	Logger *slog.Logger
	// DefaultMaxAge is the default retention policy that runs periodically in every
	// scope holding messages; 0 means none.
	DefaultMaxAge time.Duration
	// BatchSize bounds the rows one job step touches (default 1000), BatchBytes the
	// bytes they hold (default 32 MiB) and StepTimeout its statements (default:
	// the connection's statement timeout); see StepBounds.
	BatchSize   int
	BatchBytes  int64
	StepTimeout time.Duration
	// Projection reports the vector projection in the status (nil: zero values), and
	// Rebuilds runs vector_rebuild operations (nil: they fail); Projection does both.
	Projection ProjectionReporter
	Rebuilds   RebuildRunner
	// Exports runs export and advanced operations (nil: they fail); Exports does.
	Exports StepRunner
}

// ProjectionReporter reports a scope's vector projection.
type ProjectionReporter interface {
	Status(ctx context.Context, scope runtime.Scope) (contract.VectorProjectionStatus, error)
}

// RebuildRunner runs vector_rebuild operations: RebuildStep returns an operation's
// step, or a permanent error when the operation cannot run.
type RebuildRunner interface {
	RebuildStep(op contract.Operation) (func(ctx context.Context, scope runtime.Scope, nowMs int64) (bool, error), error)
}

// StepRunner runs operations of the kinds it knows: Step returns an operation's step,
// or a permanent error when the operation cannot run.
type StepRunner interface {
	Step(op contract.Operation) (func(ctx context.Context, scope runtime.Scope, nowMs int64) (bool, error), error)
}

// Maintenance holds the use cases of conversation deletion, retention, operation lookup
// and maintenance status (docs/operations.md), and runs the work of their jobs.
type Maintenance struct {
	db            runtime.UnitOfWork[Stores]
	store         OperationStore
	schema        SchemaInfo
	clock         runtime.Clock
	log           *slog.Logger
	defaultMaxAge time.Duration
	bounds        StepBounds
	projection    ProjectionReporter
	rebuilds      RebuildRunner
	exports       StepRunner
}

// Default bounds of one job step.
const (
	DefaultOperationBatch      = 1000
	DefaultOperationBatchBytes = 32 << 20
)

// NewMaintenance returns the operation use cases.
func NewMaintenance(cfg MaintenanceConfig) *Maintenance {
	o := &Maintenance{db: cfg.DB, store: cfg.DB.Stores().Operations, schema: cfg.Schema, clock: cfg.Clock,
		log: cfg.Logger, defaultMaxAge: cfg.DefaultMaxAge,
		bounds:     StepBounds{Rows: cfg.BatchSize, Bytes: cfg.BatchBytes, Timeout: cfg.StepTimeout},
		projection: cfg.Projection, rebuilds: cfg.Rebuilds, exports: cfg.Exports}
	if o.clock == nil {
		o.clock = runtime.SystemClock{}
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	o.bounds = o.bounds.WithDefaults()
	return o
}

// pendingOperation returns a pending operation created now with request echoed.
func (o *Maintenance) pendingOperation(kind string, request any) (contract.Operation, error) {
	return PendingOperation(kind, request, o.clock.Now())
}

// PendingOperation returns a pending operation created at t with request echoed.
func PendingOperation(kind string, request any, t time.Time) (contract.Operation, error) {
	echo, err := json.Marshal(request)
	if err != nil {
		return contract.Operation{}, fmt.Errorf("encode the operation request: %w", err)
	}
	now := t.UnixMilli()
	return contract.Operation{
		ID:          NewOperationID(),
		Kind:        kind,
		State:       contract.OperationPending,
		CreatedAtMs: now,
		UpdatedAtMs: now,
		Request:     echo,
	}, nil
}

// NewOperationID returns a new operation ID: "op-" and a UUIDv7.
func NewOperationID() string { return "op-" + runtime.NewID() }

// Get returns an operation of the caller's scope. Any operation may be read with
// context:admin; with messages:delete only, deletion and retention operations.
func (o *Maintenance) Get(ctx context.Context, p runtime.Principal, req *contract.GetOperationRequest) (*contract.OperationResponse, error) {
	if err := runtime.ValidateID("operationId", req.OperationID); err != nil {
		return nil, err
	}
	op, err := o.store.Operation(ctx, p.Scope, req.OperationID)
	if err != nil {
		return nil, err
	}
	if op.Kind != contract.OperationConversationDelete && op.Kind != contract.OperationRetention && !p.Can(contract.CapContextAdmin) {
		return nil, runtime.Forbidden(contract.CapContextAdmin)
	}
	return &contract.OperationResponse{Operation: op}, nil
}

// Status reports the maintenance state of the caller's scope.
func (o *Maintenance) Status(ctx context.Context, scope runtime.Scope) (*contract.MaintenanceStatus, error) {
	now := o.clock.Now()
	counts, lastRun, err := o.store.MaintenanceCounts(ctx, scope, now.Add(-24*time.Hour).UnixMilli())
	if err != nil {
		return nil, err
	}
	current, latest, err := o.schema.Versions(ctx)
	if err != nil {
		return nil, err
	}
	st := &contract.MaintenanceStatus{
		Operations: counts,
		Retention:  contract.RetentionStatus{LastRunAtMs: lastRun},
		Database:   contract.DatabaseStatus{OK: current >= latest, SchemaVersion: current},
	}
	if o.projection != nil {
		if st.VectorProjection, err = o.projection.Status(ctx, scope); err != nil {
			return nil, err
		}
	}
	if o.defaultMaxAge > 0 {
		ms := o.defaultMaxAge.Milliseconds()
		st.Retention.DefaultMaxAgeMs = &ms
	}
	return st, nil
}

// RecentOperations returns up to limit (1 – MaxRecentOperations) of the scope's
// operations, the newest created first.
func (o *Maintenance) RecentOperations(ctx context.Context, scope runtime.Scope, limit int) ([]contract.Operation, error) {
	if limit < 1 || limit > MaxRecentOperations {
		return nil, runtime.Invalid("limit", "limit must be from 1 to %d", MaxRecentOperations)
	}
	return o.store.RecentOperations(ctx, scope, limit)
}

// RecordCounts counts the scope's conversations, messages, windows, model
// invocations and entries by status as clients read them now (an active entry past
// its expiry is expired), each up to DefaultCountBound, so that the read stays
// bounded however large the scope is.
func (o *Maintenance) RecordCounts(ctx context.Context, scope runtime.Scope) (RecordCounts, error) {
	return o.store.RecordCounts(ctx, scope, DefaultCountBound, o.clock.Now().UnixMilli())
}

// RunOperation does the work of an operation's job: it starts the operation and runs
// steps until the work is finished or deadline has passed (at least one step either
// way), so that one run of a job stays short and the queue can hand it to another
// replica in between. It reports whether the operation is finished. An error is
// transient (the job should run again later): steps are idempotent, and one that failed
// left nothing behind.
func (o *Maintenance) RunOperation(ctx context.Context, scope runtime.Scope, id string, deadline time.Time) (bool, error) {
	op, err := o.store.StartOperation(ctx, scope, id, o.clock.Now().UnixMilli())
	if runtime.ErrorCode(err) == contract.CodeNotFound {
		return true, nil // nothing left to do for a job whose operation is gone
	}
	if err != nil {
		return false, err
	}
	if op.State != contract.OperationRunning {
		return true, nil
	}
	step, err := o.stepFunc(op)
	if err != nil {
		return true, o.FailOperation(ctx, scope, id, err)
	}
	for {
		done, err := step(ctx, scope, op.ID, o.clock.Now().UnixMilli())
		if err != nil || done {
			return done, err
		}
		if !o.clock.Now().Before(deadline) {
			return false, nil
		}
	}
}

type stepFunc func(ctx context.Context, scope runtime.Scope, id string, nowMs int64) (bool, error)

// stepFunc returns the step of op's kind, or a permanent error when op cannot run.
func (o *Maintenance) stepFunc(op contract.Operation) (stepFunc, error) {
	switch op.Kind {
	case contract.OperationConversationDelete:
		var req contract.DeleteConversationRequest
		if err := json.Unmarshal(op.Request, &req); err != nil || req.ConversationID == "" {
			return nil, fmt.Errorf("decode the request of operation %s: %v", op.ID, err)
		}
		return func(ctx context.Context, scope runtime.Scope, id string, nowMs int64) (bool, error) {
			return o.store.DeleteConversationStep(ctx, scope, id, req.ConversationID, o.bounds, nowMs)
		}, nil
	case contract.OperationRetention:
		plan, err := retentionPlan(op)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, scope runtime.Scope, id string, nowMs int64) (bool, error) {
			return o.store.RetentionStep(ctx, scope, id, plan, o.bounds, nowMs)
		}, nil
	case contract.OperationVectorRebuild:
		if o.rebuilds != nil {
			return scopeStep(o.rebuilds.RebuildStep(op))
		}
	case contract.OperationExport, contract.OperationAdvanced:
		if o.exports != nil {
			return scopeStep(o.exports.Step(op))
		}
	}
	return nil, fmt.Errorf("no job runs operations of kind %q", op.Kind)
}

// scopeStep is the stepFunc of a runner's step, which knows its operation already.
func scopeStep(step func(ctx context.Context, scope runtime.Scope, nowMs int64) (bool, error), err error) (stepFunc, error) {
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, scope runtime.Scope, _ string, nowMs int64) (bool, error) {
		return step(ctx, scope, nowMs)
	}, nil
}

// FailOperation marks an operation failed because of cause. The operation's error
// carries cause's code and client-safe message; an internal cause is reported as
// INTERNAL without its text, which goes to the log only.
func (o *Maintenance) FailOperation(ctx context.Context, scope runtime.Scope, id string, cause error) error {
	opErr := contract.OperationError{Code: contract.CodeInternal, Message: "the operation failed"}
	var re *runtime.Error
	if errors.As(cause, &re) && re.Code != contract.CodeInternal {
		opErr = contract.OperationError{Code: re.Code, Message: re.Message}
	}
	o.log.ErrorContext(ctx, "operation failed", slog.String("operation_id", id),
		slog.String("tenant", scope.TenantID), slog.String("project", scope.ProjectID), slog.Any("error", cause))
	return o.store.FailOperation(ctx, scope, id, opErr, o.clock.Now().UnixMilli())
}

// StepStore runs the steps of operations whose work runtime drives (exports and the
// advanced operations), inside a unit of work.
type StepStore interface {
	// LockStep bounds the transaction's statements by timeout (0: unchanged), locks
	// the operation's row until the transaction ends and decodes its cursor into
	// cursor; it reports whether the operation is still running. Errors:
	// SERVICE_UNAVAILABLE.
	LockStep(ctx context.Context, scope runtime.Scope, id string, timeout time.Duration, cursor any) (running bool, err error)
	// SaveStep stores the operation's cursor and adds done to its progress.
	SaveStep(ctx context.Context, scope runtime.Scope, id string, cursor any, done int64, nowMs int64) error
	// SucceedStep marks a pending or running operation succeeded with result, adding
	// done to its progress, which becomes its total.
	SucceedStep(ctx context.Context, scope runtime.Scope, id string, result any, done int64, nowMs int64) error
}
