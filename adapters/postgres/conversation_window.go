package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
)

// WindowStore keeps context windows, their items, derivations and model invocations.
type WindowStore struct {
	db DBTX
}

var _ conversation.WindowStore = (*WindowStore)(nil)

// errRecordExists ends a create's transaction when the ID is taken: the stored record
// is returned for comparison, and rolling back undoes whatever the create did first
// (above all, implicitly creating a conversation), so a retry, identical or
// conflicting, writes nothing.
var errRecordExists = errors.New("postgres: a record with this ID exists")

// windowItemColumns are the columns of one COPY of a window's items.
var windowItemColumns = []string{
	"tenant_id", "project_id", "window_id", "ordinal", "conversation_id", "item_id", "kind",
	"role", "content", "source_record_id", "knowledge_evidence", "metadata",
}

// windowConversationJoin joins the head row of alias's conversation so that records of a
// deleted conversation read as absent.
func windowConversationJoin(alias string) string {
	return ` JOIN conversations c ON c.tenant_id = ` + alias + `.tenant_id AND c.project_id = ` + alias +
		`.project_id AND c.conversation_id = ` + alias + `.conversation_id AND c.deleted_at_ms IS NULL `
}

// CreateWindow implements conversation.WindowStore: one insert of the header and one COPY
// of every item, in one transaction that holds the conversation against deletion.
func (s *WindowStore) CreateWindow(ctx context.Context, scope runtime.Scope, w *contract.Window) (contract.Window, bool, error) {
	var stored contract.Window
	created := false
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		if err := claimConversation(ctx, tx, scope, w.Conversation.ConversationID, w.CreatedAtMs); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			INSERT INTO context_windows (tenant_id, project_id, window_id, conversation_id, stage, purpose,
				token_count, item_count, content_bytes, content_sha256, metadata, created_at_ms)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
			ON CONFLICT DO NOTHING`,
			scope.TenantID, scope.ProjectID, w.ID, w.Conversation.ConversationID, w.Stage, w.Purpose,
			w.TokenCount, w.ItemCount, w.ContentBytes, w.ContentSHA256, jsonParam(w.Metadata), w.CreatedAtMs)
		if err != nil {
			return translate(err)
		}
		if tag.RowsAffected() == 0 {
			if stored, err = windowHeader(ctx, tx, scope, w.ID); err != nil {
				return err
			}
			return errRecordExists
		}
		if err := copyWindowItems(ctx, tx, scope, w); err != nil {
			return err
		}
		stored, created = *w, true
		stored.Items = nil
		return nil
	})
	if err != nil && !errors.Is(err, errRecordExists) {
		return contract.Window{}, false, err
	}
	return stored, created, nil
}

// copyWindowItems writes every item of w with one COPY.
func copyWindowItems(ctx context.Context, tx DBTX, scope runtime.Scope, w *contract.Window) error {
	if len(w.Items) == 0 {
		return nil
	}
	row := make([]any, len(windowItemColumns))
	src := pgx.CopyFromSlice(len(w.Items), func(i int) ([]any, error) {
		it := &w.Items[i]
		var evidence any
		if it.KnowledgeEvidence != nil {
			raw, err := json.Marshal(it.KnowledgeEvidence)
			if err != nil {
				return nil, err
			}
			evidence = string(raw)
		}
		row[0], row[1], row[2], row[3] = scope.TenantID, scope.ProjectID, w.ID, int32(it.Ordinal)
		row[4], row[5], row[6], row[7] = w.Conversation.ConversationID, it.ID, it.Kind, it.Role
		row[8], row[9], row[10], row[11] = []byte(it.Content), it.SourceRecordID, evidence, jsonParam(it.Metadata)
		return row, nil
	})
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"context_window_items"}, windowItemColumns, src); err != nil {
		return translate(err)
	}
	return nil
}

// windowHeader reads a stored window without items, whatever its conversation's state:
// an idempotent retry compares against it.
func windowHeader(ctx context.Context, tx DBTX, scope runtime.Scope, id string) (contract.Window, error) {
	w := contract.Window{ID: id}
	var metadata *string
	err := tx.QueryRow(ctx, `
		SELECT conversation_id, stage, purpose, token_count, item_count, content_bytes, content_sha256,
			metadata::text, created_at_ms
		FROM context_windows
		WHERE tenant_id = $1 AND project_id = $2 AND window_id = $3`,
		scope.TenantID, scope.ProjectID, id).Scan(&w.Conversation.ConversationID, &w.Stage, &w.Purpose,
		&w.TokenCount, &w.ItemCount, &w.ContentBytes, &w.ContentSHA256, &metadata, &w.CreatedAtMs)
	if err != nil {
		return contract.Window{}, translate(err)
	}
	w.Metadata = jsonValue(metadata)
	return w, nil
}

// GetWindow implements conversation.WindowStore with one statement, so header and items come
// from one snapshot: a header row (part 0) and one row per item (part 1), each item
// put in its place by ordinal here, whatever order the rows arrive in.
func (s *WindowStore) GetWindow(ctx context.Context, scope runtime.Scope, windowID string) (contract.Window, error) {
	rows, err := s.db.Query(ctx, `
		WITH head AS (
			SELECT w.conversation_id, w.stage, w.purpose, w.token_count, w.item_count, w.content_bytes,
				w.content_sha256, w.metadata::text AS metadata, w.created_at_ms
			FROM context_windows w`+windowConversationJoin("w")+`
			WHERE w.tenant_id = $1 AND w.project_id = $2 AND w.window_id = $3
		)
		SELECT 0 AS part, conversation_id, stage, purpose, token_count, item_count, content_bytes,
			content_sha256, metadata, created_at_ms,
			NULL::integer, NULL::text, NULL::text, NULL::text, NULL::bytea, NULL::text, NULL::text
		FROM head
		UNION ALL
		-- An item row carries its own metadata in the header's metadata column.
		SELECT 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, metadata::text, NULL,
			ordinal, item_id, kind, role, content, source_record_id, knowledge_evidence::text
		FROM context_window_items
		WHERE tenant_id = $1 AND project_id = $2 AND window_id = $3 AND EXISTS (SELECT 1 FROM head)`,
		scope.TenantID, scope.ProjectID, windowID)
	if err != nil {
		return contract.Window{}, translate(err)
	}
	defer rows.Close()
	w := contract.Window{ID: windowID}
	var items []contract.WindowItem
	headerSeen := false
	for rows.Next() {
		var (
			part                                     int32
			conversation, stage, purpose, sha        *string
			tokenCount, contentBytes, createdAt      *int64
			itemCount, ordinal                       *int32
			metadata, itemID, kind, role, source, ev *string
		)
		// content (column 15) is taken from the raw row below: one copy instead of two.
		if err := rows.Scan(&part, &conversation, &stage, &purpose, &tokenCount, &itemCount, &contentBytes,
			&sha, &metadata, &createdAt, &ordinal, &itemID, &kind, &role, nil, &source, &ev); err != nil {
			return contract.Window{}, translate(err)
		}
		if part == 0 {
			headerSeen = true
			w.Conversation.ConversationID, w.Stage, w.Purpose, w.ContentSHA256 = *conversation, *stage, *purpose, *sha
			w.TokenCount, w.ItemCount, w.ContentBytes, w.CreatedAtMs = *tokenCount, int(*itemCount), *contentBytes, *createdAt
			w.Metadata = jsonValue(metadata)
			continue
		}
		items = append(items, contract.WindowItem{
			ID: *itemID, Ordinal: int(*ordinal), Kind: *kind, Role: role, Content: string(rows.RawValues()[14]),
			SourceRecordID: source, Metadata: jsonValue(metadata),
		})
		it := &items[len(items)-1]
		if ev != nil {
			it.KnowledgeEvidence = new(contract.KnowledgeEvidence)
			if err := json.Unmarshal([]byte(*ev), it.KnowledgeEvidence); err != nil {
				return contract.Window{}, fmt.Errorf("window %q item %d: knowledge evidence: %w", windowID, it.Ordinal, err)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return contract.Window{}, translate(err)
	}
	if !headerSeen {
		return contract.Window{}, runtime.NotFound("windowId", "window")
	}
	if len(items) != w.ItemCount {
		return contract.Window{}, fmt.Errorf("window %q: %d stored items, the header says %d", windowID, len(items), w.ItemCount)
	}
	// Ordinals are the primary key's last column, so each of 0..n-1 occurs exactly once.
	w.Items = make([]contract.WindowItem, len(items))
	for _, it := range items {
		if it.Ordinal < 0 || it.Ordinal >= len(items) {
			return contract.Window{}, fmt.Errorf("window %q: stored item ordinal %d out of range", windowID, it.Ordinal)
		}
		w.Items[it.Ordinal] = it
	}
	return w, nil
}

// jsonParam passes compacted JSON (nil for none) to a json column.
func jsonParam(v json.RawMessage) any {
	if v == nil {
		return nil
	}
	return string(v)
}

// jsonValue turns a json column read as text back into a raw value (nil for NULL).
func jsonValue(v *string) json.RawMessage {
	if v == nil {
		return nil
	}
	return json.RawMessage(*v)
}

// ListWindows implements conversation.WindowStore: a walk of context_windows_by_created,
// or of context_windows_by_conversation_created for one conversation.
func (s *WindowStore) ListWindows(ctx context.Context, scope runtime.Scope, conversationID string, q runtime.PageQuery) ([]contract.Window, error) {
	where, args := listWhere("w", "w.created_at_ms", "w.window_id", scope, conversationID, q)
	rows, err := s.db.Query(ctx, `
		SELECT w.window_id, w.conversation_id, w.stage, w.purpose, w.token_count, w.item_count, w.content_bytes,
			w.content_sha256, w.metadata::text, w.created_at_ms
		FROM context_windows w`+windowConversationJoin("w")+`
		WHERE `+where+`
		ORDER BY w.created_at_ms DESC, w.window_id
		LIMIT $3`, args...)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := []contract.Window{}
	for rows.Next() {
		var w contract.Window
		var metadata *string
		if err := rows.Scan(&w.ID, &w.Conversation.ConversationID, &w.Stage, &w.Purpose, &w.TokenCount, &w.ItemCount,
			&w.ContentBytes, &w.ContentSHA256, &metadata, &w.CreatedAtMs); err != nil {
			return nil, translate(err)
		}
		w.Metadata = jsonValue(metadata)
		out = append(out, w)
	}
	return out, translate(rows.Err())
}

// listWhere is the condition of a page of a newest-first listing of the row alias by
// the time column at and the ID column id, confined to scope and, unless "", to one
// conversation; its arguments start with the tenant ($1), the project ($2) and the
// page's limit ($3).
func listWhere(alias, at, id string, scope runtime.Scope, conversationID string, q runtime.PageQuery) (string, []any) {
	where := alias + ".tenant_id = $1 AND " + alias + ".project_id = $2"
	args := []any{scope.TenantID, scope.ProjectID, q.Limit}
	if conversationID != "" {
		args = append(args, conversationID)
		where += fmt.Sprintf(" AND %s.conversation_id = $%d", alias, len(args))
	}
	after, afterArgs := pageAfter(q.After, at, id, len(args)+1)
	return where + " AND " + after, append(args, afterArgs...)
}
