package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/operation"
)

// OperationStore keeps operations. Their jobs are enqueued by the use case in the same
// transaction (runtime.UnitOfWork), so a job exists exactly when its operation does.
type OperationStore struct {
	db DBTX
}

var _ operation.OperationStore = (*OperationStore)(nil)

const operationColumns = `operation_id, kind, state, created_at_ms, updated_at_ms, started_at_ms,
	completed_at_ms, progress_done, progress_total, request, result, error_code, error_message`

func scanOperation(row pgx.Row) (contract.Operation, error) {
	var op contract.Operation
	var request, result []byte
	var code, message *string
	err := row.Scan(&op.ID, &op.Kind, &op.State, &op.CreatedAtMs, &op.UpdatedAtMs, &op.StartedAtMs,
		&op.CompletedAtMs, &op.Progress.Done, &op.Progress.Total, &request, &result, &code, &message)
	if errors.Is(err, pgx.ErrNoRows) {
		return contract.Operation{}, runtime.NotFound("operationId", "operation")
	}
	if err != nil {
		return contract.Operation{}, translate(err)
	}
	op.Request = request
	op.Result = result
	if code != nil && message != nil {
		op.Error = &contract.OperationError{Code: *code, Message: *message}
	}
	return op, nil
}

// CreateOperations implements operation.OperationStore with one statement.
func (s *OperationStore) CreateOperations(ctx context.Context, ops []operation.NewOperation) error {
	n := len(ops)
	tenants, projects, ids, kinds := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	conversations, requests := make([]*string, n), make([]string, n)
	defaults, dryRuns, created := make([]bool, n), make([]bool, n), make([]int64, n)
	for i, o := range ops {
		tenants[i], projects[i], ids[i], kinds[i] = o.Scope.TenantID, o.Scope.ProjectID, o.Operation.ID, o.Operation.Kind
		if o.ConversationID != "" {
			conversations[i] = &o.ConversationID
		}
		requests[i], defaults[i], dryRuns[i], created[i] = string(o.Operation.Request), o.DefaultPolicy, o.DryRun, o.Operation.CreatedAtMs
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO operations (tenant_id, project_id, operation_id, kind, state, conversation_id, request,
		                        default_policy, dry_run, created_at_ms, updated_at_ms)
		SELECT t, p, id, k, 'pending', c, r::jsonb, d, dr, ms, ms
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bool[], $8::bool[], $9::bigint[])
		     AS u(t, p, id, k, c, r, d, dr, ms)`,
		tenants, projects, ids, kinds, conversations, requests, defaults, dryRuns, created)
	return translate(err)
}

// ConversationDeletion implements operation.OperationStore.
func (s *OperationStore) ConversationDeletion(ctx context.Context, scope runtime.Scope, conversationID string) (contract.Operation, error) {
	return scanOperation(s.db.QueryRow(ctx, `
		SELECT `+operationColumns+` FROM operations
		WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = $3 AND kind = 'conversation_delete'`,
		scope.TenantID, scope.ProjectID, conversationID))
}

// RestartOperation implements operation.OperationStore. Progress and cursor stay: the
// steps that committed before the failure are not done again.
func (s *OperationStore) RestartOperation(ctx context.Context, scope runtime.Scope, id string, nowMs int64) (contract.Operation, error) {
	op, err := scanOperation(s.db.QueryRow(ctx, `
		UPDATE operations
		SET state = 'pending', error_code = NULL, error_message = NULL, completed_at_ms = NULL, updated_at_ms = $4
		WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3 AND state = 'failed'
		RETURNING `+operationColumns,
		scope.TenantID, scope.ProjectID, id, nowMs))
	if runtime.ErrorCode(err) == contract.CodeNotFound {
		return s.Operation(ctx, scope, id)
	}
	return op, err
}

// Operation implements operation.OperationStore.
func (s *OperationStore) Operation(ctx context.Context, scope runtime.Scope, id string) (contract.Operation, error) {
	return scanOperation(s.db.QueryRow(ctx, `
		SELECT `+operationColumns+` FROM operations
		WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3`,
		scope.TenantID, scope.ProjectID, id))
}

// MaintenanceCounts implements operation.OperationStore.
func (s *OperationStore) MaintenanceCounts(ctx context.Context, scope runtime.Scope, failedSinceMs int64) (contract.OperationCounts, *int64, error) {
	var c contract.OperationCounts
	var lastRun *int64
	err := s.db.QueryRow(ctx, `
		SELECT
			(SELECT count(*) FROM operations WHERE tenant_id = $1 AND project_id = $2 AND state = 'pending'),
			(SELECT count(*) FROM operations WHERE tenant_id = $1 AND project_id = $2 AND state = 'running'),
			(SELECT count(*) FROM operations WHERE tenant_id = $1 AND project_id = $2 AND state = 'failed'
			                                   AND completed_at_ms >= $3),
			(SELECT max(completed_at_ms) FROM operations
			 WHERE tenant_id = $1 AND project_id = $2
			   AND kind = 'retention' AND state = 'succeeded' AND NOT dry_run)`,
		scope.TenantID, scope.ProjectID, failedSinceMs).Scan(&c.Pending, &c.Running, &c.FailedLast24h, &lastRun)
	if err != nil {
		return contract.OperationCounts{}, nil, translate(err)
	}
	return c, lastRun, nil
}

// RecentOperations implements operation.OperationStore: the head of a backward walk
// of operations_by_created.
func (s *OperationStore) RecentOperations(ctx context.Context, scope runtime.Scope, limit int) ([]contract.Operation, error) {
	rows, err := s.db.Query(ctx, `
		SELECT `+operationColumns+` FROM operations
		WHERE tenant_id = $1 AND project_id = $2
		ORDER BY created_at_ms DESC, operation_id
		LIMIT $3`, scope.TenantID, scope.ProjectID, limit)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := []contract.Operation{}
	for rows.Next() {
		op, err := scanOperation(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, translate(rows.Err())
}

// RecordCounts implements operation.OperationStore. Each count is a walk of at most
// bound index entries of the scope (conversations_by_activity, messages' key,
// context_windows_by_created, model_invocations_by_time,
// context_entries_by_status_created), so the statement reads about 8 × bound entries
// however large the scope is. Entries count as clients read them at nowMs: an active
// entry whose expiry has passed is expired (found through context_entries_by_expiry),
// so the active count also skips those, which the purge of expired entries keeps few.
// Records of a conversation whose deletion is still under way count until they are
// gone.
func (s *OperationStore) RecordCounts(ctx context.Context, scope runtime.Scope, bound, nowMs int64) (operation.RecordCounts, error) {
	out := operation.RecordCounts{Bound: bound, Entries: make(map[string]int64, len(contract.EntryStatuses))}
	var active, superseded, merged, expired int64
	err := s.db.QueryRow(ctx, `
		SELECT
			(SELECT count(*) FROM (SELECT FROM conversations
			  WHERE tenant_id = $1 AND project_id = $2 AND deleted_at_ms IS NULL
			  ORDER BY coalesce(last_at_ms, created_at_ms) DESC LIMIT $3) c),
			(SELECT count(*) FROM (SELECT FROM messages WHERE tenant_id = $1 AND project_id = $2 LIMIT $3) m),
			(SELECT count(*) FROM (SELECT FROM context_windows WHERE tenant_id = $1 AND project_id = $2 LIMIT $3) w),
			(SELECT count(*) FROM (SELECT FROM model_invocations WHERE tenant_id = $1 AND project_id = $2 LIMIT $3) i),
			(SELECT count(*) FROM (SELECT FROM context_entries
			  WHERE tenant_id = $1 AND project_id = $2 AND status = 'active'
			    AND (expires_at_ms IS NULL OR expires_at_ms > $4) LIMIT $3) e),
			(SELECT count(*) FROM (SELECT FROM context_entries
			  WHERE tenant_id = $1 AND project_id = $2 AND status = 'superseded' LIMIT $3) e),
			(SELECT count(*) FROM (SELECT FROM context_entries
			  WHERE tenant_id = $1 AND project_id = $2 AND status = 'merged' LIMIT $3) e),
			(SELECT count(*) FROM (
			  (SELECT FROM context_entries WHERE tenant_id = $1 AND project_id = $2 AND status = 'expired' LIMIT $3)
			  UNION ALL
			  (SELECT FROM context_entries WHERE tenant_id = $1 AND project_id = $2 AND status = 'active'
			     AND expires_at_ms <= $4 LIMIT $3)
			  LIMIT $3) e)`,
		scope.TenantID, scope.ProjectID, bound, nowMs).Scan(&out.Conversations, &out.Messages, &out.Windows, &out.Invocations,
		&active, &superseded, &merged, &expired)
	if err != nil {
		return operation.RecordCounts{}, translate(err)
	}
	out.Entries[contract.EntryActive], out.Entries[contract.EntrySuperseded] = active, superseded
	out.Entries[contract.EntryMerged], out.Entries[contract.EntryExpired] = merged, expired
	return out, nil
}

// StartOperation implements operation.OperationStore.
func (s *OperationStore) StartOperation(ctx context.Context, scope runtime.Scope, id string, nowMs int64) (contract.Operation, error) {
	op, err := scanOperation(s.db.QueryRow(ctx, `
		UPDATE operations
		SET state = 'running', started_at_ms = coalesce(started_at_ms, $4), updated_at_ms = $4
		WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3 AND state IN ('pending', 'running')
		RETURNING `+operationColumns,
		scope.TenantID, scope.ProjectID, id, nowMs))
	if runtime.ErrorCode(err) == contract.CodeNotFound {
		return s.Operation(ctx, scope, id)
	}
	return op, err
}

// FailOperation implements operation.OperationStore. A failed retention run also forgets
// the conversations it recorded as touched (operation_retention.go).
func (s *OperationStore) FailOperation(ctx context.Context, scope runtime.Scope, id string, opErr contract.OperationError, nowMs int64) error {
	_, err := s.db.Exec(ctx, `
		WITH forgotten AS (
		    DELETE FROM retention_touched WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3
		)
		UPDATE operations
		SET state = 'failed', error_code = $4, error_message = $5, updated_at_ms = $6, completed_at_ms = $6
		WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3 AND state IN ('pending', 'running')`,
		scope.TenantID, scope.ProjectID, id, opErr.Code, opErr.Message, nowMs)
	return translate(err)
}

// boundedStep runs one step of a running operation in a transaction whose statements
// bounds.Timeout bounds, with the operation's row locked (lockRunning); an operation
// that is no longer running is done without fn. fn reports whether the operation is
// finished.
func boundedStep(ctx context.Context, db DBTX, scope runtime.Scope, operationID string, bounds operation.StepBounds, fn func(tx pgx.Tx) (bool, error)) (bool, error) {
	var done bool
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		if err := setLocalTimeout(ctx, tx, bounds.Timeout); err != nil {
			return err
		}
		running, err := lockRunning(ctx, tx, scope, operationID, nil)
		if err != nil || !running {
			done = err == nil
			return err
		}
		done, err = fn(tx)
		return err
	})
	if err != nil {
		return false, err
	}
	return done, nil
}

// lockRunning locks the operation's row for one step and reports whether it is still
// running, decoding its stored cursor into cursor (when not nil). The lock serializes
// steps of the same operation, should the queue ever run its job twice at once (a job
// rescued while its first worker still ran).
func lockRunning(ctx context.Context, tx DBTX, scope runtime.Scope, id string, cursor any) (bool, error) {
	var state string
	var raw []byte
	err := tx.QueryRow(ctx, `
		SELECT state, cursor FROM operations
		WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3 FOR UPDATE`,
		scope.TenantID, scope.ProjectID, id).Scan(&state, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, translate(err)
	}
	if cursor != nil && raw != nil {
		if err := json.Unmarshal(raw, cursor); err != nil {
			return false, fmt.Errorf("decode the cursor of operation %s: %w", id, err)
		}
	}
	return state == contract.OperationRunning, nil
}

var _ operation.StepStore = (*OperationStore)(nil)

// LockStep implements operation.StepStore.
func (s *OperationStore) LockStep(ctx context.Context, scope runtime.Scope, id string, timeout time.Duration, cursor any) (bool, error) {
	if err := setLocalTimeout(ctx, s.db, timeout); err != nil {
		return false, err
	}
	return lockRunning(ctx, s.db, scope, id, cursor)
}

// SaveStep implements operation.StepStore.
func (s *OperationStore) SaveStep(ctx context.Context, scope runtime.Scope, id string, cursor any, done int64, nowMs int64) error {
	raw, err := json.Marshal(cursor)
	if err != nil {
		return fmt.Errorf("encode the cursor of operation %s: %w", id, err)
	}
	_, err = s.db.Exec(ctx, `
		UPDATE operations SET cursor = $4, progress_done = progress_done + $5, updated_at_ms = $6
		WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3`,
		scope.TenantID, scope.ProjectID, id, string(raw), done, nowMs)
	return translate(err)
}

// SucceedStep implements operation.StepStore.
func (s *OperationStore) SucceedStep(ctx context.Context, scope runtime.Scope, id string, result any, done int64, nowMs int64) error {
	raw, err := json.Marshal(result)
	if err != nil {
		return fmt.Errorf("encode the result of operation %s: %w", id, err)
	}
	_, err = s.db.Exec(ctx, `
		UPDATE operations
		SET state = 'succeeded', cursor = NULL, result = $4, progress_done = progress_done + $5,
		    progress_total = progress_done + $5, started_at_ms = coalesce(started_at_ms, $6),
		    updated_at_ms = $6, completed_at_ms = $6
		WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3 AND state IN ('pending', 'running')`,
		scope.TenantID, scope.ProjectID, id, string(raw), done, nowMs)
	return translate(err)
}
