package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

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

// IndexEntries adds the scope's entries ids, loaded with COPY or SQL past the store,
// to the text index, as their create would have.
func IndexEntries(ctx context.Context, pool DBTX, scope runtime.Scope, ids []string) error {
	return inTx(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT status = 'active', search, search_length, text_ord, created_at_ms FROM context_entries
			WHERE tenant_id = $1 AND project_id = $2 AND entry_id = ANY($3)`, scope.TenantID, scope.ProjectID, ids)
		if err != nil {
			return err
		}
		var text textChange
		var e entryText
		if _, err := pgx.ForEachRow(rows, []any{&e.active, &e.doc, &e.length, &e.ord, &e.created}, func() error {
			text.inserted(&e)
			return nil
		}); err != nil {
			return err
		}
		return text.apply(ctx, tx, scope)
	})
}

// DeleteEntries deletes the scope's entries ids, and takes them off the text index,
// as a purge does.
func DeleteEntries(ctx context.Context, pool DBTX, scope runtime.Scope, ids []string) error {
	return inTx(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			DELETE FROM context_entries WHERE tenant_id = $1 AND project_id = $2 AND entry_id = ANY($3)
			RETURNING status = 'active', search, search_length, text_ord`, scope.TenantID, scope.ProjectID, ids)
		if err != nil {
			return err
		}
		var text textChange
		var e entryText
		if _, err := pgx.ForEachRow(rows, []any{&e.active, &e.doc, &e.length, &e.ord}, func() error {
			text.deleted(&e)
			return nil
		}); err != nil {
			return err
		}
		return text.apply(ctx, tx, scope)
	})
}

// CountInvocations adds the scope's invocations ids, loaded with COPY or SQL past the
// store, to the cost sums, as their save would have.
func CountInvocations(ctx context.Context, pool DBTX, scope runtime.Scope, ids []string) error {
	return inTx(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT invocation_id, conversation_id, agent_id, tool_name, model, started_at_ms, input_tokens,
			       output_tokens, cached_tokens
			FROM model_invocations WHERE tenant_id = $1 AND project_id = $2 AND invocation_id = ANY($3)`,
			scope.TenantID, scope.ProjectID, ids)
		if err != nil {
			return err
		}
		var sums costChange
		var id, conversation, agent, model string
		var tool *string
		var started, input, output, cached int64
		if _, err := pgx.ForEachRow(rows, []any{&id, &conversation, &agent, &tool, &model, &started, &input, &output,
			&cached}, func() error {
			sums.add(id, conversation, agent, tool, model, started, input, output, cached)
			return nil
		}); err != nil {
			return err
		}
		return sums.addTo(ctx, tx, scope)
	})
}

// WriteEntryDocuments gives the scope's entries ids the documents of texts (their
// content left as it is), as a reindex writes documents.
func WriteEntryDocuments(ctx context.Context, pool DBTX, scope runtime.Scope, ids, texts []string) error {
	docs, lengths := make([]pgtype.TSVector, len(ids)), make([]int32, len(ids))
	for i, text := range texts {
		doc, length := entryDocument(scope, text)
		docs[i], lengths[i] = doc, int32(length)
	}
	return inTx(ctx, pool, func(tx pgx.Tx) error {
		return writeEntryDocuments(ctx, tx, scope, ids, docs, lengths)
	})
}

// BoundedQuery runs sql as the text half of recall runs its statements, under the
// search timeout d.
func BoundedQuery(ctx context.Context, db DBTX, d time.Duration, sql string, args ...any) (pgx.Rows, error) {
	return boundedQueries{db: db, timeout: d}.Query(ctx, sql, args...)
}
