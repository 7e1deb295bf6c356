package postgres

import (
	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/runtime"
)

// StoresOver returns db's stores built over tx, for tests that read what the stores'
// statements did within the transaction (pg_stat_xact_user_tables).
func StoresOver(db *DB, tx pgx.Tx) runtime.Stores { return db.over(tx) }

// EntryDocument is an entry's search document, for loaders of test data.
var EntryDocument = entryDocument

// VectorSQL is the vector half's statement over the table of model (named table),
// the index search or the exact scan.
func VectorSQL(table string, model runtime.EmbeddingModel, exact bool) string {
	return vectorSQL(vectorTable{Name: table, Model: model}, exact)
}
