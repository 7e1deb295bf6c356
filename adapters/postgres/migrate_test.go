package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgvector/pgvector-go"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/hash"
	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/migrations"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// migratedDownTo is a fresh database rolled back to migration version, and the
// provider that migrates it further; on a Citus cluster a plain one (pgtest.NewPlainDSN).
func migratedDownTo(t *testing.T, version int64) (string, *goose.Provider) {
	t.Helper()
	dsn := pgtest.NewPlainDSN(t)
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
// status; migration 00025 their creation times; migration 00029 keys them by the
// documents' numbers, and recall scores them from those.
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

	// Migration 00025 gives the postings their entry's creation time.
	_, err = provider.UpTo(ctx, 25)
	require.NoError(t, err)
	var stale int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*) FROM entry_text_postings p JOIN context_entries e USING (tenant_id, project_id, entry_id)
		WHERE p.created_at_ms IS DISTINCT FROM e.created_at_ms`).Scan(&stale))
	require.Zero(t, stale, "every posting carries its entry's creation time")

	// Migration 00029 numbers the documents and leaves their postings pending, keyed by
	// the number; recall reads them pending, and packed once a pack ran.
	_, err = provider.UpTo(ctx, 29)
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `
		WITH documents AS (
			SELECT e.tenant_id, e.project_id, substr(l.lexeme, 14) COLLATE "C" AS term, e.text_ord, cardinality(l.positions) AS tf,
			       e.search_length AS length, e.created_at_ms
			FROM context_entries e CROSS JOIN LATERAL unnest(e.search) AS l(lexeme, positions, weights)
		), postings AS (SELECT tenant_id, project_id, term, ord, tf, length, created_at_ms FROM entry_text_postings)
		SELECT (SELECT count(*) FROM postings), (SELECT count(*) FROM (
			(SELECT * FROM postings EXCEPT ALL SELECT * FROM documents) UNION ALL
			(SELECT * FROM documents EXCEPT ALL SELECT * FROM postings)) d)`).Scan(&postings, &diff))
	require.Equal(t, 2+6+4+1, postings)
	require.Zero(t, diff, "the pending postings are the documents'")
	db := newDB(t, pool)
	for _, packed := range []bool{false, true} {
		if packed {
			require.NoError(t, postgres.PackText(ctx, pool, scope))
		}
		hits, err := db.Recall().TextSearch(ctx, scope, memory.TextRecall{
			RecallFilter: memory.RecallFilter{NowMs: 3}, Text: "walrus", Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []string{"short", "long"}, hitIDs(hits), "this scope's active entries, the short one first (packed: %v)", packed)
	}
}

// Migration 00026 converts a vector table created before it: its rows stay in the
// graph, whose index becomes partial, and the rows stored after it land outside the
// graph, where recall finds them until a fold moves them in.
func TestMigrationConvertsVectorTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, provider := migratedDownTo(t, 25)
	pool, err := postgres.NewPool(ctx, dsn, postgres.PoolOptions{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	scope := runtime.Scope{TenantID: "t", ProjectID: "p"}
	model := hash.New().Model()
	texts := []string{"the billing service retries nightly", "search caches warm up before releases", "the archive job compresses logs"}
	vectors, err := hash.New().Embed(ctx, texts)
	require.NoError(t, err)
	for _, stmt := range []string{
		`INSERT INTO vector_models (model_id, dimensions, table_name, created_at_ms) VALUES ($1, $2, 'entry_vectors_7', 0)`,
		`CREATE TABLE entry_vectors_7 (
			tenant_id text NOT NULL, project_id text NOT NULL, generation bigint NOT NULL, entry_id text NOT NULL,
			conversation_id text, kind text NOT NULL, tags text[] NOT NULL, expires_at_ms bigint,
			embedding vector(384) NOT NULL, PRIMARY KEY (tenant_id, project_id, generation, entry_id))`,
		`CREATE INDEX entry_vectors_7_hnsw ON entry_vectors_7 USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 200)`,
		`INSERT INTO entry_projections (tenant_id, project_id, next_generation) VALUES ('t', 'p', 2)`,
		`INSERT INTO entry_generations (tenant_id, project_id, generation, model_id, state, created_at_ms) VALUES ('t', 'p', 1, $1, 'active', 0)`,
	} {
		var args []any
		switch strings.Count(stmt, "$") {
		case 1:
			args = []any{model.ID}
		case 2:
			args = []any{model.ID, model.Dimensions}
		}
		_, err := pool.Exec(ctx, stmt, args...)
		require.NoError(t, err, stmt)
	}
	for i, text := range texts {
		id := fmt.Sprintf("e%d", i)
		doc, length := postgres.EntryDocument(scope, text)
		_, err := pool.Exec(ctx, `
			INSERT INTO context_entries (tenant_id, project_id, entry_id, kind, content, source_record_ids, tags, importance, status, version, request_sha256,
				created_at_ms, updated_at_ms, search, search_length)
			VALUES ($1, $2, $3, 'fact', $4, '{}', '{}', 0.5, 'active', 1, 'x', 1, 1, $5, $6)`,
			scope.TenantID, scope.ProjectID, id, text, doc, length)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO entry_vectors_7 (tenant_id, project_id, generation, entry_id, kind, tags, embedding)
			VALUES ($1, $2, 1, $3, 'fact', '{}', $4)`, scope.TenantID, scope.ProjectID, id, pgvector.NewVector(vectors[i]))
		require.NoError(t, err)
	}

	_, err = provider.UpTo(ctx, 26)
	require.NoError(t, err)
	var inGraph, outside int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE indexed), count(*) FILTER (WHERE NOT indexed) FROM entry_vectors_7`).
		Scan(&inGraph, &outside))
	require.Equal(t, 3, inGraph, "the rows stored before stay in the graph")
	require.Zero(t, outside)
	indexes := map[string]string{}
	rows, err := pool.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'entry_vectors_7'`)
	require.NoError(t, err)
	for rows.Next() {
		var name, def string
		require.NoError(t, rows.Scan(&name, &def))
		indexes[name] = def
	}
	require.NoError(t, rows.Err())
	require.Contains(t, indexes["entry_vectors_7_hnsw"], "USING hnsw (embedding vector_cosine_ops) WITH (m='16', ef_construction='200') WHERE indexed")
	require.Contains(t, indexes["entry_vectors_7_unindexed"], "(tenant_id, project_id, generation, entry_id) WHERE (NOT indexed)")

	db := newDB(t, pool)
	recall := func(text string, limit int) []string {
		t.Helper()
		q, err := hash.New().Embed(ctx, []string{text})
		require.NoError(t, err)
		hits, err := db.Recall().VectorSearch(ctx, scope, memory.VectorRecall{RecallFilter: memory.RecallFilter{NowMs: 2},
			Generation: memory.Generation{Number: 1, Model: model}, Vector: q[0], Limit: limit})
		require.NoError(t, err)
		return hitIDs(hits)
	}
	require.Equal(t, []string{"e1"}, recall(texts[1], 1), "the converted rows answer from the graph")

	// The backlog's claim reads the entries' document numbers (text_ord, migration
	// 00029) to find the entry before each in its conversation.
	_, err = provider.UpTo(ctx, 29)
	require.NoError(t, err)
	st := db.Memory().Stores().Projection
	e := contract.ContextEntry{ID: "new", CreatedAtMs: 1}
	_, err = pool.Exec(ctx, `
		INSERT INTO context_entries (tenant_id, project_id, entry_id, kind, content, source_record_ids, tags, importance, status, version, request_sha256,
			created_at_ms, updated_at_ms, search, search_length)
		VALUES ('t', 'p', 'new', 'fact', 'payments fail on mondays', '{}', '{}', 0.5, 'active', 1, 'x', 1, 1, ''::tsvector, 0)`)
	require.NoError(t, err)
	require.NoError(t, st.Enqueue(ctx, scope, []contract.ContextEntry{e}, model))
	backlog, err := st.ClaimBacklog(ctx, scope, 10, 2, time.Minute)
	require.NoError(t, err)
	v, err := hash.New().Embed(ctx, []string{"payments fail on mondays"})
	require.NoError(t, err)
	require.NoError(t, st.StoreBacklog(ctx, scope, backlog.Claim, []string{"new"}, map[string][][]float32{model.ID: v}))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM entry_vectors_7 WHERE NOT indexed`).Scan(&outside))
	require.Equal(t, 1, outside, "a vector stored now lands outside the graph")
	require.Equal(t, []string{"new"}, recall("payments fail on mondays", 1))
	folded, err := st.FoldVectors(ctx, scope, 10, 0)
	require.NoError(t, err)
	require.Equal(t, 1, folded)
	require.Equal(t, []string{"new"}, recall("payments fail on mondays", 1))

	// Migration 00030 rebuilds the graph over the vectors as halfvec; the rows stay in
	// it, and recall finds them through it.
	_, err = provider.UpTo(ctx, 30)
	require.NoError(t, err)
	var def string
	require.NoError(t, pool.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE indexname = 'entry_vectors_7_hnsw'`).Scan(&def))
	require.Contains(t, def, "USING hnsw (((embedding)::halfvec(384)) halfvec_cosine_ops) WITH (m='16', ef_construction='200') WHERE indexed")
	require.Equal(t, []string{"new"}, recall("payments fail on mondays", 1))
	require.Equal(t, []string{"e1"}, recall(texts[1], 1))

	_, err = provider.DownTo(ctx, 29)
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE indexname = 'entry_vectors_7_hnsw'`).Scan(&def))
	require.Contains(t, def, "USING hnsw (embedding vector_cosine_ops) WITH (m='16', ef_construction='200') WHERE indexed")
}

// On plain Postgres, up distributes nothing and needs nothing of Citus; on a Citus
// coordinator, it leaves every table with a tenant_id distributed by it, in one
// colocation group, and River's and goose's tables local.
func TestMigrateDistributesOnlyOnCitus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.NewDSN(t)
	m, err := postgres.NewMigrator(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	require.NoError(t, m.Up(ctx))

	pool, err := postgres.NewPool(ctx, dsn, postgres.PoolOptions{MaxConns: 1, ApplicationName: "migrate-test"})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var citus bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus))
	if !citus {
		var catalog *string
		require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass('pg_dist_partition')::text`).Scan(&catalog))
		require.Nil(t, catalog, "plain Postgres has no Citus catalog")
		return
	}
	var undistributed []string
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT coalesce(array_agg(c.relname ORDER BY c.relname), '{}') FROM pg_class c
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
		  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id')
		  AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid AND p.partmethod = 'h')`).
		Scan(&undistributed))
	require.Equal(t, []string{"console_sessions"}, undistributed, "only a table whose key leaves out the tenant")
	var sessions string
	require.NoError(t, pool.QueryRow(ctx, `SELECT partmethod FROM pg_dist_partition WHERE logicalrelid = 'console_sessions'::regclass`).
		Scan(&sessions))
	require.Equal(t, "n", sessions, "console_sessions is a reference table")
	var groups int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(DISTINCT colocationid) FROM pg_dist_partition WHERE partmethod = 'h'`).Scan(&groups))
	require.Equal(t, 1, groups)
	var triggered []string
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT coalesce(array_agg(DISTINCT t.tgrelid::regclass::text), '{}') FROM pg_trigger t
		JOIN pg_dist_partition p ON p.logicalrelid = t.tgrelid
		WHERE NOT t.tgisinternal`).Scan(&triggered))
	require.Empty(t, triggered, "no trigger on a distributed or reference table")
	var local []string
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT coalesce(array_agg(p.logicalrelid::regclass::text), '{}') FROM pg_dist_partition p
		WHERE p.logicalrelid::regclass::text LIKE 'river\_%' OR p.logicalrelid::regclass::text = 'goose_db_version'`).
		Scan(&local))
	require.Empty(t, local)
}

// Migration 00035 keeps the vectors of the tables before it in their rows, and 00035's
// down returns them to the default.
func TestMigrationKeepsVectorsInline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, provider := migratedDownTo(t, 34)
	pool, err := postgres.NewPool(ctx, dsn, postgres.PoolOptions{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `INSERT INTO vector_models (model_id, dimensions, table_name, created_at_ms) VALUES ('m', 512, 'entry_vectors_9', 0)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE entry_vectors_9 (tenant_id text NOT NULL, embedding vector(512) NOT NULL)`)
	require.NoError(t, err)
	options := func() (o []string) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = 'entry_vectors_9'::regclass`).Scan(&o))
		return o
	}
	require.Empty(t, options())
	_, err = provider.UpTo(ctx, 35)
	require.NoError(t, err)
	require.Equal(t, []string{"toast_tuple_target=8160"}, options())
	vector := make([]float32, 512)
	for i := range vector {
		vector[i] = float32(i%7) / 7
	}
	_, err = pool.Exec(ctx, `INSERT INTO entry_vectors_9 VALUES ('t', $1)`, pgvector.NewVector(vector))
	require.NoError(t, err)
	var toasted int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE oid = 'entry_vectors_9'::regclass`).Scan(&toasted))
	require.Zero(t, toasted, "a 512-dimension vector stays in its row")
	_, err = provider.DownTo(ctx, 34)
	require.NoError(t, err)
	require.Empty(t, options())
}
