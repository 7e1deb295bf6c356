package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// requireTextIndex asserts that what the text half of recall reads is exactly what the
// entries' documents hold: a posting per term of every entry's document (whatever its
// status) with the term's positions counted, the document's length and the entry's
// creation time, and the statistics of the active entries' documents (their number,
// total length and the entries holding each term, the shards added up).
func requireTextIndex(t *testing.T, pool *pgxpool.Pool, step string) {
	t.Helper()
	ctx := context.Background()
	for name, pair := range map[string][2]string{
		"postings": {`
			SELECT tenant_id, project_id, term, entry_id, tf, length, created_at_ms FROM entry_text_postings`, `
			SELECT e.tenant_id, e.project_id, substr(l.lexeme, 14) COLLATE "C", e.entry_id, cardinality(l.positions), e.search_length,
			       e.created_at_ms
			FROM context_entries e CROSS JOIN LATERAL unnest(e.search) AS l(lexeme, positions, weights)`},
		"scope statistics": {`
			SELECT tenant_id, project_id, sum(docs), sum(length) FROM entry_text_stats
			GROUP BY 1, 2 HAVING sum(docs) <> 0 OR sum(length) <> 0`, `
			SELECT tenant_id, project_id, count(*), sum(search_length) FROM context_entries
			WHERE status = 'active' GROUP BY 1, 2`},
		"term statistics": {`
			SELECT tenant_id, project_id, term, sum(docs) FROM entry_text_terms GROUP BY 1, 2, 3 HAVING sum(docs) <> 0`, `
			SELECT e.tenant_id, e.project_id, substr(l.lexeme, 14), count(*)
			FROM context_entries e CROSS JOIN LATERAL unnest(e.search) AS l(lexeme, positions, weights)
			WHERE e.status = 'active' GROUP BY 1, 2, 3`},
	} {
		var diff, rows int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), (SELECT count(*) FROM (`+pair[1]+`) d) FROM (
			(`+pair[0]+` EXCEPT ALL `+pair[1]+`) UNION ALL (`+pair[1]+` EXCEPT ALL `+pair[0]+`)) d`).Scan(&diff, &rows))
		require.Zero(t, diff, "%s after %s", name, step)
		require.NotZero(t, rows, "%s after %s: the check compares something", name, step)
	}
}

// TestTextIndexFollowsEveryWrite: the postings and statistics of the text half stay
// those of the documents through every path that writes entries: creation, correction,
// merge, expiry (memory_forget's route), the purge of expired entries, documents
// rewritten in place and reindex_text_search, import, and the deletion of a
// conversation with its entries. Recall finds what the documents hold after each.
func TestTextIndexFollowsEveryWrite(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	pool := openPool(t, app.dsn)
	text := func(query string) []string {
		t.Helper()
		return app.recallIDs(t, map[string]any{"query": query, "mode": "text"})
	}
	soon := time.Now().Add(time.Hour).UnixMilli()
	app.createEntry(t, map[string]any{"id": "e-conv", "kind": "fact", "content": "The walrus gateway restarts nightly.", "conversationId": "c-1"})
	app.createEntry(t, entryBody("e-fix", "The walrus ledger syncs hourly."))
	app.createEntry(t, entryBody("e-a", "Billing retries walrus invoices."))
	app.createEntry(t, entryBody("e-b", "Billing retries walrus refunds twice, twice."))
	app.createEntry(t, entryBody("e-forget", "The narwhal cache warms slowly."))
	app.createEntry(t, map[string]any{"id": "e-soon", "kind": "fact", "content": "The narwhal queue drains early.", "expiresAtMs": soon})
	requireTextIndex(t, pool, "creation")

	var fixed contract.CorrectEntryResponse
	app.post(t, pathEntriesFix, map[string]any{"entryId": "e-fix", "content": "The walrus ledger syncs weekly, weekly."}).
		requireOK(t, http.StatusCreated, &fixed)
	requireTextIndex(t, pool, "correction")
	require.Empty(t, text("hourly"), "the old version is no longer recallable")

	app.post(t, pathEntriesMerge, map[string]any{"entryIds": []string{"e-a", "e-b"},
		"merged": map[string]any{"id": "e-ab", "kind": "fact", "content": "Billing retries walrus invoices and refunds."}}).
		requireOK(t, http.StatusCreated, nil)
	requireTextIndex(t, pool, "merge")
	require.Equal(t, []string{"e-ab"}, text("refunds"))

	app.post(t, pathEntriesExpire, map[string]any{"entryId": "e-forget"}).requireOK(t, http.StatusOK, nil)
	requireTextIndex(t, pool, "expiry")
	_, err := pool.Exec(context.Background(), `UPDATE context_entries SET expires_at_ms = $1 WHERE expires_at_ms = $2`,
		time.Now().Add(-time.Second).UnixMilli(), soon)
	require.NoError(t, err)
	require.JSONEq(t, `{"purgedEntries":2}`, string(app.advanced(t, contract.AdvancedPurgeExpiredEntries).Result))
	requireTextIndex(t, pool, "purge")
	require.Empty(t, text("narwhal"))

	_, err = pool.Exec(context.Background(), `UPDATE context_entries SET search = ''::tsvector, search_length = 0 WHERE entry_id <> 'e-conv'`)
	require.NoError(t, err)
	requireTextIndex(t, pool, "documents emptied in place")
	require.Equal(t, []string{"e-conv"}, text("walrus"))
	app.advanced(t, contract.AdvancedReindexTextSearch)
	requireTextIndex(t, pool, "reindex_text_search")
	require.ElementsMatch(t, []string{"e-conv", fixed.Entry.ID, "e-ab"}, text("walrus"))

	_, data := app.export(t, map[string]any{})
	other := tenantHeaders("tenant-copy")
	app.importOK(t, data, other...)
	requireTextIndex(t, pool, "import")
	require.ElementsMatch(t, []string{"e-conv", fixed.Entry.ID, "e-ab"}, app.recallIDs(t, map[string]any{"query": "walrus", "mode": "text"}, other...))

	_, op := app.deleteConversation(t, "c-1")
	require.Equal(t, contract.OperationSucceeded, app.waitOperation(t, op.ID).State)
	requireTextIndex(t, pool, "deletion of a conversation")
	require.ElementsMatch(t, []string{fixed.Entry.ID, "e-ab"}, text("walrus"))
	var left int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM entry_text_postings WHERE entry_id = 'e-conv' AND tenant_id <> 'tenant-copy'`).Scan(&left))
	require.Zero(t, left, "the deleted entry's postings go with it")
}
