package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// requireTextIndex asserts that what the text half of recall reads is exactly what the
// entries' documents hold: a posting per term of every entry's document (whatever its
// status), pending or packed and not dropped, under the document's number, with the
// term's positions counted, the document's length and the entry's creation time; and
// the statistics of the active entries' documents (their number, total length and the
// entries holding each term, the shards added up, with no row left for a term no
// active entry holds).
func requireTextIndex(t *testing.T, pool *pgxpool.Pool, step string) {
	t.Helper()
	ctx := context.Background()
	documents := textRows(t, pool, `
		SELECT e.tenant_id, e.project_id, substr(l.lexeme, 14), e.text_ord, cardinality(l.positions), e.search_length, e.created_at_ms
		FROM context_entries e CROSS JOIN LATERAL unnest(e.search) AS l(lexeme, positions, weights)`)
	postings := textRows(t, pool, `SELECT tenant_id, project_id, term, ord, tf, length, created_at_ms FROM entry_text_postings`)
	dropped := map[string]bool{}
	rows, err := pool.Query(ctx, `SELECT tenant_id, project_id, term, ord FROM entry_text_dropped`)
	require.NoError(t, err)
	for rows.Next() {
		var tenant, project, term string
		var ord int64
		require.NoError(t, rows.Scan(&tenant, &project, &term, &ord))
		dropped[fmt.Sprint(tenant, project, term, ord)] = true
	}
	require.NoError(t, rows.Err())
	rows, err = pool.Query(ctx, `SELECT tenant_id, project_id, term, first_ord, last_ord, postings, data FROM entry_text_blocks`)
	require.NoError(t, err)
	for rows.Next() {
		var tenant, project, term string
		var first, last int64
		var count int
		var data []byte
		require.NoError(t, rows.Scan(&tenant, &project, &term, &first, &last, &count, &data))
		block := decodePostings(t, data)
		require.Len(t, block, count, "%s after %s: a block's count", term, step)
		require.Equal(t, []int64{first, last}, []int64{block[0][0], block[len(block)-1][0]}, "%s after %s: a block's bounds", term, step)
		for _, p := range block {
			if !dropped[fmt.Sprint(tenant, project, term, p[0])] {
				postings[fmt.Sprint(tenant, project, term, p)]++
			}
		}
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, documents, "postings after %s: the check compares something", step)
	require.Equal(t, documents, postings, "postings after %s", step)
	pgtest.RequireTextStatistics(t, pool, step)
}

// textRows counts the postings a query selects as (tenant, project, term, ordinal, tf,
// length, creation time).
func textRows(t *testing.T, pool *pgxpool.Pool, query string) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), query)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var tenant, project, term string
		var p [4]int64
		require.NoError(t, rows.Scan(&tenant, &project, &term, &p[0], &p[1], &p[2], &p[3]))
		out[fmt.Sprint(tenant, project, term, p)]++
	}
	require.NoError(t, rows.Err())
	return out
}

// decodePostings reads a block of packed postings as its format is documented
// (docs/entries.md): per posting, unsigned varints of the distance from the ordinal
// before, the tf and the length, and a signed varint of the distance from the
// creation time before.
func decodePostings(t *testing.T, data []byte) [][4]int64 {
	t.Helper()
	var out [][4]int64
	var ord, created int64
	for len(data) > 0 {
		var f [3]uint64
		for i := range f {
			v, n := binary.Uvarint(data)
			require.Positive(t, n)
			f[i], data = v, data[n:]
		}
		d, n := binary.Varint(data)
		require.Positive(t, n)
		data = data[n:]
		ord, created = ord+int64(f[0]), created+d
		out = append(out, [4]int64{ord, int64(f[1]), int64(f[2]), created})
	}
	return out
}

// packText packs every scope's pending text postings, as a projection job does beyond
// its bound, and removes the dropped ones from the blocks.
func packText(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	db, err := postgres.NewDB(context.Background(), pool, postgres.DBOptions{})
	require.NoError(t, err)
	// A pack finding the scope locked (by the service's own projection job) packs
	// nothing: the scopes are packed until nothing is left.
	require.Eventually(t, func() bool {
		rows, err := pool.Query(ctx, `
			SELECT tenant_id, project_id FROM entry_text_postings UNION SELECT tenant_id, project_id FROM entry_text_dropped`)
		require.NoError(t, err)
		scopes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[runtime.Scope])
		require.NoError(t, err)
		for _, sc := range scopes {
			_, err := db.Memory().Stores().Projection.PackText(ctx, sc, 1_000_000, 0)
			require.NoError(t, err)
		}
		return len(scopes) == 0
	}, 10*time.Second, 10*time.Millisecond, "nothing left pending or dropped")
}

// TestTextIndexFollowsEveryWrite: the postings and statistics of the text half stay
// those of the documents through every path that writes entries: creation, correction,
// merge, expiry (memory_forget's route), the purge of expired entries, documents
// rewritten in place and reindex_text_search, import, and the deletion of a
// conversation with its entries; and so do they through packs between them, which
// move the pending postings into blocks and take the dropped ones out. Recall finds
// what the documents hold after each.
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
	packText(t, pool)
	requireTextIndex(t, pool, "a pack")

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
	packText(t, pool)
	requireTextIndex(t, pool, "a pack of what corrections, merges, expiry and purges dropped")
	require.Empty(t, text("narwhal"))

	_, err = pool.Exec(context.Background(), `UPDATE context_entries SET search = ''::tsvector, search_length = 0 WHERE entry_id <> 'e-conv'`)
	require.NoError(t, err)
	pgtest.RecountText(t, pool)
	requireTextIndex(t, pool, "documents emptied in place")
	require.Equal(t, []string{"e-conv"}, text("walrus"))
	app.advanced(t, contract.AdvancedReindexTextSearch)
	requireTextIndex(t, pool, "reindex_text_search")
	require.ElementsMatch(t, []string{"e-conv", fixed.Entry.ID, "e-ab"}, text("walrus"))

	_, data := app.export(t, map[string]any{})
	other := tenantHeaders("tenant-copy")
	app.importOK(t, data, other...)
	requireTextIndex(t, pool, "import")
	packText(t, pool)
	require.ElementsMatch(t, []string{"e-conv", fixed.Entry.ID, "e-ab"}, app.recallIDs(t, map[string]any{"query": "walrus", "mode": "text"}, other...))

	_, op := app.deleteConversation(t, "c-1")
	require.Equal(t, contract.OperationSucceeded, app.waitOperation(t, op.ID).State)
	requireTextIndex(t, pool, "deletion of a conversation")
	require.ElementsMatch(t, []string{fixed.Entry.ID, "e-ab"}, text("walrus"))
	var dropped, gone int
	require.NoError(t, pool.QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM entry_text_dropped),
		       (SELECT count(*) FROM entry_text_blocks
		        WHERE tenant_id <> 'tenant-copy'
		          AND term IN (SELECT (ts_lexize('english_stem', w))[1] FROM unnest(ARRAY['gateway', 'restarts', 'nightly']) w))`).
		Scan(&dropped, &gone))
	require.Zero(t, dropped, "the deletion took the deleted entry's packed postings out of their blocks")
	require.Zero(t, gone, "the blocks of the terms only the deleted entry held are gone")
	packText(t, pool)
	requireTextIndex(t, pool, "a pack after the deletion")
	require.ElementsMatch(t, []string{fixed.Entry.ID, "e-ab"}, text("walrus"))
}
