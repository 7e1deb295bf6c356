package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestDatabasesAreIsolated runs two parallel tests that write the same key; each sees
// only its own row.
func TestDatabasesAreIsolated(t *testing.T) {
	t.Parallel()
	for _, value := range []string{"first", "second"} {
		t.Run(value, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pool := pgtest.NewDB(t)

			_, err := pool.Exec(ctx, "INSERT INTO server_secrets (name, secret) VALUES ('shared', convert_to(rpad($1, 32, '.'), 'UTF8'))", value)
			require.NoError(t, err)

			var secrets []string
			rows, err := pool.Query(ctx, "SELECT convert_from(secret, 'UTF8') FROM server_secrets")
			require.NoError(t, err)
			secrets, err = pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			require.Len(t, secrets, 1)
			require.Contains(t, secrets[0], value)
		})
	}
}

func TestTemplateIsMigrated(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewDB(t)

	var hasVector, hasSecrets bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')").Scan(&hasVector))
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('server_secrets') IS NOT NULL").Scan(&hasSecrets))
	require.True(t, hasVector, "vector extension")
	require.True(t, hasSecrets, "server_secrets table")

	// The clone came from the hash-named template, which is locked against connections.
	var isTemplate, allowsConn bool
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT datistemplate, datallowconn FROM pg_database WHERE datname = $1",
		"agent_context_tmpl_"+migrations.Hash()).Scan(&isTemplate, &allowsConn))
	require.True(t, isTemplate)
	require.False(t, allowsConn)
}

func TestNewDSNIsDroppedAfterTest(t *testing.T) {
	t.Parallel()
	var dsn string
	var conn *pgx.Conn
	t.Run("owner", func(t *testing.T) {
		dsn = pgtest.NewDSN(t)
		var err error
		conn, err = pgx.Connect(t.Context(), dsn)
		require.NoError(t, err)
		// Still open when the subtest ends, as a server under test would be: the drop
		// must disconnect it.
	})
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	pool := pgtest.NewDB(t)
	var exists bool
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", cfg.Database).Scan(&exists))
	require.False(t, exists)
}

// TestManyParallelClones exercises concurrent CREATE DATABASE from one template.
func TestManyParallelClones(t *testing.T) {
	t.Parallel()
	for i := range 8 {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			pool := pgtest.NewDB(t)
			_, err := pool.Exec(t.Context(), "SELECT $1::int", i)
			require.NoError(t, err)
		})
	}
}
