package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/operation"
)

// requireCountsExact checks that every live head of the database counts exactly the
// messages its conversation holds.
func (b *operationBundle) requireCountsExact(t *testing.T) {
	t.Helper()
	requireCountsExact(t, b.pool)
}

func requireCountsExact(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT h.tenant_id, h.project_id, h.conversation_id, h.message_count, count(m.sequence)
		FROM conversations h
		LEFT JOIN messages m USING (tenant_id, project_id, conversation_id)
		WHERE h.deleted_at_ms IS NULL
		GROUP BY 1, 2, 3, 4
		HAVING h.message_count <> count(m.sequence)`)
	require.NoError(t, err)
	wrong, err := pgx.CollectRows(rows, pgx.RowToMap)
	require.NoError(t, err)
	require.Empty(t, wrong, "heads whose message_count is not their number of messages")
}

// requireForgotten checks that no retention run left conversations recorded as touched.
func requireForgotten(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var left int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM retention_touched`).Scan(&left))
	require.Zero(t, left)
}

// copyMessages copies messages into scope with their heads: for each conversation
// conv-NNNNN, the times of its messages in sequence order.
func copyMessages(tb testing.TB, pool *pgxpool.Pool, scope runtime.Scope, times map[string][]int64) {
	tb.Helper()
	ctx := context.Background()
	var rows [][]any
	var ids []string
	var counts []int64
	for conv, created := range times {
		ids, counts = append(ids, conv), append(counts, int64(len(created)))
		for i, ms := range created {
			rows = append(rows, postgres.MessageRow(scope, contract.ConversationRecord{
				Scope: contract.ConversationScope{ConversationID: conv}, ID: fmt.Sprintf("m-%d", i+1), Role: contract.RoleUser,
				Content: fmt.Sprintf("message %d of %s", i+1, conv), Sequence: int64(i + 1), CreatedAtMs: ms,
			}))
		}
	}
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"messages"}, postgres.MessageColumns, pgx.CopyFromRows(rows))
	require.NoError(tb, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO conversations (tenant_id, project_id, conversation_id, last_sequence, message_count, created_at_ms)
		SELECT $1, $2, id, n, n, 0 FROM unnest($3::text[], $4::bigint[]) AS v(id, n)`,
		scope.TenantID, scope.ProjectID, ids, counts)
	require.NoError(tb, err)
	_, err = pool.Exec(ctx, "ANALYZE messages, conversations")
	require.NoError(tb, err)
}

// youngConversations is conversations conv-NNNNN of perConversation messages each,
// created from young on, as copyMessages takes them.
func youngConversations(conversations, perConversation int, young int64) map[string][]int64 {
	times := map[string][]int64{}
	for c := range conversations {
		conv := fmt.Sprintf("conv-%05d", c)
		for i := range perConversation {
			times[conv] = append(times[conv], young+int64(i))
		}
	}
	return times
}

// messageReads runs a retention operation's steps to the end in one transaction and
// returns the rows its statements read from messages (sequential and index fetches,
// from pg_stat_xact_user_tables) and the operation as it ended.
func (b *operationBundle) messageReads(t *testing.T, req contract.RetentionRequest, plan operation.RetentionPlan) (int64, contract.Operation) {
	t.Helper()
	ctx := context.Background()
	res, err := b.ops.Retention(ctx, b.scope, &req)
	require.NoError(t, err)
	id := res.Operation.ID
	_, err = b.store.StartOperation(ctx, b.scope, id, opNow.UnixMilli())
	require.NoError(t, err)
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	stores := postgres.OperationStoresOver(tx)
	for steps := 0; ; steps++ {
		require.Less(t, steps, 10_000, "the run does not end")
		done, err := stores.Operations.RetentionStep(ctx, b.scope, id, plan, b.bounds, opNow.UnixMilli())
		require.NoError(t, err)
		if done {
			break
		}
	}
	var read int64
	require.NoError(t, tx.QueryRow(ctx, `
		SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)
		FROM pg_stat_xact_user_tables WHERE relname = 'messages'`).Scan(&read))
	t.Logf("rows read from messages: %d", read)
	require.NoError(t, tx.Commit(ctx))
	op, err := b.store.Operation(ctx, b.scope, id)
	require.NoError(t, err)
	return read, op
}

// A retention run reads in proportion to what it deletes, not to what the scope holds:
// 20,000 young messages and 20 old ones, or 5,000 messages in conversations within the
// keep-last policy and 30 beyond it in one other. The reads are counted by Postgres in
// the transaction that runs every step.
func TestRetentionReadsInProportionToWhatItDeletes(t *testing.T) {
	t.Parallel()
	// The operations are created at opNow with the shortest age: messages created
	// before the cutoff are old, those from young on are not.
	maxAge := int64(contract.MinRetentionMaxAgeMs)
	cutoff := opNow.UnixMilli() - maxAge
	young := cutoff + 10_000
	t.Run("age", func(t *testing.T) {
		t.Parallel()
		b := setupOperations(t, 7)
		times := youngConversations(200, 100, young)
		// Two old messages at the start of each of ten conversations.
		for c := 0; c < 200; c += 20 {
			conv := fmt.Sprintf("conv-%05d", c)
			times[conv][0], times[conv][1] = int64(c), int64(c+1)
		}
		copyMessages(t, b.pool, b.scope, times)
		read, op := b.messageReads(t, contract.RetentionRequest{Policy: &contract.RetentionPolicy{MaxAgeMs: &maxAge}},
			operation.RetentionPlan{CutoffMs: &cutoff})
		require.LessOrEqual(t, read, int64(2*20), "each old message is read to be examined and to be deleted, nothing else")
		require.Equal(t, contract.RetentionResult{DeletedMessages: 20, AffectedConversations: 10}, retentionResult(t, op))
		require.Equal(t, int64(20), op.Progress.Done, "only the old messages are examined")
		b.requireCountsExact(t)
		requireForgotten(t, b.pool)
	})
	t.Run("keep last", func(t *testing.T) {
		t.Parallel()
		b := setupOperations(t, 7)
		times := map[string][]int64{"conv-99999": make([]int64, 40)}
		for c := range 500 {
			times[fmt.Sprintf("conv-%05d", c)] = make([]int64, 10)
		}
		copyMessages(t, b.pool, b.scope, times)
		read, op := b.messageReads(t, contract.RetentionRequest{Policy: &contract.RetentionPolicy{KeepLastMessages: ptr[int64](10)}},
			operation.RetentionPlan{KeepLast: 10})
		require.LessOrEqual(t, read, int64(2*30), "conversations within the policy are skipped from their heads")
		require.Equal(t, contract.RetentionResult{DeletedMessages: 30, AffectedConversations: 1}, retentionResult(t, op))
		require.Equal(t, int64(30), op.Progress.Done)
		require.Equal(t, seqRange(31, 40), b.sequences(t, b.scope, "conv-99999"))
		b.requireCountsExact(t)
	})
	t.Run("both", func(t *testing.T) {
		t.Parallel()
		b := setupOperations(t, 7)
		times := youngConversations(200, 100, young)
		// Ten conversations with three old messages each, one after the other in
		// the age walk, then one with four old ones only. In steps of 7 the walk
		// touches 3, 3, 3, 3 and 2 conversations.
		for k := range 10 {
			conv := fmt.Sprintf("conv-%05d", 20*k)
			for i := range 3 {
				times[conv][i] = int64(3*k + i)
			}
		}
		times["conv-short"] = []int64{100, 101, 102, 103}
		copyMessages(t, b.pool, b.scope, times)
		read, op := b.messageReads(t, contract.RetentionRequest{Policy: &contract.RetentionPolicy{
			MaxAgeMs: &maxAge, KeepLastMessages: ptr[int64](3),
		}}, operation.RetentionPlan{CutoffMs: &cutoff, KeepLast: 3})
		// Each old message is read and deleted, and each conversation a step touches
		// costs one probe of its keep boundary (at most three index entries here),
		// not one per candidate.
		require.LessOrEqual(t, read, int64(2*34+3*14))
		require.Equal(t, contract.RetentionResult{DeletedMessages: 31, AffectedConversations: 11}, retentionResult(t, op))
		require.Equal(t, int64(34), op.Progress.Done, "the old messages are examined")
		require.Equal(t, []int64{2, 3, 4}, b.sequences(t, b.scope, "conv-short"))
		b.requireCountsExact(t)
	})
}

// Two retention operations over the same conversations, their steps interleaved, each
// count the conversations they touched once: the age walk meets every conversation in
// several steps (three per step here, one instant of creation each), and what one
// operation recorded does not count for the other.
func TestRetentionInterleavedOperationsCountTheirOwn(t *testing.T) {
	t.Parallel()
	b := setupOperations(t, 3)
	ctx := context.Background()
	for _, c := range []string{"c1", "c2", "c3"} {
		b.seed(t, b.scope, c, 5)
	}
	policy := &contract.RetentionPolicy{MaxAgeMs: ptr[int64](996_500)} // older than 3.5 s: 3 of each
	var ids []string
	for range 2 {
		res, err := b.ops.Retention(ctx, b.scope, &contract.RetentionRequest{Policy: policy, DryRun: true})
		require.NoError(t, err)
		ids = append(ids, res.Operation.ID)
	}
	ops := map[string]contract.Operation{}
	for len(ops) < len(ids) {
		for _, id := range ids {
			if op := b.stepOnce(t, id); op.State == contract.OperationSucceeded {
				ops[id] = op
			}
		}
	}
	for _, op := range ops {
		require.Equal(t, contract.RetentionResult{DeletedMessages: 9, AffectedConversations: 3}, retentionResult(t, op))
	}
	requireForgotten(t, b.pool)
}

// A retention run that fails forgets the conversations it recorded as touched.
func TestFailedRetentionForgetsWhatItTouched(t *testing.T) {
	t.Parallel()
	b := setupOperations(t, 2)
	ctx := context.Background()
	b.seed(t, b.scope, "c1", 5)
	b.seed(t, b.scope, "c2", 5)
	res, err := b.ops.Retention(ctx, b.scope, &contract.RetentionRequest{Policy: &contract.RetentionPolicy{KeepLastMessages: ptr[int64](1)}})
	require.NoError(t, err)
	require.Equal(t, contract.OperationRunning, b.stepOnce(t, res.Operation.ID).State)
	var touched int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM retention_touched`).Scan(&touched))
	require.Equal(t, 1, touched)
	require.NoError(t, b.ops.FailOperation(ctx, b.scope, res.Operation.ID, fmt.Errorf("disk on fire")))
	requireForgotten(t, b.pool)
}

// BenchmarkRetentionFewOld measures dry runs over a scope of 1,000,000 messages in
// 10,000 conversations of 100, of which 100 are old (the first message of the first
// 100 conversations): the default policy's case (maxAge only), and keep-last 100, which
// no conversation exceeds. Each run examines what it reports (rows/op); what a run
// costs should follow that, not the million messages.
//
//	go test -run '^$' -bench BenchmarkRetentionFewOld -benchtime 5x -timeout 30m ./adapters/postgres/
func BenchmarkRetentionFewOld(b *testing.B) {
	const conversations, perConversation = 10_000, 100
	ctx := context.Background()
	bundle := setupOperations(b, 0)
	maxAge := int64(contract.MinRetentionMaxAgeMs)
	young := opNow.UnixMilli() - maxAge + 10_000
	loadConversations(b, bundle.pool, bundle.scope, conversations, perConversation, func(conv, seq int) int64 {
		if conv < 100 && seq == 1 {
			return 1
		}
		return young + int64(seq)
	})
	for _, bench := range []struct {
		name   string
		policy contract.RetentionPolicy
		want   string
	}{
		{"max-age", contract.RetentionPolicy{MaxAgeMs: &maxAge}, `{"deletedMessages":100,"affectedConversations":100}`},
		{"keep-last", contract.RetentionPolicy{KeepLastMessages: ptr[int64](perConversation)}, `{"deletedMessages":0,"affectedConversations":0}`},
	} {
		b.Run(bench.name, func(b *testing.B) {
			var examined int64
			for b.Loop() {
				res, err := bundle.ops.Retention(ctx, bundle.scope, &contract.RetentionRequest{Policy: &bench.policy, DryRun: true})
				require.NoError(b, err)
				finished, err := bundle.ops.RunOperation(ctx, bundle.scope, res.Operation.ID, opNow.Add(time.Hour))
				require.NoError(b, err)
				require.True(b, finished)
				op, err := bundle.store.Operation(ctx, bundle.scope, res.Operation.ID)
				require.NoError(b, err)
				require.JSONEq(b, bench.want, string(op.Result))
				examined = op.Progress.Done
			}
			b.ReportMetric(float64(examined), "examined/op")
		})
	}
}
