package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/operation"
)

// claimConversation creates the conversation if it does not exist yet and holds its
// head row FOR SHARE until the transaction ends, so a record that belongs to it (a
// window, an invocation) cannot be written while the conversation is being deleted,
// without serializing those writers against each other. A tombstoned conversation is
// refused with 409 CONFLICT, reason conversation_deleted. Appends claim heads their own
// way (claimHeads in conversation_messages.go), because they also allocate sequences.
func claimConversation(ctx context.Context, tx DBTX, scope runtime.Scope, id string, nowMs int64) error {
	if _, err := tx.Exec(ctx, `
		INSERT INTO conversations (tenant_id, project_id, conversation_id, created_at_ms)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT DO NOTHING`, scope.TenantID, scope.ProjectID, id, nowMs); err != nil {
		return translate(err)
	}
	var deleted bool
	if err := tx.QueryRow(ctx, `
		SELECT deleted_at_ms IS NOT NULL
		FROM conversations
		WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = $3
		FOR SHARE`, scope.TenantID, scope.ProjectID, id).Scan(&deleted); err != nil {
		return translate(err)
	}
	if deleted {
		return runtime.Errorf(contract.CodeConflict, "the conversation has been deleted").
			With("reason", "conversation_deleted").With("conversationIds", []string{id})
	}
	return nil
}

// ConversationStore implements operation.ConversationStore over conversation heads.
type ConversationStore struct {
	db DBTX
}

var _ operation.ConversationStore = (*ConversationStore)(nil)

// Tombstone implements operation.ConversationStore. The head row is locked like an
// appender locks it, so the tombstone commits either before an append (which then sees
// it) or after (and the deletion removes what the append wrote).
//
// The export artifacts that hold the conversation's records are marked deleting in the
// same transaction, after the head is locked (the order an export step locks them in),
// so no route returns them from the moment of the tombstone; the deletion job removes
// them.
func (s *ConversationStore) Tombstone(ctx context.Context, scope runtime.Scope, conversationID string, nowMs int64) error {
	if _, err := s.db.Exec(ctx, `
		INSERT INTO conversations AS c (tenant_id, project_id, conversation_id, created_at_ms, deleted_at_ms)
		VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT (tenant_id, project_id, conversation_id) DO UPDATE
		SET deleted_at_ms = coalesce(c.deleted_at_ms, excluded.deleted_at_ms)`,
		scope.TenantID, scope.ProjectID, conversationID, nowMs); err != nil {
		return translate(err)
	}
	_, err := s.db.Exec(ctx, `
		UPDATE export_artifacts SET state = 'deleting'
		WHERE tenant_id = $1 AND project_id = $2 AND state <> 'deleting' AND `+linkedArtifacts,
		scope.TenantID, scope.ProjectID, conversationID)
	return translate(err)
}

// pageAfter is the keyset condition of a page of a newest-first listing ordered by the
// time expression at descending and then the ID column id ascending: the rows after
// the position whose time and ID are the parameters $n and $n+1, or "true" for the
// first page. The time bound is a range of the listing's index; the ID comparison only
// skips rows of the position's own millisecond.
func pageAfter(after *runtime.Position, at, id string, n int) (string, []any) {
	if after == nil {
		return "true", nil
	}
	return fmt.Sprintf(`%[1]s <= $%[3]d AND (%[1]s < $%[3]d OR %[2]s > $%[4]d::text)`, at, id, n, n+1),
		[]any{after.AtMs, after.ID}
}

// ListConversations implements conversation.MessageStore: a walk of
// conversations_by_activity, the head rows alone.
func (s *MessageStore) ListConversations(ctx context.Context, scope runtime.Scope, prefix string, q runtime.PageQuery) ([]contract.ConversationSummary, error) {
	const activity = `coalesce(c.last_at_ms, c.created_at_ms)`
	after, afterArgs := pageAfter(q.After, activity, "c.conversation_id", 5)
	rows, err := s.db.Query(ctx, `
		SELECT c.conversation_id, c.message_count, c.created_at_ms, `+activity+`, c.last_sequence
		FROM conversations c
		WHERE c.tenant_id = $1 AND c.project_id = $2 AND c.deleted_at_ms IS NULL
		  AND ($3 = '' OR left(c.conversation_id, length($3)) = $3) AND `+after+`
		ORDER BY `+activity+` DESC, c.conversation_id
		LIMIT $4`,
		append([]any{scope.TenantID, scope.ProjectID, prefix, q.Limit}, afterArgs...)...)
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[contract.ConversationSummary])
	return out, translate(err)
}
