package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// retentionCursor is a retention run's resume point, kept in the operation's row: the
// last message examined and the counts so far. LastAffected is the last conversation
// counted in AffectedConversations; conversations are visited in ID order, so one that
// spans several steps is counted once.
type retentionCursor struct {
	ConversationID        string `json:"conversationId"`
	Sequence              int64  `json:"sequence"`
	LastAffected          string `json:"lastAffected"`
	DeletedMessages       int64  `json:"deletedMessages"`
	AffectedConversations int64  `json:"affectedConversations"`
}

// retentionStepSQL examines the next messages after the keyset ($4, $5) in
// (conversation_id, sequence) order, confined by the filter %s (retentionScopeWide or
// retentionOneConversation, so that each variant plans as a plain index range): at
// most $6, and only while the stored bytes of those before stay under $10. It deletes
// (unless $9, a dry run) those created before $7 (NULL: any time) and, when $8 > 0,
// older than the $8 newest of their conversation. Messages of tombstoned conversations
// are left to their deletion. It returns the number of candidates read and the number
// examined (fewer when the byte bound cut them), the last one examined, and the
// conversations and number of messages deleted (or that would be).
const retentionStepSQL = `
WITH cand AS (
    SELECT conversation_id, sequence, created_at_ms,
           (pg_column_size(content) + coalesce(pg_column_size(metadata), 0) + pg_column_size(search))::bigint AS size
    FROM messages
    WHERE tenant_id = $1 AND project_id = $2 AND %s
    ORDER BY conversation_id, sequence
    LIMIT $6
), win AS (
    SELECT conversation_id, sequence, created_at_ms FROM (
        SELECT conversation_id, sequence, created_at_ms,
               sum(size) OVER (ORDER BY conversation_id, sequence ROWS UNBOUNDED PRECEDING) - size AS before
        FROM cand
    ) c
    WHERE before < $10
), live AS (
    SELECT c.conversation_id, k.sequence AS keep_from
    FROM (SELECT DISTINCT conversation_id FROM win) c
    JOIN conversations h
      ON h.tenant_id = $1 AND h.project_id = $2 AND h.conversation_id = c.conversation_id
     AND h.deleted_at_ms IS NULL
    LEFT JOIN LATERAL (
        SELECT m.sequence FROM messages m
        WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.conversation_id = c.conversation_id
        ORDER BY m.sequence DESC
        OFFSET greatest($8::bigint - 1, 0) LIMIT 1
    ) k ON $8::bigint > 0
), doomed AS (
    SELECT w.conversation_id, w.sequence
    FROM win w JOIN live l USING (conversation_id)
    WHERE ($7::bigint IS NULL OR w.created_at_ms < $7)
      AND ($8::bigint = 0 OR w.sequence < l.keep_from)
), deleted AS (
    DELETE FROM messages m USING doomed d
    WHERE NOT $9::boolean
      AND m.tenant_id = $1 AND m.project_id = $2
      AND m.conversation_id = d.conversation_id AND m.sequence = d.sequence
    RETURNING m.conversation_id
), hit AS (
    SELECT conversation_id FROM doomed WHERE $9::boolean
    UNION ALL
    SELECT conversation_id FROM deleted
)
SELECT
    (SELECT count(*) FROM cand),
    (SELECT count(*) FROM win),
    (SELECT conversation_id FROM win ORDER BY conversation_id DESC, sequence DESC LIMIT 1),
    (SELECT sequence FROM win ORDER BY conversation_id DESC, sequence DESC LIMIT 1),
    (SELECT count(*) FROM hit),
    ARRAY(SELECT DISTINCT conversation_id FROM hit ORDER BY 1)`

// RetentionStep implements runtime.OperationStore.
func (s *OperationStore) RetentionStep(ctx context.Context, scope runtime.Scope, operationID string, plan runtime.RetentionPlan, bounds runtime.StepBounds, nowMs int64) (bool, error) {
	var done bool
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		if err := setLocalTimeout(ctx, tx, bounds.Timeout); err != nil {
			return err
		}
		var cur retentionCursor
		running, err := lockRunning(ctx, tx, scope, operationID, &cur)
		if err != nil || !running {
			done = err == nil
			return err
		}
		var conversation *string
		query := retentionScopeWide
		if plan.ConversationID != "" {
			conversation, query = &plan.ConversationID, retentionOneConversation
		}
		var candidates, examined, hits int64
		var lastConversation *string
		var lastSequence *int64
		var affected []string
		if err := tx.QueryRow(ctx, query, scope.TenantID, scope.ProjectID, conversation,
			cur.ConversationID, cur.Sequence, int64(bounds.Rows), plan.CutoffMs, plan.KeepLast, plan.DryRun, bounds.Bytes).
			Scan(&candidates, &examined, &lastConversation, &lastSequence, &hits, &affected); err != nil {
			return translate(err)
		}
		cur.DeletedMessages += hits
		for _, c := range affected {
			if c != cur.LastAffected {
				cur.AffectedConversations++
				cur.LastAffected = c
			}
		}
		if lastConversation != nil && lastSequence != nil {
			cur.ConversationID, cur.Sequence = *lastConversation, *lastSequence
		}
		raw, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		// The walk is over when fewer candidates than the bound were left and the
		// byte bound cut none of them.
		if candidates < int64(bounds.Rows) && examined == candidates {
			result, err := json.Marshal(contract.RetentionResult{
				DeletedMessages: cur.DeletedMessages, AffectedConversations: cur.AffectedConversations,
			})
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `
				UPDATE operations
				SET state = 'succeeded', progress_done = progress_done + $4, progress_total = progress_done + $4,
				    cursor = $5, result = $6, updated_at_ms = $7, completed_at_ms = $7
				WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3`,
				scope.TenantID, scope.ProjectID, operationID, examined, raw, result, nowMs)
			done = err == nil
			return translate(err)
		}
		_, err = tx.Exec(ctx, `
			UPDATE operations SET progress_done = progress_done + $4, cursor = $5, updated_at_ms = $6
			WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3`,
			scope.TenantID, scope.ProjectID, operationID, examined, raw, nowMs)
		return translate(err)
	})
	return done, err
}

// DueRetentionScopes implements runtime.OperationStore. Scopes are found by a loose
// index scan of messages' primary key (one probe per scope, not a scan of every
// message).
func (s *OperationStore) DueRetentionScopes(ctx context.Context, after *runtime.Scope, sinceMs int64, limit int) ([]runtime.Scope, *runtime.Scope, error) {
	var afterTenant, afterProject string
	if after != nil {
		afterTenant, afterProject = after.TenantID, after.ProjectID
	}
	rows, err := s.db.Query(ctx, `
		WITH RECURSIVE scopes AS (
		    (SELECT tenant_id, project_id FROM messages
		     WHERE (tenant_id, project_id) > ($1::text, $2::text)
		     ORDER BY tenant_id, project_id LIMIT 1)
		    UNION ALL
		    SELECT n.tenant_id, n.project_id FROM scopes p
		    CROSS JOIN LATERAL (
		        SELECT tenant_id, project_id FROM messages
		        WHERE (tenant_id, project_id) > (p.tenant_id, p.project_id)
		        ORDER BY tenant_id, project_id LIMIT 1) n
		)
		SELECT s.tenant_id, s.project_id, NOT EXISTS (
		    SELECT 1 FROM operations o
		    WHERE o.tenant_id = s.tenant_id AND o.project_id = s.project_id
		      AND o.kind = 'retention' AND o.default_policy AND o.created_at_ms >= $3
		) AND NOT EXISTS (
		    SELECT 1 FROM operations o
		    WHERE o.tenant_id = s.tenant_id AND o.project_id = s.project_id
		      AND o.kind = 'retention' AND o.state IN ('pending', 'running') AND o.default_policy
		)
		FROM (SELECT * FROM scopes LIMIT $4) s`,
		afterTenant, afterProject, sinceMs, limit)
	if err != nil {
		return nil, nil, translate(err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[scheduledScope])
	if err != nil {
		return nil, nil, translate(err)
	}
	var due []runtime.Scope
	var last *runtime.Scope
	for _, f := range found {
		sc := runtime.Scope{TenantID: f.TenantID, ProjectID: f.ProjectID}
		last = &sc
		if f.Due {
			due = append(due, sc)
		}
	}
	return due, last, nil
}

// scheduledScope is a scope DueRetentionScopes examined, and whether it is due.
type scheduledScope struct {
	TenantID  string
	ProjectID string
	Due       bool
}

// The window filters of retentionStepSQL; $3 is the conversation of a run confined to
// one.
var (
	retentionScopeWide       = fmt.Sprintf(retentionStepSQL, `$3::text IS NULL AND (conversation_id, sequence) > ($4::text, $5::bigint)`)
	retentionOneConversation = fmt.Sprintf(retentionStepSQL, `conversation_id = $3::text AND $4::text IS NOT NULL AND sequence > $5::bigint`)
)
