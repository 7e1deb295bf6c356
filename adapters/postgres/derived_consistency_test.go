package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/adapters/postgres/textindex"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/memory"
	"github.com/agent-context/agent-context/runtime/operation"
	"github.com/agent-context/agent-context/runtime/transfer"
)

// requireTextPostings asserts that the postings the text half reads are exactly the
// entries' documents: a posting per term of every entry's document (whatever its
// status), pending or in a block and not dropped, under the entry's ordinal, with the
// term's positions counted, the document's length and the entry's creation time.
func requireTextPostings(t *testing.T, pool *pgxpool.Pool, step string) {
	t.Helper()
	ctx := context.Background()
	count := func(query string) map[string]int {
		rows, err := pool.Query(ctx, query)
		require.NoError(t, err)
		out := map[string]int{}
		for rows.Next() {
			var tenant, project, term string
			var p textindex.Posting
			require.NoError(t, rows.Scan(&tenant, &project, &term, &p.Ord, &p.TF, &p.Length, &p.Created))
			out[fmt.Sprint(tenant, "/", project, "/", term, p)]++
		}
		require.NoError(t, rows.Err())
		return out
	}
	documents := count(`
		SELECT e.tenant_id, e.project_id, substr(l.lexeme, 14), e.text_ord, coalesce(cardinality(l.positions), 0),
		       e.search_length, e.created_at_ms
		FROM context_entries e CROSS JOIN LATERAL unnest(e.search) AS l(lexeme, positions, weights)`)
	postings := count(`SELECT tenant_id, project_id, term, ord, tf, length, created_at_ms FROM entry_text_postings`)
	dropped := map[string]bool{}
	rows, err := pool.Query(ctx, `SELECT tenant_id, project_id, term, ord FROM entry_text_dropped`)
	require.NoError(t, err)
	for rows.Next() {
		var tenant, project, term string
		var ord int64
		require.NoError(t, rows.Scan(&tenant, &project, &term, &ord))
		dropped[fmt.Sprint(tenant, "/", project, "/", term, ord)] = true
	}
	require.NoError(t, rows.Err())
	rows, err = pool.Query(ctx, `SELECT tenant_id, project_id, term, data FROM entry_text_blocks`)
	require.NoError(t, err)
	for rows.Next() {
		var tenant, project, term string
		var data []byte
		require.NoError(t, rows.Scan(&tenant, &project, &term, &data))
		block, err := textindex.DecodeBlock(nil, data)
		require.NoError(t, err)
		for _, p := range block {
			if !dropped[fmt.Sprint(tenant, "/", project, "/", term, p.Ord)] {
				postings[fmt.Sprint(tenant, "/", project, "/", term, p)]++
			}
		}
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, documents, "postings after %s: the check compares something", step)
	require.Equal(t, documents, postings, "postings after %s", step)
}

// requireDerivedData asserts that everything kept beside context_entries and
// model_invocations is a recount of them: the BM25 statistics (no term at zero), the
// postings and the cost sums.
func requireDerivedData(t *testing.T, pool *pgxpool.Pool, step string) {
	t.Helper()
	pgtest.RequireTextStatistics(t, pool, step)
	requireTextPostings(t, pool, step)
	requireCostSums(t, pool)
}

// The text index and the cost sums are kept by the stores' writes themselves, in
// their transactions: after every kind of write, in two scopes, they equal a recount
// from context_entries and model_invocations. The load: creates (a retried batch,
// imports in other statuses), corrections, expiries, a restore, documents rewritten
// before and after a pack, a reindex, a purge of the expired, invocations saved (and
// retried), the deletion of a conversation in bounded steps, and retention.
func TestDerivedDataMatchesARecount(t *testing.T) {
	t.Parallel()
	b := setupOperations(t, 7)
	ctx := context.Background()
	db := newDB(t, b.pool)
	windows := conversation.NewWindows(db.Conversation(), nil, runtime.SystemClock{})
	other := runtime.Scope{TenantID: "tenant-b", ProjectID: "project-a"}
	within := func(fn func(ctx context.Context, tx memory.Stores) error) {
		t.Helper()
		require.NoError(t, db.Memory().WithinTx(ctx, fn))
	}
	maintain := func(fn func(ctx context.Context, tx transfer.Stores) error) {
		t.Helper()
		require.NoError(t, db.Transfer().WithinTx(ctx, fn))
	}
	conversations := []string{"c0", "c1"}
	past, future := int64(500), opNow.UnixMilli()+3_600_000

	for _, scope := range []runtime.Scope{b.scope, other} {
		p := runtime.Principal{Scope: scope, Subject: "planner"}
		var batch []contract.ContextEntry
		var digests []string
		for i := range 24 {
			var conv *string
			if i%3 < 2 {
				conv = &conversations[i%3]
			}
			e, digest := newEntry(t, fmt.Sprintf("e%02d", i), fmt.Sprintf("ledger walrus %d rare%dz shared%d", i, i, i%4), conv)
			switch i % 6 {
			case 1:
				e.ExpiresAtMs = &past
			case 2:
				e.ExpiresAtMs = &future
			case 5:
				// An import of an entry no longer active.
				e.Status, e.UpdatedAtMs = contract.EntryExpired, 1_500
			}
			batch, digests = append(batch, e), append(digests, digest)
		}
		within(func(ctx context.Context, tx memory.Stores) error {
			_, err := tx.Entries.CreateEntries(ctx, scope, batch, digests)
			return err
		})
		within(func(ctx context.Context, tx memory.Stores) error {
			_, err := tx.Entries.CreateEntries(ctx, scope, batch[:6], digests[:6])
			return err
		})
		requireDerivedData(t, b.pool, "creates")

		for c, conversation := range conversations {
			_, _, err := windows.CreateWindow(ctx, p, windowRequest("w"+conversation, conversation, contract.StageOriginal, 0, nil))
			require.NoError(t, err)
			for i := range 6 {
				req := invocationRequest(fmt.Sprintf("i%d-%d", c, i), conversation, "w"+conversation)
				req.Model = []string{"gpt-4.1-mini", "gpt-4.1", fmt.Sprint("new-model-", c)}[i%3]
				if i%2 == 0 {
					req.ToolName = windowPtr("search")
				}
				req.InputTokens, req.CachedTokens, req.OutputTokens = int64(100*i+c), int64(10*i), int64(i)
				req.StartedAtMs = int64(i) * 1_800_000
				for range 2 {
					_, err := windows.SaveInvocation(ctx, p, req)
					require.NoError(t, err)
				}
			}
		}
		b.seed(t, scope, "c0", 6)
		requireDerivedData(t, b.pool, "invocations")

		// Corrections (a new version, the old superseded), expiries, and a restore.
		within(func(ctx context.Context, tx memory.Stores) error {
			var fixes []contract.ContextEntry
			var fixDigests []string
			var ended []contract.ContextEntry
			for _, i := range []int{0, 3, 6} {
				id := fmt.Sprintf("e%02d", i)
				next := id + "-v2"
				e, digest := newEntry(t, next, fmt.Sprintf("ledger walrus corrected%d", i), nil)
				e.Supersedes = &id
				fixes, fixDigests = append(fixes, e), append(fixDigests, digest)
				ended = append(ended, contract.ContextEntry{ID: id, Status: contract.EntrySuperseded, SupersededBy: &next, UpdatedAtMs: 2_000})
			}
			for _, i := range []int{4, 9} {
				ended = append(ended, contract.ContextEntry{ID: fmt.Sprintf("e%02d", i), Status: contract.EntryExpired, UpdatedAtMs: 2_000})
			}
			ended = append(ended, contract.ContextEntry{ID: "e05", Status: contract.EntryActive, UpdatedAtMs: 2_000})
			if _, err := tx.Entries.CreateEntries(ctx, scope, fixes, fixDigests); err != nil {
				return err
			}
			return tx.Entries.UpdateStatus(ctx, scope, ended, nil)
		})
		requireDerivedData(t, b.pool, "corrections, expiries and a restore")
	}

	// Documents rewritten before a pack, then after it (the packed postings dropped),
	// then restored from the content by a reindex.
	require.NoError(t, postgres.WriteEntryDocuments(ctx, b.pool, b.scope, []string{"e07", "e08"}, []string{"walrus moved", ""}))
	requireDerivedData(t, b.pool, "documents rewritten")
	require.NoError(t, postgres.PackText(ctx, b.pool, b.scope))
	requireDerivedData(t, b.pool, "a pack")
	require.NoError(t, postgres.WriteEntryDocuments(ctx, b.pool, b.scope, []string{"e10", "e11", "e12"},
		[]string{"ledger unique10q", "walrus", "ledger walrus 12 rare12z shared0"}))
	requireDerivedData(t, b.pool, "packed documents rewritten")
	for _, scope := range []runtime.Scope{b.scope, other} {
		after, more := transfer.ExportKey{}, true
		for more {
			maintain(func(ctx context.Context, tx transfer.Stores) error {
				var err error
				after, _, more, err = tx.Maintenance.ReindexEntries(ctx, scope, after, operation.StepBounds{Rows: 5, Bytes: 1 << 20})
				return err
			})
		}
		requireDerivedData(t, b.pool, "a reindex")

		after, more = transfer.ExportKey{}, true
		for more {
			maintain(func(ctx context.Context, tx transfer.Stores) error {
				var err error
				_, after, more, err = tx.Maintenance.PurgeExpiredEntries(ctx, scope, opNow.UnixMilli(), after, 2)
				return err
			})
		}
		requireDerivedData(t, b.pool, "a purge")
	}

	res, err := b.ops.Retention(ctx, b.scope, &contract.RetentionRequest{Policy: &contract.RetentionPolicy{KeepLastMessages: ptr[int64](2)}})
	require.NoError(t, err)
	for b.stepOnce(t, res.Operation.ID).State != contract.OperationSucceeded {
		requireDerivedData(t, b.pool, "a retention step")
	}
	rare := func() int {
		t.Helper()
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM entry_text_terms WHERE tenant_id = $1 AND term IN ('rare10z', 'rare16z')`,
			b.scope.TenantID).Scan(&n))
		return n
	}
	require.Positive(t, rare(), "c1's active entries' rare terms are counted")
	res, _, err = b.ops.DeleteConversation(ctx, b.scope, &contract.DeleteConversationRequest{ConversationID: "c1"})
	require.NoError(t, err)
	for b.stepOnce(t, res.Operation.ID).State != contract.OperationSucceeded {
		requireDerivedData(t, b.pool, "a deletion step")
	}
	requireDerivedData(t, b.pool, "the deletion of a conversation")
	var left int
	require.NoError(t, b.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM context_entries WHERE tenant_id = $1 AND conversation_id = 'c1')
		     + (SELECT count(*) FROM model_invocations WHERE tenant_id = $1 AND conversation_id = 'c1')
		     + (SELECT count(*) FROM cost_usage_conversations WHERE tenant_id = $1 AND conversation_id = 'c1')`,
		b.scope.TenantID).Scan(&left))
	require.Zero(t, left, "the deleted conversation's entries, invocations and sums")
	require.Zero(t, rare(), "no term of the deleted entries is left at zero")
}
