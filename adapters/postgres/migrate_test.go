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
