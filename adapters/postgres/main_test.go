package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newDB is the unit of work over pool.
func newDB(tb testing.TB, pool *pgxpool.Pool, opts ...postgres.DBOptions) *postgres.DB {
	tb.Helper()
	var o postgres.DBOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	db, err := postgres.NewDB(context.Background(), pool, o)
	require.NoError(tb, err)
	return db
}

// The pool's sessions run without JIT compilation unless the database URL asks for it.
func TestPoolSessionsRunWithoutJIT(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDSN(t)
	for _, c := range []struct{ dsn, want string }{
		{dsn, "off"},
		{dsn + "&jit=on", "on"},
	} {
		pool, err := postgres.NewPool(ctx, c.dsn, postgres.PoolOptions{MaxConns: 1})
		require.NoError(t, err)
		var jit string
		require.NoError(t, pool.QueryRow(ctx, `SHOW jit`).Scan(&jit))
		pool.Close()
		require.Equal(t, c.want, jit, c.dsn)
	}
}
