package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/adapters/postgres/textindex"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/memory"
	"github.com/agent-context/agent-context/runtime/operation"
)

// OperationStoresOver returns the operation store built over tx, for tests that read
// what its statements did within the transaction (pg_stat_xact_user_tables).
func OperationStoresOver(tx pgx.Tx) operation.Stores {
	return operation.Stores{Operations: &OperationStore{db: tx}}
}

// AgentMessagesOver returns the agent message store built over tx, as a unit of work
// builds it.
func AgentMessagesOver(tx pgx.Tx) a2a.AgentMessageStore {
	return &AgentMessageStore{db: tx, inUnit: true}
}

// EntryDocument is an entry's search document, for loaders of test data.
var EntryDocument = entryDocument

// VectorSQL is the vector half's statement over the table of model (named table),
// the index search or the exact scan.
func VectorSQL(table string, model memory.EmbeddingModel, exact bool) string {
	plan := vectorIndexed
	if exact {
		plan = vectorExact
	}
	return vectorSQL(vectorTable{Name: table, Model: model}, plan, false)
}

// EnglishTerm is the term a word stands for in entry documents and recall queries.
var EnglishTerm = textindex.EnglishTerm

// RecallTermLexemes returns the terms of a recall's text query, without the scope's
// tag.
func RecallTermLexemes(text string) []string {
	var out []string
	for _, t := range textindex.RecallTerms(text) {
		out = append(out, t.Lexeme)
	}
	return out
}

// RecallOver is db's recall store over tx, for tests that read what its statements
// did within the transaction (pg_stat_get_xact_numscans).
func RecallOver(db *DB, tx pgx.Tx) *RecallStore {
	s := db.Recall()
	s.db = tx
	return s
}

// RecallWalkingFilters is db's recall store that never reads the entries passing a
// filter first, however few: both halves search as they do when many pass, and the
// filter is applied by the lookups. Nor does its vector half rank a scope whole,
// however small: it searches the graph.
func RecallWalkingFilters(db *DB) *RecallStore {
	s := db.Recall()
	s.fewRows = -1
	return s
}

// PackText packs every pending text posting of scope into blocks, and removes the
// postings of gone documents from them, as projection jobs do.
func PackText(ctx context.Context, pool DBTX, scope runtime.Scope) error {
	s := &ProjectionStore{db: pool}
	for {
		n, err := s.PackText(ctx, scope, 1_000_000, 0)
		if err != nil || n == 0 {
			return err
		}
	}
}

// BoundedQuery runs sql as the text half of recall runs its statements, under the
// search timeout d.
func BoundedQuery(ctx context.Context, db DBTX, d time.Duration, sql string, args ...any) (pgx.Rows, error) {
	return boundedQueries{db: db, timeout: d}.Query(ctx, sql, args...)
}
