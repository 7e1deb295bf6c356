package postgres_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/operation"
)

// fixedClock is a clock standing at one instant.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// opNow is the instant operations are created at in these tests.
var opNow = time.UnixMilli(1_000_000)

// operationBundle is the operation use cases over the real stores on a fresh database,
// without a job queue working: tests run the jobs' steps themselves.
type operationBundle struct {
	pool     *pgxpool.Pool
	store    operation.OperationStore
	messages conversation.MessageStore
	ops      *operation.Maintenance
	scope    runtime.Scope
	// bounds are the bounds of the operations' steps.
	bounds operation.StepBounds
}

func setupOperations(t testing.TB, batch int) *operationBundle {
	t.Helper()
	return setupBoundedOperations(t, batch, 0)
}

// setupBoundedOperations is setupOperations with steps bounded to batchBytes too
// (0: the default).
func setupBoundedOperations(t testing.TB, batch int, batchBytes int64) *operationBundle {
	t.Helper()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	return &operationBundle{
		pool:     pool,
		store:    db.Operation().Stores().Operations,
		messages: db.Messages(),
		ops: operation.NewMaintenance(operation.MaintenanceConfig{
			DB: db.Operation(), Schema: db, Clock: fixedClock{opNow}, BatchSize: batch, BatchBytes: batchBytes,
		}),
		scope:  runtime.Scope{TenantID: "tenant-a", ProjectID: "project-a"},
		bounds: operation.StepBounds{Rows: batch, Bytes: cmp.Or(batchBytes, operation.DefaultOperationBatchBytes)},
	}
}

// seed appends n messages to conversation, the i-th (from 1) created at i seconds.
func (b *operationBundle) seed(t testing.TB, scope runtime.Scope, conversationID string, n int) {
	t.Helper()
	batch := make([]contract.ConversationRecord, n)
	for i := range batch {
		batch[i] = contract.ConversationRecord{
			Scope: contract.ConversationScope{ConversationID: conversationID}, ID: fmt.Sprintf("m%d", i+1), Role: contract.RoleUser,
			Content: fmt.Sprintf("text %s %d", conversationID, i+1), CreatedAtMs: int64(i+1) * 1000,
		}
	}
	_, err := b.messages.AppendMessages(context.Background(), scope, batch, conversation.PlanAppend, opNow.UnixMilli())
	require.NoError(t, err)
}

// sequences lists the sequences left in a conversation.
func (b *operationBundle) sequences(t *testing.T, scope runtime.Scope, conversation string) []int64 {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		SELECT sequence FROM messages WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = $3
		ORDER BY sequence`, scope.TenantID, scope.ProjectID, conversation)
	require.NoError(t, err)
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return seqs
}

// runToEnd runs an operation's job steps until it is finished.
func (b *operationBundle) runToEnd(t *testing.T, scope runtime.Scope, id string) contract.Operation {
	t.Helper()
	finished, err := b.ops.RunOperation(context.Background(), scope, id, opNow.Add(time.Hour))
	require.NoError(t, err)
	require.True(t, finished)
	op, err := b.store.Operation(context.Background(), scope, id)
	require.NoError(t, err)
	return op
}

func retentionResult(t *testing.T, op contract.Operation) contract.RetentionResult {
	t.Helper()
	require.Equal(t, contract.OperationSucceeded, op.State, "%+v", op)
	var res contract.RetentionResult
	require.NoError(t, json.Unmarshal(op.Result, &res))
	return res
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// Retention counts and deletes exactly what its policy selects, whatever the batch
// boundaries (3 rows per step here, so conversations span steps).
func TestRetentionPolicies(t *testing.T) {
	t.Parallel()
	// c1 has 10 messages created at 1..10 s, c2 3 at 1..3 s, c3 5 at 1..5 s. The
	// operation is created at 1000 s: maxAgeMs 996_500 deletes those created before
	// 3.5 s.
	cases := []struct {
		name     string
		req      contract.RetentionRequest
		want     contract.RetentionResult
		left     map[string][]int64
		examined int64
	}{
		{
			name:     "age only",
			req:      contract.RetentionRequest{Policy: &contract.RetentionPolicy{MaxAgeMs: ptr[int64](996_500)}},
			want:     contract.RetentionResult{DeletedMessages: 9, AffectedConversations: 3},
			left:     map[string][]int64{"c1": seqRange(4, 10), "c2": nil, "c3": seqRange(4, 5)},
			examined: 9, // the messages older than the cutoff
		},
		{
			name:     "keep last only",
			req:      contract.RetentionRequest{Policy: &contract.RetentionPolicy{KeepLastMessages: ptr[int64](4)}},
			want:     contract.RetentionResult{DeletedMessages: 7, AffectedConversations: 2},
			left:     map[string][]int64{"c1": seqRange(7, 10), "c2": seqRange(1, 3), "c3": seqRange(2, 5)},
			examined: 7, // the messages beyond the keep boundaries; c2 is skipped by its count
		},
		{
			name:     "the shortest age deletes everything old enough",
			req:      contract.RetentionRequest{Policy: &contract.RetentionPolicy{MaxAgeMs: ptr[int64](contract.MinRetentionMaxAgeMs)}},
			want:     contract.RetentionResult{DeletedMessages: 18, AffectedConversations: 3},
			left:     map[string][]int64{"c1": nil, "c2": nil, "c3": nil},
			examined: 18,
		},
		{
			name: "both: older and not among the newest",
			req: contract.RetentionRequest{Policy: &contract.RetentionPolicy{
				MaxAgeMs: ptr[int64](996_500), KeepLastMessages: ptr[int64](4),
			}},
			want:     contract.RetentionResult{DeletedMessages: 4, AffectedConversations: 2},
			left:     map[string][]int64{"c1": seqRange(4, 10), "c2": seqRange(1, 3), "c3": seqRange(2, 5)},
			examined: 9, // the messages older than the cutoff, kept ones included
		},
		{
			name: "dry run counts without deleting",
			req: contract.RetentionRequest{
				Policy: &contract.RetentionPolicy{MaxAgeMs: ptr[int64](996_500), KeepLastMessages: ptr[int64](4)},
				DryRun: true,
			},
			want:     contract.RetentionResult{DeletedMessages: 4, AffectedConversations: 2},
			left:     map[string][]int64{"c1": seqRange(1, 10), "c2": seqRange(1, 3), "c3": seqRange(1, 5)},
			examined: 9, // the same messages as the run that deletes
		},
		{
			name: "one conversation",
			req: contract.RetentionRequest{
				Policy:         &contract.RetentionPolicy{MaxAgeMs: ptr[int64](996_500)},
				ConversationID: ptr("c1"),
			},
			want:     contract.RetentionResult{DeletedMessages: 3, AffectedConversations: 1},
			left:     map[string][]int64{"c1": seqRange(4, 10), "c2": seqRange(1, 3), "c3": seqRange(1, 5)},
			examined: 10, // one conversation's walk reads all of its messages
		},
		{
			name: "dry run of keep last only",
			req: contract.RetentionRequest{
				Policy: &contract.RetentionPolicy{KeepLastMessages: ptr[int64](4)},
				DryRun: true,
			},
			want:     contract.RetentionResult{DeletedMessages: 7, AffectedConversations: 2},
			left:     map[string][]int64{"c1": seqRange(1, 10), "c2": seqRange(1, 3), "c3": seqRange(1, 5)},
			examined: 7,
		},
		{
			name: "one conversation, keep last",
			req: contract.RetentionRequest{
				Policy:         &contract.RetentionPolicy{KeepLastMessages: ptr[int64](4)},
				ConversationID: ptr("c1"),
			},
			want:     contract.RetentionResult{DeletedMessages: 6, AffectedConversations: 1},
			left:     map[string][]int64{"c1": seqRange(7, 10), "c2": seqRange(1, 3), "c3": seqRange(1, 5)},
			examined: 6,
		},
		{
			name:     "nothing old enough",
			req:      contract.RetentionRequest{Policy: &contract.RetentionPolicy{MaxAgeMs: ptr[int64](999_999)}},
			want:     contract.RetentionResult{},
			left:     map[string][]int64{"c1": seqRange(1, 10), "c2": seqRange(1, 3), "c3": seqRange(1, 5)},
			examined: 0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupOperations(t, 3)
			b.seed(t, b.scope, "c1", 10)
			b.seed(t, b.scope, "c2", 3)
			b.seed(t, b.scope, "c3", 5)
			other := runtime.Scope{TenantID: "tenant-b", ProjectID: "project-a"}
			b.seed(t, other, "c1", 10)

			res, err := b.ops.Retention(context.Background(), b.scope, &tc.req)
			require.NoError(t, err)
			require.Equal(t, contract.OperationPending, res.Operation.State)
			op := b.runToEnd(t, b.scope, res.Operation.ID)
			require.Equal(t, tc.want, retentionResult(t, op))
			for conv, left := range tc.left {
				if left == nil {
					require.Empty(t, b.sequences(t, b.scope, conv), conv)
					continue
				}
				require.Equal(t, left, b.sequences(t, b.scope, conv), conv)
			}
			require.Equal(t, seqRange(1, 10), b.sequences(t, other, "c1"), "another scope is untouched")
			require.Equal(t, contract.OperationProgress{Done: tc.examined, Total: &tc.examined}, op.Progress)
			b.requireCountsExact(t)
			requireForgotten(t, b.pool)
		})
	}
}

// A retention leaves tombstoned conversations to their deletion job.
func TestRetentionSkipsDeletedConversations(t *testing.T) {
	t.Parallel()
	b := setupOperations(t, 100)
	ctx := context.Background()
	b.seed(t, b.scope, "kept", 2)
	b.seed(t, b.scope, "gone", 2)
	_, _, err := b.ops.DeleteConversation(ctx, b.scope, &contract.DeleteConversationRequest{ConversationID: "gone"})
	require.NoError(t, err)
	res, err := b.ops.Retention(ctx, b.scope, &contract.RetentionRequest{Policy: &contract.RetentionPolicy{MaxAgeMs: ptr[int64](contract.MinRetentionMaxAgeMs)}})
	require.NoError(t, err)
	op := b.runToEnd(t, b.scope, res.Operation.ID)
	require.Equal(t, contract.RetentionResult{DeletedMessages: 2, AffectedConversations: 1}, retentionResult(t, op))
}

// Steps of one operation run concurrently (a job rescued while its first worker still
// runs) still delete and count every message exactly once.
func TestRetentionConcurrentRunsCountOnce(t *testing.T) {
	t.Parallel()
	for name, policy := range map[string]*contract.RetentionPolicy{
		"keep last": {KeepLastMessages: ptr[int64](1)},
		// Older than 4.5 s: the first four of each, met by the age walk in four
		// instants that every conversation shares.
		"age": {MaxAgeMs: ptr[int64](995_500)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupOperations(t, 2)
			for i := range 6 {
				b.seed(t, b.scope, fmt.Sprintf("c%d", i), 5)
			}
			res, err := b.ops.Retention(context.Background(), b.scope, &contract.RetentionRequest{Policy: policy})
			require.NoError(t, err)
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for range 4 {
				wg.Go(func() {
					_, err := b.ops.RunOperation(context.Background(), b.scope, res.Operation.ID, opNow.Add(time.Hour))
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			op, err := b.store.Operation(context.Background(), b.scope, res.Operation.ID)
			require.NoError(t, err)
			require.Equal(t, contract.RetentionResult{DeletedMessages: 24, AffectedConversations: 6}, retentionResult(t, op))
			require.Equal(t, int64(24), op.Progress.Done, "both walks examine exactly what they delete here")
			b.requireCountsExact(t)
			requireForgotten(t, b.pool)
		})
	}
}

// Deleting tombstones at once and creates one operation; physical deletion runs in
// bounded steps, resumes where it stopped, and finishes exactly once.
func TestDeleteConversationSteps(t *testing.T) {
	t.Parallel()
	b := setupOperations(t, 3)
	ctx := context.Background()
	b.seed(t, b.scope, "c", 7)
	b.seed(t, b.scope, "other", 2)

	res, created, err := b.ops.DeleteConversation(ctx, b.scope, &contract.DeleteConversationRequest{ConversationID: "c"})
	require.NoError(t, err)
	require.True(t, created)
	op := res.Operation
	require.Equal(t, contract.OperationConversationDelete, op.Kind)
	require.JSONEq(t, `{"conversationId":"c"}`, string(op.Request))

	again, created, err := b.ops.DeleteConversation(ctx, b.scope, &contract.DeleteConversationRequest{ConversationID: "c"})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, op.ID, again.Operation.ID)

	// One step (the deadline has passed): 3 of 7 rows; the total is not counted ahead.
	finished, err := b.ops.RunOperation(ctx, b.scope, op.ID, opNow)
	require.NoError(t, err)
	require.False(t, finished)
	op, err = b.store.Operation(ctx, b.scope, op.ID)
	require.NoError(t, err)
	require.Equal(t, contract.OperationRunning, op.State)
	require.Equal(t, contract.OperationProgress{Done: 3}, op.Progress)
	require.Equal(t, opNow.UnixMilli(), *op.StartedAtMs)
	require.Len(t, b.sequences(t, b.scope, "c"), 4)

	op = b.runToEnd(t, b.scope, op.ID)
	require.Equal(t, contract.OperationSucceeded, op.State)
	require.Equal(t, contract.OperationProgress{Done: 7, Total: ptr[int64](7)}, op.Progress)
	require.JSONEq(t, `{"deletedRecords":7}`, string(op.Result))
	require.Empty(t, b.sequences(t, b.scope, "c"))
	require.Equal(t, seqRange(1, 2), b.sequences(t, b.scope, "other"))

	// A job run once more (a queue may run a job twice) changes nothing.
	require.Equal(t, op, b.runToEnd(t, b.scope, op.ID))

	// The tombstone stays: appending is refused.
	_, err = b.messages.AppendMessages(ctx, b.scope, []contract.ConversationRecord{
		{Scope: contract.ConversationScope{ConversationID: "c"}, ID: "late", Role: contract.RoleUser, Content: "late"},
	}, conversation.PlanAppend, opNow.UnixMilli())
	require.Equal(t, contract.CodeConflict, runtime.ErrorCode(err))
}

// hexText returns n bytes of random hex: text Postgres cannot compress, so it is
// stored at its full size.
func hexText(t testing.TB, n int) string {
	t.Helper()
	raw := make([]byte, n/2)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	return hex.EncodeToString(raw)
}

// stepOnce runs exactly one step of an operation (the deadline has passed) and
// returns the operation after it.
func (b *operationBundle) stepOnce(t *testing.T, id string) contract.Operation {
	t.Helper()
	_, err := b.ops.RunOperation(context.Background(), b.scope, id, opNow)
	require.NoError(t, err)
	op, err := b.store.Operation(context.Background(), b.scope, id)
	require.NoError(t, err)
	return op
}

// A deletion step is bounded by bytes as well as rows: window items of up to 4 MiB
// each would otherwise make a step of a thousand rows gigabytes long. A step takes
// rows while those before stay under the budget, so it always progresses.
func TestDeleteConversationStepBoundedBytes(t *testing.T) {
	t.Parallel()
	const itemBytes = 100 << 10
	b := setupBoundedOperations(t, 1000, 150<<10)
	ctx := context.Background()
	b.seed(t, b.scope, "c", 2)
	items := make([]contract.WindowItem, 4)
	for i := range items {
		items[i] = contract.WindowItem{ID: fmt.Sprintf("i%d", i), Ordinal: i, Kind: "message", Content: hexText(t, itemBytes)}
	}
	windows := newDB(t, b.pool).Conversation().Stores().Windows
	_, _, err := windows.CreateWindow(ctx, b.scope, &contract.Window{
		ID: "w", Conversation: contract.ConversationRef{ConversationID: "c"}, Stage: "original", Purpose: "p",
		Items: items, ItemCount: len(items), ContentBytes: 4 * itemBytes, ContentSHA256: "x", CreatedAtMs: 1,
	})
	require.NoError(t, err)

	res, _, err := b.ops.DeleteConversation(ctx, b.scope, &contract.DeleteConversationRequest{ConversationID: "c"})
	require.NoError(t, err)
	id := res.Operation.ID
	// Step 1: both small messages, then items while the bytes before stay under
	// 150 KiB: two (0 and 100 KiB before them). The budget is spent: no more tables.
	require.Equal(t, contract.OperationProgress{Done: 4}, b.stepOnce(t, id).Progress)
	// Step 2: the other two items; step 3: the window; step 4: nothing left, done.
	require.Equal(t, int64(6), b.stepOnce(t, id).Progress.Done)
	require.Equal(t, int64(7), b.stepOnce(t, id).Progress.Done)
	op := b.stepOnce(t, id)
	require.Equal(t, contract.OperationSucceeded, op.State)
	require.JSONEq(t, `{"deletedRecords":7}`, string(op.Result))
	var left int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM context_window_items) + (SELECT count(*) FROM context_windows)`).Scan(&left))
	require.Zero(t, left)
}

// A retention step is bounded by bytes as well as rows, and a step cut by the byte
// bound does not end the walk: the age walk, and the keep-last walk in a dry run (which
// resumes inside the conversation by the number it examined there) and in a run that
// deletes.
func TestRetentionStepBoundedBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		req     contract.RetentionRequest
		deleted int64
		between []int64 // the sequences left after the first step
		left    []int64
	}{
		{"age", contract.RetentionRequest{Policy: &contract.RetentionPolicy{MaxAgeMs: ptr[int64](contract.MinRetentionMaxAgeMs)}},
			6, seqRange(4, 6), nil},
		{"keep last", contract.RetentionRequest{Policy: &contract.RetentionPolicy{KeepLastMessages: ptr[int64](1)}},
			5, seqRange(4, 6), []int64{6}},
		{"keep last, dry run", contract.RetentionRequest{Policy: &contract.RetentionPolicy{KeepLastMessages: ptr[int64](1)}, DryRun: true},
			5, seqRange(1, 6), seqRange(1, 6)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupBoundedOperations(t, 1000, 250<<10)
			ctx := context.Background()
			batch := make([]contract.ConversationRecord, 6)
			for i := range batch {
				batch[i] = contract.ConversationRecord{Scope: contract.ConversationScope{ConversationID: "c"}, ID: fmt.Sprintf("m%d", i), Role: contract.RoleUser,
					Content: hexText(t, 100<<10), CreatedAtMs: 1}
			}
			_, err := b.messages.AppendMessages(ctx, b.scope, batch, conversation.PlanAppend, opNow.UnixMilli())
			require.NoError(t, err)
			res, err := b.ops.Retention(ctx, b.scope, &tc.req)
			require.NoError(t, err)
			id := res.Operation.ID

			op := b.stepOnce(t, id)
			require.Equal(t, contract.OperationRunning, op.State, "the byte bound cut the step, so the walk goes on")
			require.Equal(t, int64(3), op.Progress.Done, "rows while the bytes before stay under 250 KiB: 0, 100, 200 KiB")
			require.Equal(t, tc.between, b.sequences(t, b.scope, "c"))

			op = b.stepOnce(t, id)
			require.Equal(t, contract.RetentionResult{DeletedMessages: tc.deleted, AffectedConversations: 1}, retentionResult(t, op))
			require.Equal(t, contract.OperationProgress{Done: tc.deleted, Total: &tc.deleted}, op.Progress)
			if tc.left == nil {
				require.Empty(t, b.sequences(t, b.scope, "c"))
			} else {
				require.Equal(t, tc.left, b.sequences(t, b.scope, "c"))
			}
			b.requireCountsExact(t)
		})
	}
}

// A conversation that never existed is tombstoned too, and its deletion succeeds.
func TestDeleteNeverExistingConversation(t *testing.T) {
	t.Parallel()
	b := setupOperations(t, 10)
	ctx := context.Background()
	res, created, err := b.ops.DeleteConversation(ctx, b.scope, &contract.DeleteConversationRequest{ConversationID: "ghost"})
	require.NoError(t, err)
	require.True(t, created)
	var deletedAt *int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT deleted_at_ms FROM conversations
		WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = 'ghost'`, b.scope.TenantID, b.scope.ProjectID).Scan(&deletedAt))
	require.Equal(t, opNow.UnixMilli(), *deletedAt)
	op := b.runToEnd(t, b.scope, res.Operation.ID)
	require.Equal(t, contract.OperationProgress{Done: 0, Total: ptr[int64](0)}, op.Progress)
	require.JSONEq(t, `{"deletedRecords":0}`, string(op.Result))

	// Another scope's conversation of the same ID is not touched, and the operation is
	// invisible there.
	other := runtime.Scope{TenantID: "tenant-b", ProjectID: "project-a"}
	b.seed(t, other, "ghost", 1)
	_, err = b.store.Operation(ctx, other, op.ID)
	require.Equal(t, contract.CodeNotFound, runtime.ErrorCode(err))
}

// The default policy is scheduled once per period in every scope holding messages,
// never while a run of it is in flight.
func TestScheduleDefaultRetention(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	ops := operation.NewMaintenance(operation.MaintenanceConfig{
		DB: db.Operation(), Schema: db, Clock: fixedClock{opNow}, DefaultMaxAge: time.Hour,
	})
	messages := db.Messages()
	ctx := context.Background()
	scopes := []runtime.Scope{{TenantID: "a", ProjectID: "p"}, {TenantID: "a", ProjectID: "q"}, {TenantID: "b", ProjectID: "p"}}
	for _, sc := range scopes {
		_, err := messages.AppendMessages(ctx, sc, []contract.ConversationRecord{
			{Scope: contract.ConversationScope{ConversationID: "c"}, ID: "m", Role: contract.RoleUser, Content: "x", CreatedAtMs: 1},
		}, conversation.PlanAppend, opNow.UnixMilli())
		require.NoError(t, err)
	}
	scheduled := func() map[runtime.Scope][]string {
		rows, err := pool.Query(ctx, `SELECT tenant_id, project_id, state FROM operations
			WHERE kind = 'retention' AND default_policy ORDER BY created_at_ms, operation_id`)
		require.NoError(t, err)
		out := map[runtime.Scope][]string{}
		for rows.Next() {
			var sc runtime.Scope
			var state string
			require.NoError(t, rows.Scan(&sc.TenantID, &sc.ProjectID, &state))
			out[sc] = append(out[sc], state)
		}
		require.NoError(t, rows.Err())
		return out
	}

	since := opNow.Add(-time.Minute)
	finished, err := ops.ScheduleDefaultRetention(ctx, since, opNow.Add(time.Hour))
	require.NoError(t, err)
	require.True(t, finished)
	got := scheduled()
	require.Len(t, got, 3)
	for _, sc := range scopes {
		require.Equal(t, []string{"pending"}, got[sc])
	}
	// The same period again (a resumed sweep): nothing new.
	_, err = ops.ScheduleDefaultRetention(ctx, since, opNow.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, got, scheduled())

	// A later period while runs are in flight: nothing new either.
	later := opNow.Add(time.Minute)
	_, err = ops.ScheduleDefaultRetention(ctx, later, opNow.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, got, scheduled())

	// Once the runs are done, the next period schedules again; each run deleted the
	// old message of its scope.
	var ids []struct{ Tenant, Project, ID string }
	rows, err := pool.Query(ctx, `SELECT tenant_id, project_id, operation_id FROM operations WHERE kind = 'retention'`)
	require.NoError(t, err)
	ids, err = pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Tenant, Project, ID string }])
	require.NoError(t, err)
	for _, r := range ids {
		op, err := ops.Get(ctx, runtime.Principal{Scope: runtime.Scope{TenantID: r.Tenant, ProjectID: r.Project}},
			&contract.GetOperationRequest{OperationID: r.ID})
		require.NoError(t, err)
		require.JSONEq(t, `{"policy":{"maxAgeMs":3600000,"keepLastMessages":null},"conversationId":null,"dryRun":false}`,
			string(op.Operation.Request))
		finished, err := ops.RunOperation(ctx, runtime.Scope{TenantID: r.Tenant, ProjectID: r.Project}, r.ID, opNow.Add(time.Hour))
		require.NoError(t, err)
		require.True(t, finished)
	}
	for _, sc := range scopes {
		st, err := ops.Status(ctx, sc)
		require.NoError(t, err)
		require.Equal(t, opNow.UnixMilli(), *st.Retention.LastRunAtMs)
		require.Equal(t, int64(3_600_000), *st.Retention.DefaultMaxAgeMs)
	}
	_, err = ops.ScheduleDefaultRetention(ctx, opNow.Add(2*time.Minute), opNow.Add(time.Hour))
	require.NoError(t, err)
	for _, sc := range scopes {
		require.Equal(t, []string{"succeeded", "pending"}, scheduled()[sc])
	}
}

// The maintenance counts cover the caller's scope only.
func TestMaintenanceCounts(t *testing.T) {
	t.Parallel()
	b := setupOperations(t, 10)
	ctx := context.Background()
	other := runtime.Scope{TenantID: "tenant-b", ProjectID: "project-a"}
	for _, id := range []string{"c1", "c2", "c3"} {
		_, _, err := b.ops.DeleteConversation(ctx, b.scope, &contract.DeleteConversationRequest{ConversationID: id})
		require.NoError(t, err)
	}
	_, _, err := b.ops.DeleteConversation(ctx, other, &contract.DeleteConversationRequest{ConversationID: "c1"})
	require.NoError(t, err)
	running, _, err := b.ops.DeleteConversation(ctx, b.scope, &contract.DeleteConversationRequest{ConversationID: "c4"})
	require.NoError(t, err)
	_, err = b.store.StartOperation(ctx, b.scope, running.Operation.ID, opNow.UnixMilli())
	require.NoError(t, err)
	failed, _, err := b.ops.DeleteConversation(ctx, b.scope, &contract.DeleteConversationRequest{ConversationID: "c5"})
	require.NoError(t, err)
	require.NoError(t, b.ops.FailOperation(ctx, b.scope, failed.Operation.ID, fmt.Errorf("disk on fire")))
	old, _, err := b.ops.DeleteConversation(ctx, b.scope, &contract.DeleteConversationRequest{ConversationID: "c6"})
	require.NoError(t, err)
	require.NoError(t, b.store.FailOperation(ctx, b.scope, old.Operation.ID,
		contract.OperationError{Code: "INTERNAL", Message: "x"}, opNow.Add(-25*time.Hour).UnixMilli()))

	st, err := b.ops.Status(ctx, b.scope)
	require.NoError(t, err)
	require.Equal(t, contract.OperationCounts{Pending: 3, Running: 1, FailedLast24h: 1}, st.Operations)
	require.Nil(t, st.Retention.LastRunAtMs)
	require.Nil(t, st.Retention.DefaultMaxAgeMs)
	require.True(t, st.Database.OK)
	require.Positive(t, st.Database.SchemaVersion)

	f, err := b.store.Operation(ctx, b.scope, failed.Operation.ID)
	require.NoError(t, err)
	require.Equal(t, &contract.OperationError{Code: "INTERNAL", Message: "the operation failed"}, f.Error,
		"an internal cause stays out of the record")
	require.NotNil(t, f.CompletedAtMs)

	st, err = b.ops.Status(ctx, other)
	require.NoError(t, err)
	require.Equal(t, contract.OperationCounts{Pending: 1}, st.Operations)
}

// Recent operations are the scope's newest first, within the limit; the record counts
// count the scope's rows each up to the bound, an active entry past its expiry as
// expired.
func TestRecentOperationsAndRecordCounts(t *testing.T) {
	t.Parallel()
	b := setupOperations(t, 10)
	ctx := context.Background()
	other := runtime.Scope{TenantID: "tenant-b", ProjectID: "project-a"}
	var ids []string
	for _, id := range []string{"c1", "c2", "c3"} {
		res, _, err := b.ops.DeleteConversation(ctx, b.scope, &contract.DeleteConversationRequest{ConversationID: id})
		require.NoError(t, err)
		ids = append(ids, res.Operation.ID)
		_, err = b.pool.Exec(ctx, `UPDATE operations SET created_at_ms = created_at_ms + $2 WHERE operation_id = $1`,
			res.Operation.ID, len(ids))
		require.NoError(t, err)
	}
	_, _, err := b.ops.DeleteConversation(ctx, other, &contract.DeleteConversationRequest{ConversationID: "c9"})
	require.NoError(t, err)
	recent, err := b.ops.RecentOperations(ctx, b.scope, 2)
	require.NoError(t, err)
	require.Len(t, recent, 2)
	require.Equal(t, []string{ids[2], ids[1]}, []string{recent[0].ID, recent[1].ID}, "the newest first")
	recent, err = b.ops.RecentOperations(ctx, other, 10)
	require.NoError(t, err)
	require.Len(t, recent, 1)
	_, err = b.ops.RecentOperations(ctx, b.scope, operation.MaxRecentOperations+1)
	require.Equal(t, contract.CodeValidationFailed, runtime.ErrorCode(err))

	loadConversations(t, b.pool, b.scope, 3, 4)
	loadConversations(t, b.pool, other, 1, 2)
	_, err = b.pool.Exec(ctx, `
		INSERT INTO context_entries (tenant_id, project_id, entry_id, kind, content, source_record_ids, tags, importance,
			status, version, request_sha256, created_at_ms, updated_at_ms, ended_at_ms, search, superseded_by, merged_into)
		SELECT $1, $2, 'e-' || s || g, 'fact', 'x', '{}', '{}', 0.5, s, 1, repeat('0', 64), g, g,
			CASE WHEN s = 'active' THEN NULL ELSE g END, to_tsvector('simple', 'x'),
			CASE WHEN s = 'superseded' THEN 'e-next' END, CASE WHEN s = 'merged' THEN 'e-into' END
		FROM generate_series(1, 5) AS g, unnest($3::text[]) AS s
		WHERE g <= array_position($3::text[], s)`, b.scope.TenantID, b.scope.ProjectID,
		[]string{contract.EntryActive, contract.EntrySuperseded, contract.EntryMerged, contract.EntryExpired})
	require.NoError(t, err)
	// Two more active entries, one past its expiry at now (1,000): it reads as expired.
	_, err = b.pool.Exec(ctx, `
		INSERT INTO context_entries (tenant_id, project_id, entry_id, kind, content, source_record_ids, tags, importance,
			status, version, request_sha256, created_at_ms, updated_at_ms, expires_at_ms, search)
		SELECT $1, $2, 'e-expiring-' || x, 'fact', 'x', '{}', '{}', 0.5, 'active', 1, repeat('0', 64), 1, 1, x,
			to_tsvector('simple', 'x')
		FROM unnest(ARRAY[1000, 1001]) AS x`, b.scope.TenantID, b.scope.ProjectID)
	require.NoError(t, err)
	// c1–c3 are being deleted: their head rows are tombstones, not conversations.
	counts, err := b.store.RecordCounts(ctx, b.scope, 100, 1000)
	require.NoError(t, err)
	require.Equal(t, operation.RecordCounts{Bound: 100, Conversations: 3, Messages: 12,
		Entries: map[string]int64{contract.EntryActive: 2, contract.EntrySuperseded: 2, contract.EntryMerged: 3, contract.EntryExpired: 5}}, counts)
	require.False(t, counts.AtLeast(counts.Messages))
	counts, err = b.store.RecordCounts(ctx, b.scope, 100, 999)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{contract.EntryActive: 3, contract.EntrySuperseded: 2, contract.EntryMerged: 3, contract.EntryExpired: 4},
		counts.Entries, "before the expiry both count as active")
	counts, err = b.store.RecordCounts(ctx, b.scope, 4, 1000)
	require.NoError(t, err)
	require.EqualValues(t, 4, counts.Entries[contract.EntryExpired], "the expired count stops at the bound too")
	counts, err = b.store.RecordCounts(ctx, b.scope, 3, 1000)
	require.NoError(t, err)
	require.EqualValues(t, 3, counts.Messages, "a count stops at the bound")
	require.True(t, counts.AtLeast(counts.Messages))
	require.EqualValues(t, 2, counts.Entries[contract.EntrySuperseded])
	counts, err = b.store.RecordCounts(ctx, other, 100, 1000)
	require.NoError(t, err)
	require.Equal(t, operation.RecordCounts{Bound: 100, Conversations: 1, Messages: 2,
		Entries: map[string]int64{contract.EntryActive: 0, contract.EntrySuperseded: 0, contract.EntryMerged: 0, contract.EntryExpired: 0}}, counts)
}

// loadConversations copies conversations × perConversation messages into scope, with
// their head rows, the i-th message of a conversation created at i ms, or at
// createdAt(conversation, i) when given.
func loadConversations(tb testing.TB, pool *pgxpool.Pool, scope runtime.Scope, conversations, perConversation int, createdAt ...func(conv, seq int) int64) {
	tb.Helper()
	ctx := context.Background()
	total, i := conversations*perConversation, 0
	copied, err := pool.CopyFrom(ctx, pgx.Identifier{"messages"}, postgres.MessageColumns, pgx.CopyFromFunc(func() ([]any, error) {
		if i == total {
			return nil, nil
		}
		conv, seq := i/perConversation, i%perConversation+1
		i++
		created := int64(seq)
		if len(createdAt) > 0 {
			created = createdAt[0](conv, seq)
		}
		return postgres.MessageRow(scope, contract.ConversationRecord{
			Scope: contract.ConversationScope{ConversationID: fmt.Sprintf("conv-%05d", conv)}, ID: fmt.Sprintf("m-%d", seq), Role: contract.RoleUser,
			Content:  fmt.Sprintf("message %d of conversation %d with a few words of text", seq, conv),
			Sequence: int64(seq), CreatedAtMs: created,
		}), nil
	}))
	require.NoError(tb, err)
	require.EqualValues(tb, total, copied)
	_, err = pool.Exec(ctx, `
		INSERT INTO conversations (tenant_id, project_id, conversation_id, last_sequence, message_count, created_at_ms)
		SELECT $1, $2, 'conv-' || lpad(g::text, 5, '0'), $3, $3, 0 FROM generate_series(0, $4 - 1) AS g`,
		scope.TenantID, scope.ProjectID, perConversation, conversations)
	require.NoError(tb, err)
	_, err = pool.Exec(ctx, "ANALYZE messages, conversations")
	require.NoError(tb, err)
}

// BenchmarkDeleteConversation measures physical deletion of a 10,000-message
// conversation in steps of the default batch, beside 20 other conversations.
func BenchmarkDeleteConversation(b *testing.B) {
	const perConversation = 10_000
	ctx := context.Background()
	bundle := setupOperations(b, 0)
	for n := 0; b.Loop(); n++ {
		b.StopTimer()
		scope := runtime.Scope{TenantID: fmt.Sprintf("tenant-%d", n), ProjectID: "p"}
		loadConversations(b, bundle.pool, scope, 21, perConversation)
		res, _, err := bundle.ops.DeleteConversation(ctx, scope, &contract.DeleteConversationRequest{ConversationID: "conv-00010"})
		require.NoError(b, err)
		b.StartTimer()
		finished, err := bundle.ops.RunOperation(ctx, scope, res.Operation.ID, opNow.Add(time.Hour))
		require.NoError(b, err)
		require.True(b, finished)
	}
	b.ReportMetric(float64(perConversation*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkRetentionScan measures a scope-wide dry run with both policy fields over
// 100,000 messages in 50 conversations: the cost of walking a scope.
func BenchmarkRetentionScan(b *testing.B) {
	const conversations, perConversation = 50, 2_000
	ctx := context.Background()
	bundle := setupOperations(b, 0)
	loadConversations(b, bundle.pool, bundle.scope, conversations, perConversation)
	for b.Loop() {
		res, err := bundle.ops.Retention(ctx, bundle.scope, &contract.RetentionRequest{
			Policy: &contract.RetentionPolicy{MaxAgeMs: ptr(opNow.UnixMilli() - 1000), KeepLastMessages: ptr[int64](100)},
			DryRun: true,
		})
		require.NoError(b, err)
		finished, err := bundle.ops.RunOperation(ctx, bundle.scope, res.Operation.ID, opNow.Add(time.Hour))
		require.NoError(b, err)
		require.True(b, finished)
		op, err := bundle.store.Operation(ctx, bundle.scope, res.Operation.ID)
		require.NoError(b, err)
		require.JSONEq(b, `{"deletedMessages":49950,"affectedConversations":50}`, string(op.Result))
	}
	b.ReportMetric(float64(conversations*perConversation*b.N)/b.Elapsed().Seconds(), "messages/s")
}
