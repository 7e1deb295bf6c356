package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/operation"
)

// conversationTable is a table whose rows belong to one conversation.
type conversationTable struct {
	// Name is the table.
	Name string
	// Column names the conversation; with tenant_id and project_id it must lead an
	// index, so that a batch of a deletion finds its rows without a scan.
	Column string
	// Size lists the columns that may hold more than a few bytes (content, metadata,
	// search documents): a deletion step sums their stored sizes to bound its bytes.
	Size []string
	// Match, when set, selects the rows instead of Column: a condition on the
	// tenant ($1), project ($2) and conversation ($3).
	Match string
	// Key lists the primary key's columns after tenant_id and project_id: a deletion
	// step deletes the rows it picked by them.
	Key []string
	// Derived, when set, keeps what other tables derive from the table's rows: the
	// deletion hands it the rows it deleted, in its transaction.
	Derived *derivedRows
}

// key is t's Key as a column list.
func (t conversationTable) key() string {
	cols := make([]string, len(t.Key))
	for i, c := range t.Key {
		cols[i] = pgx.Identifier{c}.Sanitize()
	}
	return strings.Join(cols, ", ")
}

// derivedRows takes rows deleted from a table off what is derived from them.
type derivedRows struct {
	// Columns are the deleted rows' columns (or expressions over them) Forget reads.
	Columns []string
	// Forget reads the deleted rows' size and Columns from rows, takes them off, and
	// returns how many rows and bytes it read.
	Forget func(ctx context.Context, tx pgx.Tx, scope runtime.Scope, rows pgx.Rows) (int64, int64, error)
}

// returning is the deleted rows' columns the deletion's statement returns after the key,
// named d0, d1, ….
func (d *derivedRows) returning() (string, string) {
	var as, names strings.Builder
	for i, c := range d.Columns {
		fmt.Fprintf(&as, ", %s AS d%d", c, i)
		fmt.Fprintf(&names, ", d%d", i)
	}
	return as.String(), names.String()
}

// entriesDerived takes deleted entries off the text index.
var entriesDerived = &derivedRows{
	Columns: []string{"status = 'active'", "search", "search_length", "text_ord"},
	Forget: func(ctx context.Context, tx pgx.Tx, scope runtime.Scope, rows pgx.Rows) (int64, int64, error) {
		var text textChange
		var n, bytes, size int64
		var e entryText
		if _, err := pgx.ForEachRow(rows, []any{&size, &e.active, &e.doc, &e.length, &e.ord}, func() error {
			n, bytes = n+1, bytes+size
			text.deleted(&e)
			return nil
		}); err != nil {
			return 0, 0, translate(err)
		}
		return n, bytes, text.apply(ctx, tx, scope)
	},
}

// invocationsDerived takes deleted invocations off the cost sums.
var invocationsDerived = &derivedRows{
	Columns: []string{"invocation_id", "conversation_id", "agent_id", "tool_name", "model", "started_at_ms",
		"input_tokens", "output_tokens", "cached_tokens"},
	Forget: func(ctx context.Context, tx pgx.Tx, scope runtime.Scope, rows pgx.Rows) (int64, int64, error) {
		var sums costChange
		var n, bytes, size int64
		var id, conversation, agent, model string
		var tool *string
		var started, input, output, cached int64
		if _, err := pgx.ForEachRow(rows, []any{&size, &id, &conversation, &agent, &tool, &model, &started, &input,
			&output, &cached}, func() error {
			n, bytes = n+1, bytes+size
			sums.add(id, conversation, agent, tool, model, started, input, output, cached)
			return nil
		}); err != nil {
			return 0, 0, translate(err)
		}
		return n, bytes, sums.takeFrom(ctx, tx, scope)
	},
}

// match is the condition selecting t's rows of the conversation $3.
func (t conversationTable) match() string {
	if t.Match != "" {
		return t.Match
	}
	return pgx.Identifier{t.Column}.Sanitize() + " = $3"
}

// linkedArtifacts selects the export artifacts that hold records of the conversation:
// they are gone from the moment of the tombstone (which marks them deleting) and are
// removed first, their chunks before them.
const linkedArtifacts = `artifact_id IN (SELECT artifact_id FROM export_artifact_conversations
	WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = $3)`

// sizeExpr is the stored size of t's large columns in a row, read from the values'
// headers (pg_column_size never fetches or decompresses a TOASTed value).
func (t conversationTable) sizeExpr() string {
	terms := make([]string, len(t.Size))
	for i, c := range t.Size {
		terms[i] = "coalesce(pg_column_size(" + pgx.Identifier{c}.Sanitize() + "), 0)"
	}
	return "(" + strings.Join(terms, " + ") + ")::bigint"
}

// messagesTable is the messages table; retention bounds its steps by the same sizes.
var messagesTable = conversationTable{Name: "messages", Column: "conversation_id", Size: []string{"content", "metadata", "search"},
	Key: []string{"conversation_id", "message_id"}}

// conversationTables lists every table holding rows of a conversation, in the order
// physical deletion empties them (a table whose rows other tables reference by a
// foreign key comes after those tables, unless the reference cascades). A migration
// that creates such a table adds it here: the deletion job then removes its rows, and
// the test that scans every column of every table after a deletion proves it. The
// vector tables, created at run time, are listed by vectorDeletionTables.
var conversationTables = []conversationTable{
	{Name: "export_chunks", Size: []string{"data"}, Match: linkedArtifacts, Key: []string{"artifact_id", "chunk_index"}},
	{Name: "export_artifacts", Size: []string{"sha256"}, Match: linkedArtifacts, Key: []string{"artifact_id"}},
	messagesTable,
	// The A2A events that name the conversation (window_created, entry_written):
	// IDs only, but a deleted conversation leaves no trace beyond its tombstone.
	{Name: "a2a_events", Column: "conversation_id", Size: []string{"payload"}, Key: []string{"seq"}},
	// Entries and their queue rows; the vector tables (one per embedding model, listed
	// by vectorDeletionTables) are emptied before every table here.
	{Name: "entry_projection_queue", Column: "conversation_id", Size: []string{"entry_id"}, Key: []string{"entry_id"}},
	{Name: "context_entries", Column: "conversation_id", Size: []string{"content", "metadata", "search", "status_reason"},
		Key: []string{"entry_id"}, Derived: entriesDerived},
	// Windows go last: deleting one cascades to the derivations that name it from
	// another conversation (a derivation's conversation_id is its target's).
	{Name: "window_derivations", Column: "conversation_id", Size: []string{"metadata"}, Key: []string{"derivation_id"}},
	{Name: "model_invocations", Column: "conversation_id", Size: []string{"response_content", "error", "metadata"},
		Key: []string{"invocation_id"}, Derived: invocationsDerived},
	{Name: "context_window_items", Column: "conversation_id", Size: []string{"content", "knowledge_evidence", "metadata"},
		Key: []string{"window_id", "ordinal"}},
	{Name: "context_windows", Column: "conversation_id", Size: []string{"metadata"}, Key: []string{"window_id"}},
}

// DeleteConversationStep implements operation.OperationStore. One statement shape
// serves every table: it picks rows with their sizes, keeps those whose bytes before
// them (in key order) stay under what is left of the budget, and deletes those by key
// with the scope's tenant, so that Citus routes it to the tenant's shard; the sizes
// are summed from what it picked, as Citus allows no function but an immutable one
// in a RETURNING clause. A batch runs table by table in the order of
// conversationTables. Every statement is an index range
// of at most bounds.Rows rows; the total is not counted ahead (that would read the
// whole conversation in one statement), so progress.total stays null until the last
// step sets it to what was deleted. The deleted entries are taken off the text
// index, the deleted invocations off the cost sums, in the step's transaction. Once
// no row is left, steps remove the scope's dropped text postings from their blocks
// (not counted as records), and the last step, finding none, marks the operation
// succeeded.
func (s *OperationStore) DeleteConversationStep(ctx context.Context, scope runtime.Scope, operationID, conversationID string, bounds operation.StepBounds, nowMs int64) (bool, error) {
	return boundedStep(ctx, s.db, scope, operationID, bounds, func(tx pgx.Tx) (bool, error) {
		vectors, err := vectorDeletionTables(ctx, tx)
		if err != nil {
			return false, err
		}
		var deleted, bytes int64
		for _, t := range append(vectors, conversationTables...) {
			if deleted >= int64(bounds.Rows) || bytes >= bounds.Bytes {
				break
			}
			rows, size, err := deleteConversationRows(ctx, tx, scope, conversationID, t, int64(bounds.Rows)-deleted, bounds.Bytes-bytes)
			if err != nil {
				return false, err
			}
			deleted += rows
			bytes += size
		}
		if deleted > 0 {
			_, err := tx.Exec(ctx, `
				UPDATE operations SET progress_done = progress_done + $4, updated_at_ms = $5
				WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3`,
				scope.TenantID, scope.ProjectID, operationID, deleted, nowMs)
			return false, translate(err)
		}
		// The entries' packed postings were listed as dropped, their terms still in
		// the blocks: the deletion is not done until those are rewritten without them.
		removed, err := removeDropped(ctx, tx, scope, bounds.Rows)
		if err != nil || removed > 0 {
			return false, err
		}
		// The result is spelled as text: jsonb_build_object is STABLE, and Citus
		// calls no STABLE function on a column in an UPDATE.
		_, err = tx.Exec(ctx, `
			UPDATE operations
			SET state = 'succeeded', progress_total = progress_done, updated_at_ms = $4, completed_at_ms = $4,
			    result = ('{"deletedRecords":' || progress_done::text || '}')::jsonb
			WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3`,
			scope.TenantID, scope.ProjectID, operationID, nowMs)
		return err == nil, translate(err)
	})
}

// deleteConversationRowsSQL deletes the rows of the table %[1]s that %[2]s selects, at
// most $4 of them and only while the bytes of those before (in key order) stay under
// $5, by key (%[4]s) with the scope's tenant, so that Citus routes it to the tenant's
// shard, as gone: each deleted row's key and the columns %[5]s; bounded holds the
// sizes (%[3]s) of the rows picked, since Citus allows no function but an immutable
// one in a RETURNING clause. The caller adds the SELECT from gone.
const deleteConversationRowsSQL = `
	WITH picked AS (
	    SELECT %[4]s, %[3]s AS size FROM %[1]s
	    WHERE tenant_id = $1 AND project_id = $2 AND %[2]s
	    LIMIT $4
	), bounded AS (
	    SELECT * FROM (
	        SELECT *, sum(size) OVER (ORDER BY %[4]s ROWS UNBOUNDED PRECEDING) - size AS before
	        FROM picked
	    ) p
	    WHERE before < $5
	), gone AS (
	    DELETE FROM %[1]s WHERE tenant_id = $1 AND project_id = $2 AND (%[4]s) IN (SELECT %[4]s FROM bounded)
	    RETURNING %[4]s%[5]s
	)
	`

// deleteConversationRows deletes a bounded batch of t's rows of the conversation, and
// returns how many rows and bytes it deleted. A table with derived data hands the
// deleted rows to it.
func deleteConversationRows(ctx context.Context, tx pgx.Tx, scope runtime.Scope, conversationID string, t conversationTable, rowBound, byteBound int64) (int64, int64, error) {
	var columns, names string
	if t.Derived != nil {
		columns, names = t.Derived.returning()
	}
	query := fmt.Sprintf(deleteConversationRowsSQL, pgx.Identifier{t.Name}.Sanitize(), t.match(), t.sizeExpr(), t.key(), columns)
	args := []any{scope.TenantID, scope.ProjectID, conversationID, rowBound, byteBound}
	if t.Derived != nil {
		rows, err := tx.Query(ctx, query+`SELECT b.size`+names+` FROM gone JOIN bounded b USING (`+t.key()+`)`, args...)
		if err != nil {
			return 0, 0, translate(err)
		}
		return t.Derived.Forget(ctx, tx, scope, rows)
	}
	var n, size int64
	if err := tx.QueryRow(ctx, query+`SELECT count(*), coalesce(sum(b.size), 0)::bigint FROM gone JOIN bounded b USING (`+t.key()+`)`,
		args...).Scan(&n, &size); err != nil {
		return 0, 0, translate(err)
	}
	return n, size, nil
}
