package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/agent-context/agent-context/adapters/postgres/textindex"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/operation"
	"github.com/agent-context/agent-context/runtime/transfer"
)

// ExportStore keeps export artifacts and walks the records of exports and of the
// advanced operations (docs/export.md).
type ExportStore struct {
	db DBTX
}

var (
	_ transfer.ArtifactStore    = (*ExportStore)(nil)
	_ transfer.RecordWalker     = (*ExportStore)(nil)
	_ transfer.MaintenanceStore = (*ExportStore)(nil)
)

const artifactColumns = `artifact_id, operation_id, state, chunk_count, total_bytes, sha256, created_at_ms, expires_at_ms, format`

func scanArtifact(row pgx.Row) (transfer.Artifact, error) {
	var a transfer.Artifact
	err := row.Scan(&a.ID, &a.OperationID, &a.State, &a.ChunkCount, &a.TotalBytes, &a.SHA256, &a.CreatedAtMs,
		&a.ExpiresAtMs, &a.Format)
	if errors.Is(err, pgx.ErrNoRows) {
		return transfer.Artifact{}, runtime.NotFound("artifactId", "export artifact")
	}
	return a, translate(err)
}

// CreateArtifact implements transfer.ArtifactStore.
func (s *ExportStore) CreateArtifact(ctx context.Context, scope runtime.Scope, a transfer.Artifact, evidenceKey *string) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO export_artifacts (tenant_id, project_id, artifact_id, operation_id, format, evidence_key, state,
			created_at_ms, expires_at_ms)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		scope.TenantID, scope.ProjectID, a.ID, a.OperationID, a.Format, evidenceKey, a.State, a.CreatedAtMs, a.ExpiresAtMs)
	return translate(err)
}

// Artifact implements transfer.ArtifactStore.
func (s *ExportStore) Artifact(ctx context.Context, scope runtime.Scope, id string) (transfer.Artifact, error) {
	return scanArtifact(s.db.QueryRow(ctx, `SELECT `+artifactColumns+` FROM export_artifacts
		WHERE tenant_id = $1 AND project_id = $2 AND artifact_id = $3 AND state <> 'deleting'`,
		scope.TenantID, scope.ProjectID, id))
}

// OperationArtifact implements transfer.ArtifactStore; an artifact being deleted is
// returned in its state deleting, for the export to fail on.
func (s *ExportStore) OperationArtifact(ctx context.Context, scope runtime.Scope, operationID string) (transfer.Artifact, error) {
	return scanArtifact(s.db.QueryRow(ctx, `SELECT `+artifactColumns+` FROM export_artifacts
		WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3`,
		scope.TenantID, scope.ProjectID, operationID))
}

// Chunks implements transfer.ArtifactStore.
func (s *ExportStore) Chunks(ctx context.Context, scope runtime.Scope, artifactID string, from, limit int, fn func(transfer.ArtifactChunk) error) error {
	rows, err := s.db.Query(ctx, `
		SELECT chunk_index, data, sha256 FROM export_chunks
		WHERE tenant_id = $1 AND project_id = $2 AND artifact_id = $3 AND chunk_index >= $4
		ORDER BY chunk_index
		LIMIT $5`,
		scope.TenantID, scope.ProjectID, artifactID, from, limit)
	if err != nil {
		return translate(err)
	}
	defer rows.Close()
	for rows.Next() {
		var c transfer.ArtifactChunk
		if err := rows.Scan(&c.Index, &c.Data, &c.SHA256); err != nil {
			return translate(err)
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	return translate(rows.Err())
}

var exportChunkColumns = []string{"tenant_id", "project_id", "artifact_id", "chunk_index", "data", "sha256"}

// WriteChunks implements transfer.ArtifactStore. The conversations' heads are locked
// first (FOR SHARE, in ID order, as every writer of a conversation's records holds
// them), then the artifact: the order a deletion takes them in too (the tombstone,
// then the artifacts it marks), so the two never deadlock.
func (s *ExportStore) WriteChunks(ctx context.Context, scope runtime.Scope, artifactID string, chunks []transfer.ArtifactChunk, conversations []string) error {
	if len(conversations) > 0 {
		var deleted []string
		rows, err := s.db.Query(ctx, `
			SELECT conversation_id FROM (
				SELECT conversation_id, deleted_at_ms FROM conversations
				WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = ANY($3)
				ORDER BY conversation_id
				FOR SHARE
			) c
			WHERE deleted_at_ms IS NOT NULL`,
			scope.TenantID, scope.ProjectID, conversations)
		if err != nil {
			return translate(err)
		}
		if deleted, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return translate(err)
		}
		if len(deleted) > 0 {
			return runtime.Errorf(contract.CodeConflict, "a conversation of the export was deleted").
				With("reason", "conversation_deleted").With("conversationIds", deleted)
		}
	}
	if err := lockBuilding(ctx, s.db, scope, artifactID); err != nil {
		return err
	}
	var total int64
	for _, c := range chunks {
		total += int64(len(c.Data))
	}
	if _, err := s.db.CopyFrom(ctx, pgx.Identifier{"export_chunks"}, exportChunkColumns, pgx.CopyFromSlice(len(chunks), func(i int) ([]any, error) {
		c := chunks[i]
		return []any{scope.TenantID, scope.ProjectID, artifactID, int32(c.Index), c.Data, c.SHA256}, nil
	})); err != nil {
		return translate(err)
	}
	_, err := s.db.Exec(ctx, `
		WITH linked AS (
			INSERT INTO export_artifact_conversations (tenant_id, project_id, conversation_id, artifact_id)
			SELECT $1, $2, c, $3 FROM unnest($4::text[]) AS c
			ON CONFLICT DO NOTHING
		)
		UPDATE export_artifacts SET chunk_count = chunk_count + $5, total_bytes = total_bytes + $6
		WHERE tenant_id = $1 AND project_id = $2 AND artifact_id = $3`,
		scope.TenantID, scope.ProjectID, artifactID, conversations, len(chunks), total)
	return translate(err)
}

// lockBuilding locks a building artifact until the transaction ends; one that is gone
// or no longer building is CONFLICT with reason artifact_deleted.
func lockBuilding(ctx context.Context, db DBTX, scope runtime.Scope, artifactID string) error {
	var state string
	err := db.QueryRow(ctx, `
		SELECT state FROM export_artifacts
		WHERE tenant_id = $1 AND project_id = $2 AND artifact_id = $3
		FOR UPDATE`, scope.TenantID, scope.ProjectID, artifactID).Scan(&state)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return translate(err)
	}
	if state != contract.ArtifactBuilding {
		return runtime.Errorf(contract.CodeConflict, "the export artifact was deleted").With("reason", "artifact_deleted")
	}
	return nil
}

// FinishArtifact implements transfer.ArtifactStore.
func (s *ExportStore) FinishArtifact(ctx context.Context, scope runtime.Scope, artifactID, sha string) error {
	if err := lockBuilding(ctx, s.db, scope, artifactID); err != nil {
		return err
	}
	_, err := s.db.Exec(ctx, `
		UPDATE export_artifacts SET state = 'ready', sha256 = $4
		WHERE tenant_id = $1 AND project_id = $2 AND artifact_id = $3`,
		scope.TenantID, scope.ProjectID, artifactID, sha)
	return translate(err)
}

// purgeableArtifact is the condition on an export artifact a that the purge removes
// at $1 (the time in ms): expired, or left building by an operation that ended. tenant
// and project name a's scope: a's columns, or the parameters of a statement that locks
// (Citus locks only where it sees every table it reads filtered by the tenant).
func purgeableArtifact(tenant, project string) string {
	return `((a.state = 'ready' AND a.expires_at_ms <= $1)
	OR (a.state = 'building' AND NOT EXISTS (
	        SELECT 1 FROM operations o
	        WHERE o.tenant_id = ` + tenant + ` AND o.project_id = ` + project + `
	          AND o.operation_id = a.operation_id AND o.state IN ('pending', 'running'))))`
}

// purgeCandidates is how many artifacts a purge step lists to lock one of them.
const purgeCandidates = 16

// PurgeArtifactsStep implements transfer.ArtifactStore. The table holds one row per
// artifact, so the candidates are found by a scan of it across every scope (the purge
// is global), without a lock; then the step locks the first of them it can, by its key
// with its tenant (SKIP LOCKED, so replicas purge side by side): Citus locks no rows
// of several tenants in one statement. A step deletes at most bounds.Bytes of chunks
// (each at most 1 MiB) and the artifact once none is left. When every candidate is
// held by another replica, which purges it, the step is done, as when none is left.
func (s *ExportStore) PurgeArtifactsStep(ctx context.Context, nowMs int64, bounds operation.StepBounds) (bool, error) {
	done := false
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		if err := setLocalTimeout(ctx, tx, bounds.Timeout); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT a.tenant_id, a.project_id, a.artifact_id FROM export_artifacts a
			WHERE `+purgeableArtifact("a.tenant_id", "a.project_id")+` LIMIT $2`, nowMs, purgeCandidates)
		if err != nil {
			return translate(err)
		}
		candidates, err := pgx.CollectRows(rows, pgx.RowToStructByPos[artifactKey])
		if err != nil {
			return translate(err)
		}
		if len(candidates) == 0 {
			done = true
			return nil
		}
		var scope runtime.Scope
		var id string
		for _, c := range candidates {
			err := tx.QueryRow(ctx, `SELECT a.artifact_id FROM export_artifacts a
				WHERE a.tenant_id = $2 AND a.project_id = $3 AND a.artifact_id = $4 AND `+purgeableArtifact("$2", "$3")+`
				FOR UPDATE OF a SKIP LOCKED`, nowMs, c.TenantID, c.ProjectID, c.ArtifactID).Scan(&id)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				return translate(err)
			}
			scope = runtime.Scope{TenantID: c.TenantID, ProjectID: c.ProjectID}
			break
		}
		if id == "" {
			done = true
			return nil
		}
		tag, err := tx.Exec(ctx, `
			DELETE FROM export_chunks
			WHERE tenant_id = $1 AND project_id = $2 AND artifact_id = $3 AND chunk_index IN (
				SELECT chunk_index FROM export_chunks
				WHERE tenant_id = $1 AND project_id = $2 AND artifact_id = $3
				ORDER BY chunk_index LIMIT $4)`,
			scope.TenantID, scope.ProjectID, id, chunkBatch(bounds))
		if err != nil || tag.RowsAffected() > 0 {
			return translate(err)
		}
		_, err = tx.Exec(ctx, `DELETE FROM export_artifacts WHERE tenant_id = $1 AND project_id = $2 AND artifact_id = $3`,
			scope.TenantID, scope.ProjectID, id)
		return translate(err)
	})
	return done, err
}

// artifactKey is an export artifact's key.
type artifactKey struct {
	TenantID, ProjectID, ArtifactID string
}

// chunkBatch is how many chunks (each at most 1 MiB) fit a step's bounds.
func chunkBatch(bounds operation.StepBounds) int64 {
	return max(1, min(int64(bounds.Rows), bounds.Bytes/contract.MaxExportChunkBytes))
}

// keyRow is the key of one record and the bytes it holds, read before the records
// themselves (pickKeys).
type keyRow struct {
	key  transfer.ExportKey
	size int64
}

// pickKeys runs a query that lists records' keys and sizes in stream order (at most
// q.Rows) and returns the keys of those that fit q.Bytes (always at least one), and
// whether the walk was cut short. The records are then read as an index range up to
// the last key, so the bytes a step reads are known before a byte of content is.
// Sizes come from the values' headers (octet_length never reads a TOASTed value).
func pickKeys(ctx context.Context, db DBTX, q transfer.ExportQuery, scan func(pgx.Rows, *keyRow) error, sql string, args ...any) ([]transfer.ExportKey, bool, error) {
	rows, err := db.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, false, translate(err)
	}
	defer rows.Close()
	var keys []transfer.ExportKey
	var total int64
	for rows.Next() {
		if len(keys) > 0 && total >= q.Bytes {
			return keys, true, nil
		}
		var k keyRow
		if err := scan(rows, &k); err != nil {
			return nil, false, translate(err)
		}
		keys = append(keys, k.key)
		total += k.size
	}
	if err := rows.Err(); err != nil {
		return nil, false, translate(err)
	}
	return keys, len(keys) == q.Rows, nil
}

// conversationFilter is the condition on alias's conversation of a query whose
// argument n is the export's conversation (empty: every conversation).
func conversationFilter(alias string, n int) string {
	return fmt.Sprintf(" AND ($%d = '' OR %s.conversation_id = $%d)", n, alias, n)
}

// ExportMessages implements transfer.RecordWalker, walking messages_by_sequence.
func (s *ExportStore) ExportMessages(ctx context.Context, scope runtime.Scope, q transfer.ExportQuery, fn func(*contract.ConversationRecord) error) (bool, error) {
	where := `m.tenant_id = $1 AND m.project_id = $2 AND (m.conversation_id, m.sequence) > ($3, $4)` +
		conversationFilter("m", 5) + ` AND ` + liveConversation("m")
	keys, more, err := pickKeys(ctx, s.db, q, func(rows pgx.Rows, k *keyRow) error {
		return rows.Scan(&k.key.ConversationID, &k.key.Sequence, &k.size)
	}, `
		SELECT m.conversation_id, m.sequence, octet_length(m.content)::bigint + coalesce(octet_length(m.metadata::text), 0)
		FROM messages m WHERE `+where+`
		ORDER BY m.conversation_id, m.sequence
		LIMIT $6`,
		scope.TenantID, scope.ProjectID, q.After.ConversationID, q.After.Sequence, q.ConversationID, q.Rows)
	if err != nil || len(keys) == 0 {
		return false, err
	}
	last := keys[len(keys)-1]
	rows, err := s.db.Query(ctx, `
		SELECT m.conversation_id, m.message_id, m.role, m.content, m.sequence, m.created_at_ms, m.metadata
		FROM messages m WHERE `+where+` AND (m.conversation_id, m.sequence) <= ($6, $7)
		ORDER BY m.conversation_id, m.sequence`,
		pgx.QueryExecModeExec, scope.TenantID, scope.ProjectID, q.After.ConversationID, q.After.Sequence, q.ConversationID, last.ConversationID, last.Sequence)
	if err != nil {
		return false, translate(err)
	}
	defer rows.Close()
	for rows.Next() {
		var m contract.ConversationRecord
		if err := rows.Scan(&m.Scope.ConversationID, &m.ID, &m.Role, &m.Content, &m.Sequence, &m.CreatedAtMs, &m.Metadata); err != nil {
			return false, translate(err)
		}
		if err := fn(&m); err != nil {
			return false, err
		}
	}
	return more, translate(rows.Err())
}

// windowFilter selects the windows of an export query: after $3, of conversation $4
// (or any), created before $5, of a live conversation.
const windowFilter = `w.tenant_id = $1 AND w.project_id = $2 AND w.window_id > $3
	AND ($4 = '' OR w.conversation_id = $4) AND w.created_at_ms < $5 AND ` + "NOT EXISTS (" + `
	SELECT 1 FROM conversations c
	WHERE c.tenant_id = w.tenant_id AND c.project_id = w.project_id
	  AND c.conversation_id = w.conversation_id AND c.deleted_at_ms IS NOT NULL)`

// ExportWindows implements transfer.RecordWalker with three statements: the keys and
// sizes, the headers up to the last key that fits, and their items as one index range
// (of the conversation's items when the export has one), ordered like the headers;
// items of windows the filter left out are skipped.
func (s *ExportStore) ExportWindows(ctx context.Context, scope runtime.Scope, q transfer.ExportQuery, sink transfer.WindowSink) (bool, error) {
	keys, more, err := pickKeys(ctx, s.db, q, func(rows pgx.Rows, k *keyRow) error {
		return rows.Scan(&k.key.ID, &k.size)
	}, `
		SELECT w.window_id, w.content_bytes + coalesce(octet_length(w.metadata::text), 0)
		FROM context_windows w WHERE `+windowFilter+`
		ORDER BY w.window_id
		LIMIT $6`,
		scope.TenantID, scope.ProjectID, q.After.ID, q.ConversationID, q.CreatedBefore, q.Rows)
	if err != nil || len(keys) == 0 {
		return false, err
	}
	last := keys[len(keys)-1].ID
	rows, err := s.db.Query(ctx, `
		SELECT w.window_id, w.conversation_id, w.stage, w.purpose, w.token_count, w.item_count, w.content_bytes,
			w.content_sha256, w.metadata::text, w.created_at_ms
		FROM context_windows w WHERE `+windowFilter+` AND w.window_id <= $6
		ORDER BY w.window_id`,
		pgx.QueryExecModeExec, scope.TenantID, scope.ProjectID, q.After.ID, q.ConversationID, q.CreatedBefore, last)
	if err != nil {
		return false, translate(err)
	}
	var heads []contract.Window
	for rows.Next() {
		var w contract.Window
		var metadata *string
		if err := rows.Scan(&w.ID, &w.Conversation.ConversationID, &w.Stage, &w.Purpose, &w.TokenCount, &w.ItemCount,
			&w.ContentBytes, &w.ContentSHA256, &metadata, &w.CreatedAtMs); err != nil {
			rows.Close()
			return false, translate(err)
		}
		w.Metadata = jsonValue(metadata)
		heads = append(heads, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, translate(err)
	}
	return more, s.streamItems(ctx, scope, q, heads, sink)
}

// streamItems hands heads and their items to sink, the items read as one ordered
// index range from the first window to the last.
func (s *ExportStore) streamItems(ctx context.Context, scope runtime.Scope, q transfer.ExportQuery, heads []contract.Window, sink transfer.WindowSink) error {
	if len(heads) == 0 {
		return nil
	}
	index := make(map[string]int, len(heads))
	for i, w := range heads {
		index[w.ID] = i
	}
	rows, err := s.db.Query(ctx, `
		SELECT window_id, ordinal, item_id, kind, role, content, source_record_id, knowledge_evidence::text, metadata::text
		FROM context_window_items
		WHERE tenant_id = $1 AND project_id = $2 AND ($3 = '' OR conversation_id = $3)
		  AND window_id >= $4 AND window_id <= $5
		ORDER BY window_id, ordinal`,
		pgx.QueryExecModeExec, scope.TenantID, scope.ProjectID, q.ConversationID, heads[0].ID, heads[len(heads)-1].ID)
	if err != nil {
		return translate(err)
	}
	defer rows.Close()
	next := 0 // heads[next:] have not been started
	open := false
	// startUpTo starts (and ends, for those without items) the windows up to heads[i].
	startUpTo := func(i int) error {
		for ; next <= i; next++ {
			if open {
				if err := sink.EndWindow(); err != nil {
					return err
				}
			}
			if err := sink.Window(&heads[next]); err != nil {
				return err
			}
			open = true
		}
		return nil
	}
	for rows.Next() {
		var windowID string
		var it contract.WindowItem
		var evidence, metadata *string
		var content []byte
		if err := rows.Scan(&windowID, &it.Ordinal, &it.ID, &it.Kind, &it.Role, &content, &it.SourceRecordID, &evidence, &metadata); err != nil {
			return translate(err)
		}
		i, ok := index[windowID]
		if !ok {
			continue
		}
		if err := startUpTo(i); err != nil {
			return err
		}
		it.Content = string(content)
		it.Metadata = jsonValue(metadata)
		if evidence != nil {
			it.KnowledgeEvidence = new(contract.KnowledgeEvidence)
			if err := json.Unmarshal([]byte(*evidence), it.KnowledgeEvidence); err != nil {
				return fmt.Errorf("window %q item %d: knowledge evidence: %w", windowID, it.Ordinal, err)
			}
		}
		if err := sink.Item(&it); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return translate(err)
	}
	if err := startUpTo(len(heads) - 1); err != nil {
		return err
	}
	return sink.EndWindow()
}

// derivationFilter selects the derivations of an export query: after $3, of
// conversation $4 (or any) with a source window of it too, created before $5 between
// windows created before $5, of live conversations.
const derivationFilter = `d.tenant_id = $1 AND d.project_id = $2 AND d.derivation_id > $3
	AND ($4 = '' OR (d.conversation_id = $4 AND sw.conversation_id = $4))
	AND d.created_at_ms < $5 AND sw.created_at_ms < $5 AND tw.created_at_ms < $5
	AND NOT EXISTS (SELECT 1 FROM conversations c
	                WHERE c.tenant_id = d.tenant_id AND c.project_id = d.project_id
	                  AND c.conversation_id IN (d.conversation_id, sw.conversation_id) AND c.deleted_at_ms IS NOT NULL)`

const derivationJoins = `
	FROM window_derivations d
	JOIN context_windows sw ON sw.tenant_id = d.tenant_id AND sw.project_id = d.project_id AND sw.window_id = d.source_window_id
	JOIN context_windows tw ON tw.tenant_id = d.tenant_id AND tw.project_id = d.project_id AND tw.window_id = d.target_window_id`

// ExportDerivations implements transfer.RecordWalker.
func (s *ExportStore) ExportDerivations(ctx context.Context, scope runtime.Scope, q transfer.ExportQuery, fn func(d *contract.Derivation, target, source string) error) (bool, error) {
	keys, more, err := pickKeys(ctx, s.db, q, func(rows pgx.Rows, k *keyRow) error {
		return rows.Scan(&k.key.ID, &k.size)
	}, `SELECT d.derivation_id, coalesce(octet_length(d.metadata::text), 0)::bigint`+derivationJoins+`
		WHERE `+derivationFilter+`
		ORDER BY d.derivation_id
		LIMIT $6`,
		scope.TenantID, scope.ProjectID, q.After.ID, q.ConversationID, q.CreatedBefore, q.Rows)
	if err != nil || len(keys) == 0 {
		return false, err
	}
	rows, err := s.db.Query(ctx, `SELECT `+derivationColumns+`, d.conversation_id, sw.conversation_id`+derivationJoins+`
		WHERE `+derivationFilter+` AND d.derivation_id <= $6
		ORDER BY d.derivation_id`,
		pgx.QueryExecModeExec, scope.TenantID, scope.ProjectID, q.After.ID, q.ConversationID, q.CreatedBefore, keys[len(keys)-1].ID)
	if err != nil {
		return false, translate(err)
	}
	defer rows.Close()
	for rows.Next() {
		var d contract.Derivation
		var metadata *string
		var target, source string
		if err := rows.Scan(&d.ID, &d.SourceWindowID, &d.TargetWindowID, &d.Kind, &d.Strategy, &d.StrategyVersion,
			&d.InputTokenCount, &d.OutputTokenCount, &d.InputItemCount, &d.OutputItemCount, &metadata, &d.CreatedAtMs,
			&target, &source); err != nil {
			return false, translate(err)
		}
		d.Metadata = jsonValue(metadata)
		if err := fn(&d, target, source); err != nil {
			return false, err
		}
	}
	return more, translate(rows.Err())
}

// invocationFilter selects the invocations of an export query: after ($3, $4) in
// (startedAtMs, id) order, of conversation $5 (or any), created before $6 against a
// window created before $6, of a live conversation.
const invocationFilter = `m.tenant_id = $1 AND m.project_id = $2 AND (m.started_at_ms, m.invocation_id) > ($3, $4)
	AND ($5 = '' OR m.conversation_id = $5) AND m.created_at_ms < $6
	AND EXISTS (SELECT 1 FROM context_windows w
	            WHERE w.tenant_id = m.tenant_id AND w.project_id = m.project_id
	              AND w.window_id = m.request_window_id AND w.created_at_ms < $6)
	AND NOT EXISTS (SELECT 1 FROM conversations c
	                WHERE c.tenant_id = m.tenant_id AND c.project_id = m.project_id
	                  AND c.conversation_id = m.conversation_id AND c.deleted_at_ms IS NOT NULL)`

// ExportInvocations implements transfer.RecordWalker, walking model_invocations_by_time
// (or, for one conversation, model_invocations_by_conversation).
func (s *ExportStore) ExportInvocations(ctx context.Context, scope runtime.Scope, q transfer.ExportQuery, fn func(*contract.ModelInvocation) error) (bool, error) {
	keys, more, err := pickKeys(ctx, s.db, q, func(rows pgx.Rows, k *keyRow) error {
		return rows.Scan(&k.key.Time, &k.key.ID, &k.size)
	}, `
		SELECT m.started_at_ms, m.invocation_id, (coalesce(octet_length(m.response_content), 0)
			+ coalesce(octet_length(m.error::text), 0) + coalesce(octet_length(m.metadata::text), 0))::bigint
		FROM model_invocations m WHERE `+invocationFilter+`
		ORDER BY m.started_at_ms, m.invocation_id
		LIMIT $7`,
		scope.TenantID, scope.ProjectID, q.After.Time, q.After.ID, q.ConversationID, q.CreatedBefore, q.Rows)
	if err != nil || len(keys) == 0 {
		return false, err
	}
	last := keys[len(keys)-1]
	rows, err := s.db.Query(ctx, `
		SELECT `+invocationColumns+`
		FROM model_invocations m WHERE `+invocationFilter+` AND (m.started_at_ms, m.invocation_id) <= ($7, $8)
		ORDER BY m.started_at_ms, m.invocation_id`,
		pgx.QueryExecModeExec, scope.TenantID, scope.ProjectID, q.After.Time, q.After.ID, q.ConversationID, q.CreatedBefore, last.Time, last.ID)
	if err != nil {
		return false, translate(err)
	}
	defer rows.Close()
	for rows.Next() {
		m, err := scanInvocation(rows)
		if err != nil {
			return false, translate(err)
		}
		if err := fn(&m); err != nil {
			return false, err
		}
	}
	return more, translate(rows.Err())
}

// ExportEntries implements transfer.RecordWalker, walking the primary key (or, for one
// conversation, context_entries_by_conversation).
func (s *ExportStore) ExportEntries(ctx context.Context, scope runtime.Scope, q transfer.ExportQuery, fn func(*contract.ContextEntry) error) (bool, error) {
	where := `e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id > $3 AND ($4 = '' OR e.conversation_id = $4) AND ` +
		liveConversation("e")
	keys, more, err := pickKeys(ctx, s.db, q, func(rows pgx.Rows, k *keyRow) error {
		return rows.Scan(&k.key.ID, &k.size)
	}, `
		SELECT e.entry_id, octet_length(e.content)::bigint + coalesce(octet_length(e.metadata::text), 0)
		FROM context_entries e WHERE `+where+`
		ORDER BY e.entry_id
		LIMIT $5`,
		scope.TenantID, scope.ProjectID, q.After.ID, q.ConversationID, q.Rows)
	if err != nil || len(keys) == 0 {
		return false, err
	}
	rows, err := s.db.Query(ctx, `SELECT `+entryColumns+` FROM context_entries e WHERE `+where+` AND e.entry_id <= $5
		ORDER BY e.entry_id`,
		pgx.QueryExecModeExec, scope.TenantID, scope.ProjectID, q.After.ID, q.ConversationID, keys[len(keys)-1].ID)
	if err != nil {
		return false, translate(err)
	}
	defer rows.Close()
	for rows.Next() {
		var r entryRow
		if err := rows.Scan(r.dest()...); err != nil {
			return false, translate(err)
		}
		e := r.entry()
		if err := fn(&e); err != nil {
			return false, err
		}
	}
	return more, translate(rows.Err())
}

// PurgeExpiredEntries implements transfer.MaintenanceStore with one statement over
// context_entries_by_expiry, and the text index's share of the entries it deleted in
// the same transaction.
func (s *ExportStore) PurgeExpiredEntries(ctx context.Context, scope runtime.Scope, cutoffMs int64, after transfer.ExportKey, limit int) ([]string, transfer.ExportKey, bool, error) {
	var examined int
	var lastTime *int64
	var lastID *string
	var purged []string
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		var active []bool
		var docs []pgtype.TSVector
		var lengths []int32
		var ords []int64
		err := tx.QueryRow(ctx, `
			WITH examined AS (
				SELECT e.entry_id, e.expires_at_ms, e.status, e.conversation_id FROM context_entries e
				WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.expires_at_ms IS NOT NULL
				  AND (e.expires_at_ms, e.entry_id) > ($3, $4) AND e.expires_at_ms <= $5
				ORDER BY e.expires_at_ms, e.entry_id
				LIMIT $6
			), gone AS (
				DELETE FROM context_entries e USING examined x
				WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = x.entry_id
				  AND x.status IN ('active', 'expired') AND `+liveConversation("e")+`
				RETURNING e.entry_id, e.status = 'active' AS active, e.search, e.search_length, e.text_ord
			), last AS (
				SELECT expires_at_ms, entry_id FROM examined ORDER BY expires_at_ms DESC, entry_id DESC LIMIT 1
			)
			SELECT (SELECT count(*) FROM examined), (SELECT expires_at_ms FROM last), (SELECT entry_id FROM last),
			       coalesce((SELECT array_agg(entry_id ORDER BY entry_id) FROM gone), '{}'), g.active, g.search, g.length, g.ord
			FROM (SELECT coalesce(array_agg(active), '{}') AS active, coalesce(array_agg(search), '{}') AS search,
			             coalesce(array_agg(search_length), '{}') AS length, coalesce(array_agg(text_ord), '{}') AS ord
			      FROM gone) g`,
			scope.TenantID, scope.ProjectID, after.Time, after.ID, cutoffMs, limit).
			Scan(&examined, &lastTime, &lastID, &purged, &active, &docs, &lengths, &ords)
		if err != nil {
			return translate(err)
		}
		var text textChange
		for i := range ords {
			text.deleted(&entryText{active: active[i], doc: docs[i], length: lengths[i], ord: ords[i]})
		}
		return text.apply(ctx, tx, scope)
	})
	if err != nil {
		return nil, after, false, err
	}
	if lastTime == nil {
		return purged, after, false, nil
	}
	return purged, transfer.ExportKey{Time: *lastTime, ID: *lastID}, examined == limit, nil
}

// ReindexMessages implements transfer.MaintenanceStore: the documents are built here, as
// appends build them, and written with one statement.
func (s *ExportStore) ReindexMessages(ctx context.Context, scope runtime.Scope, after transfer.ExportKey, bounds operation.StepBounds) (transfer.ExportKey, int64, bool, error) {
	var conversations, ids []string
	var docs []pgtype.TSVector
	var last transfer.ExportKey
	q := transfer.ExportQuery{After: after, Rows: bounds.Rows, Bytes: bounds.Bytes}
	var b textindex.DocumentBuilder
	more, err := s.ExportMessages(ctx, scope, q, func(m *contract.ConversationRecord) error {
		conversations, ids = append(conversations, m.Scope.ConversationID), append(ids, m.ID)
		docs = append(docs, b.Build(m.Content))
		last = transfer.ExportKey{ConversationID: m.Scope.ConversationID, Sequence: m.Sequence}
		return nil
	})
	if err != nil || len(ids) == 0 {
		return after, 0, false, err
	}
	_, err = s.db.Exec(ctx, `
		UPDATE messages m SET search = u.doc
		FROM unnest($3::text[], $4::text[], $5::tsvector[]) AS u(conversation_id, message_id, doc)
		WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.conversation_id = u.conversation_id AND m.message_id = u.message_id`,
		scope.TenantID, scope.ProjectID, conversations, ids, docs)
	return last, int64(len(ids)), more, translate(err)
}

// ReindexEntries implements transfer.MaintenanceStore: the documents are built here,
// as creates build them, and written with writeEntryDocuments.
func (s *ExportStore) ReindexEntries(ctx context.Context, scope runtime.Scope, after transfer.ExportKey, bounds operation.StepBounds) (transfer.ExportKey, int64, bool, error) {
	var ids []string
	var docs []pgtype.TSVector
	var lengths []int32
	var last transfer.ExportKey
	q := transfer.ExportQuery{After: after, Rows: bounds.Rows, Bytes: bounds.Bytes}
	more, err := s.ExportEntries(ctx, scope, q, func(e *contract.ContextEntry) error {
		doc, length := entryDocument(scope, e.Content)
		ids, docs, lengths = append(ids, e.ID), append(docs, doc), append(lengths, int32(length))
		last = transfer.ExportKey{ID: e.ID}
		return nil
	})
	if err != nil || len(ids) == 0 {
		return after, 0, false, err
	}
	err = inTx(ctx, s.db, func(tx pgx.Tx) error {
		return writeEntryDocuments(ctx, tx, scope, ids, docs, lengths)
	})
	return last, int64(len(ids)), more, err
}

// writeEntryDocuments gives the scope's entries ids the documents docs of lengths
// lengths, with the text index's share: an entry whose document or length changes
// takes a new ordinal (its postings move from the old to the new), and its counts in
// the statistics follow its document. The ordinals are drawn from entry_text_ords
// before the update, one per entry (those of unchanged entries are left unused), so
// that the update itself calls no volatile function.
func writeEntryDocuments(ctx context.Context, tx pgx.Tx, scope runtime.Scope, ids []string, docs []pgtype.TSVector, lengths []int32) error {
	var ords []int64
	if err := tx.QueryRow(ctx, `SELECT array_agg(nextval('entry_text_ords')) FROM generate_series(1, $1)`, len(ids)).
		Scan(&ords); err != nil {
		return translate(err)
	}
	// o is the rows as they were, locked once, in ID order.
	rows, err := tx.Query(ctx, `
		WITH o AS MATERIALIZED (
		    SELECT o.entry_id, o.status, o.search, o.search_length, o.text_ord FROM context_entries o
		    WHERE o.tenant_id = $1 AND o.project_id = $2 AND o.entry_id = ANY($3::text[])
		    ORDER BY o.entry_id FOR UPDATE
		)
		UPDATE context_entries e SET search = u.doc, search_length = u.length, text_ord = u.ord
		FROM unnest($3::text[], $4::tsvector[], $5::integer[], $6::bigint[]) AS u(entry_id, doc, length, ord)
		JOIN o USING (entry_id)
		WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = ANY($3::text[]) AND e.entry_id = u.entry_id
		  AND (o.search <> u.doc OR o.search_length <> u.length)
		RETURNING e.status = 'active', o.search, o.search_length, o.text_ord, e.search, e.search_length, e.text_ord,
		          e.created_at_ms, o.search <> e.search`,
		scope.TenantID, scope.ProjectID, ids, docs, lengths, ords)
	if err != nil {
		return translate(err)
	}
	var text textChange
	var old, now entryText
	var changed bool
	if _, err := pgx.ForEachRow(rows, []any{&now.active, &old.doc, &old.length, &old.ord, &now.doc, &now.length,
		&now.ord, &now.created, &changed}, func() error {
		old.active = now.active
		text.updated(&old, &now, changed)
		return nil
	}); err != nil {
		return translate(err)
	}
	return text.apply(ctx, tx, scope)
}
