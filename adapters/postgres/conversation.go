package postgres

import (
	"context"
	"slices"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// conversationLock is how strongly claimConversations locks the head rows.
type conversationLock string

const (
	// lockForAppend serializes appenders of one conversation: the holder may bump
	// last_sequence, and no other appender or deleter runs until it commits.
	lockForAppend conversationLock = "FOR UPDATE"
	// lockShared keeps a conversation from being deleted while a record that belongs
	// to it (a window, an invocation) is written, without serializing those writers.
	lockShared conversationLock = "FOR SHARE"
)

// claimConversations creates the conversations named by ids that do not exist yet,
// locks all of them in ID order (so concurrent claimers cannot deadlock) and returns
// each one's last sequence. A tombstoned conversation is refused with 409 CONFLICT,
// reason conversation_deleted. It must run inside a transaction.
func claimConversations(ctx context.Context, tx DBTX, scope runtime.Scope, ids []string, nowMs int64, lock conversationLock) (map[string]int64, error) {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if _, err := tx.Exec(ctx, `
		INSERT INTO conversations (tenant_id, project_id, conversation_id, created_at_ms)
		SELECT $1, $2, id, $4 FROM unnest($3::text[]) AS id ORDER BY id
		ON CONFLICT DO NOTHING`, scope.TenantID, scope.ProjectID, ids, nowMs); err != nil {
		return nil, translate(err)
	}
	rows, err := tx.Query(ctx, `
		SELECT conversation_id, last_sequence, deleted_at_ms IS NOT NULL
		FROM conversations
		WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = ANY($3::text[])
		ORDER BY conversation_id `+string(lock), scope.TenantID, scope.ProjectID, ids)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	last := make(map[string]int64, len(ids))
	var deleted []string
	for rows.Next() {
		var id string
		var seq int64
		var isDeleted bool
		if err := rows.Scan(&id, &seq, &isDeleted); err != nil {
			return nil, translate(err)
		}
		if isDeleted {
			deleted = append(deleted, id)
		}
		last[id] = seq
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	if len(deleted) > 0 {
		return nil, runtime.Errorf(contract.CodeConflict, "the conversation has been deleted").
			With("reason", "conversation_deleted").With("conversationIds", deleted)
	}
	return last, nil
}
