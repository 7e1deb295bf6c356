package postgres

import (
	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/runtime"
)

// StoresOver returns db's stores built over tx, for tests that read what the stores'
// statements did within the transaction (pg_stat_xact_user_tables).
func StoresOver(db *DB, tx pgx.Tx) runtime.Stores { return db.over(tx) }
