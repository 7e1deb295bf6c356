package postgres_test

import (
	"testing"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newDB is the unit of work over pool.
func newDB(tb testing.TB, pool *pgxpool.Pool, opts ...postgres.DBOptions) *postgres.DB {
	tb.Helper()
	var o postgres.DBOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	db, err := postgres.NewDB(pool, o)
	require.NoError(tb, err)
	return db
}
