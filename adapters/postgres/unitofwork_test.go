package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/operation"
)

// What one unit of work leaves behind: the conversation head, the operation and its
// job, counted directly in their tables.
func unitRows(t *testing.T, pool *pgxpool.Pool) (heads, ops, jobs int) {
	t.Helper()
	require.NoError(t, pool.QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM operations),
		       (SELECT count(*) FROM river_job WHERE kind = 'agent_context_operation')`).Scan(&heads, &ops, &jobs))
	return heads, ops, jobs
}

// Two stores and a job commit together, or roll back together when the function
// fails, even after every write of it succeeded.
func TestWithinTxCommitsOrRollsBackEverything(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	ctx := context.Background()
	scope := runtime.Scope{TenantID: "t", ProjectID: "p"}
	write := func(ctx context.Context, tx operation.Stores, id string) error {
		if err := tx.Conversations.Tombstone(ctx, scope, "c-"+id, 1); err != nil {
			return err
		}
		op := contract.Operation{ID: id, Kind: contract.OperationConversationDelete, State: contract.OperationPending,
			Request: []byte(`{"conversationId":"c-` + id + `"}`), CreatedAtMs: 1, UpdatedAtMs: 1}
		if err := tx.Operations.CreateOperations(ctx, []operation.NewOperation{{Scope: scope, Operation: op, ConversationID: "c-" + id}}); err != nil {
			return err
		}
		return tx.Jobs.Enqueue(ctx, runtime.OperationJob{TenantID: scope.TenantID, ProjectID: scope.ProjectID, OperationID: id})
	}

	failure := errors.New("the use case changed its mind")
	err := db.Operation().WithinTx(ctx, func(ctx context.Context, tx operation.Stores) error {
		require.NoError(t, write(ctx, tx, "op-1"))
		return failure
	})
	require.ErrorIs(t, err, failure)
	heads, ops, jobs := unitRows(t, pool)
	require.Zero(t, heads+ops+jobs, "nothing of a failed unit remains")

	require.NoError(t, db.Operation().WithinTx(ctx, func(ctx context.Context, tx operation.Stores) error {
		return write(ctx, tx, "op-2")
	}))
	heads, ops, jobs = unitRows(t, pool)
	require.Equal(t, [3]int{1, 1, 1}, [3]int{heads, ops, jobs})
	stored, err := db.Operation().Stores().Operations.ConversationDeletion(ctx, scope, "c-op-2")
	require.NoError(t, err)
	require.Equal(t, "op-2", stored.ID)

	// A store method that needs its own transaction (an append) runs inside the unit
	// as a savepoint: its rollback on a repeated ID keeps the unit usable.
	require.NoError(t, db.Conversation().WithinTx(ctx, func(ctx context.Context, tx conversation.Stores) error {
		batch := []contract.ConversationRecord{{Scope: contract.ConversationScope{ConversationID: "live"}, ID: "m", Role: contract.RoleUser, Content: "x"}}
		if _, err := tx.Messages.AppendMessages(ctx, scope, batch, conversation.PlanAppend, 5); err != nil {
			return err
		}
		res, err := tx.Messages.AppendMessages(ctx, scope, batch, conversation.PlanAppend, 6)
		require.Equal(t, []string{"m"}, res.SkippedIDs)
		return err
	}))
}

// A job step's statements are bounded by the step's own timeout, shorter than the
// job's: a step that waits on a lock gives up with SERVICE_UNAVAILABLE instead of
// outliving its run.
func TestStepStatementsAreBounded(t *testing.T) {
	t.Parallel()
	b := setupOperations(t, 10)
	ctx := context.Background()
	b.seed(t, b.scope, "c", 3)
	res, _, err := b.ops.DeleteConversation(ctx, b.scope, &contract.DeleteConversationRequest{ConversationID: "c"})
	require.NoError(t, err)
	_, err = b.store.StartOperation(ctx, b.scope, res.Operation.ID, 1)
	require.NoError(t, err)

	holder, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `SELECT 1 FROM operations WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3 FOR UPDATE`,
		b.scope.TenantID, b.scope.ProjectID, res.Operation.ID)
	require.NoError(t, err)

	_, err = b.store.DeleteConversationStep(ctx, b.scope, res.Operation.ID, "c",
		operation.StepBounds{Rows: 10, Bytes: 1 << 20, Timeout: 50 * time.Millisecond}, 2)
	var re *runtime.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, contract.CodeServiceUnavailable, re.Code)
	require.Equal(t, "statement_timeout", re.Details["reason"])
	require.Len(t, b.sequences(t, b.scope, "c"), 3, "the cut step removed nothing")
}
