package postgres_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/migrations"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// migratedDownTo is a fresh database rolled back to migration version, and the
// provider that migrates it further.
func migratedDownTo(t *testing.T, version int64) (string, *goose.Provider) {
	t.Helper()
	dsn := pgtest.NewDSN(t)
	sqlDB, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sqlDB.Close() })
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS)
	require.NoError(t, err)
	_, err = provider.DownTo(context.Background(), version)
	require.NoError(t, err)
	return dsn, provider
}

// Migration 00006 gives the heads of a database that already holds messages their
// exact counts.
func TestMigrationCountsStoredMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, provider := migratedDownTo(t, 5)

	pool, err := postgres.NewPool(ctx, dsn, postgres.PoolOptions{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `
		INSERT INTO conversations (tenant_id, project_id, conversation_id, last_sequence, created_at_ms)
		VALUES ('t', 'p', 'a', 3, 0), ('t', 'p', 'b', 9, 0), ('t', 'p', 'empty', 0, 0), ('u', 'p', 'a', 1, 0)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO messages (tenant_id, project_id, conversation_id, message_id, sequence, role, content, created_at_ms, search)
		SELECT t, 'p', c, 'm' || s, s, 'user', 'x', 0, ''::tsvector
		FROM (VALUES ('t', 'a', 1), ('t', 'a', 2), ('t', 'a', 3), ('t', 'b', 9), ('u', 'a', 1)) AS v(t, c, s)`)
	require.NoError(t, err)

	_, err = provider.UpTo(ctx, 6)
	require.NoError(t, err)
	requireCountsExact(t, pool)
	var total int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT sum(message_count) FROM conversations`).Scan(&total))
	require.Equal(t, int64(5), total)
}

// Migration 00023 gives the entries already stored their postings, whatever their
// status, and recall scores them from those; migration 00025 their creation times.
func TestMigrationBackfillsTextPostings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, provider := migratedDownTo(t, 22)
	pool, err := postgres.NewPool(ctx, dsn, postgres.PoolOptions{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	scope, other := runtime.Scope{TenantID: "t", ProjectID: "p"}, runtime.Scope{TenantID: "u", ProjectID: "p"}
	for _, e := range []struct {
		scope       runtime.Scope
		id, content string
	}{
		{scope, "short", "Walrus deploys."},
		{scope, "long", "The walrus team reviews the release notes and the walrus calendar."},
		{scope, "old", "The walrus ledger syncs hourly."},
		{other, "theirs", "Walrus walrus walrus."},
	} {
		doc, length := postgres.EntryDocument(e.scope, e.content)
		_, err := pool.Exec(ctx, `
			INSERT INTO context_entries (tenant_id, project_id, entry_id, kind, content, source_record_ids, tags, importance, status, version, request_sha256,
				created_at_ms, updated_at_ms, search, search_length)
			VALUES ($1, $2, $3, 'fact', $4, '{}', '{}', 0.5, 'active', 1, 'x', 1, 1, $5, $6)`,
			e.scope.TenantID, e.scope.ProjectID, e.id, e.content, doc, length)
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `UPDATE context_entries SET status = 'expired', ended_at_ms = 2, expires_at_ms = 2 WHERE entry_id = 'old'`)
	require.NoError(t, err)

	_, err = provider.UpTo(ctx, 23)
	require.NoError(t, err)
	var postings, diff int
	require.NoError(t, pool.QueryRow(ctx, `
		WITH documents AS (
			SELECT e.tenant_id, e.project_id, substr(l.lexeme, 14) COLLATE "C" AS term, e.entry_id, cardinality(l.positions) AS tf, e.search_length AS length
			FROM context_entries e CROSS JOIN LATERAL unnest(e.search) AS l(lexeme, positions, weights)
		), postings AS (SELECT tenant_id, project_id, term, entry_id, tf, length FROM entry_text_postings)
		SELECT (SELECT count(*) FROM postings), (SELECT count(*) FROM (
			(SELECT * FROM postings EXCEPT ALL SELECT * FROM documents) UNION ALL
			(SELECT * FROM documents EXCEPT ALL SELECT * FROM postings)) d)`).Scan(&postings, &diff))
	require.Equal(t, 2+6+4+1, postings, "every entry's terms, the expired one's too")
	require.Zero(t, diff, "the postings are the documents'")

	db := newDB(t, pool)
	hits, err := db.Recall().TextSearch(ctx, scope, memory.TextRecall{
		RecallFilter: memory.RecallFilter{NowMs: 3}, Text: "walrus", Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{"short", "long"}, hitIDs(hits), "this scope's active entries, the short one first")

	// Migration 00025 gives the postings their entry's creation time.
	_, err = provider.UpTo(ctx, 25)
	require.NoError(t, err)
	var stale int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*) FROM entry_text_postings p JOIN context_entries e USING (tenant_id, project_id, entry_id)
		WHERE p.created_at_ms IS DISTINCT FROM e.created_at_ms`).Scan(&stale))
	require.Zero(t, stale, "every posting carries its entry's creation time")
}
