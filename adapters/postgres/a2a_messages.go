package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// AgentMessageStore keeps agent messages in a2a_messages and who read them in
// a2a_message_reads. The scope's head row counts its messages: every insert and delete
// here updates the count under the head's lock.
type AgentMessageStore struct {
	db DBTX
}

var _ runtime.AgentMessageStore = (*AgentMessageStore)(nil)

// agentMessageColumns are the columns scanAgentMessage reads, in its order.
const agentMessageColumns = `m.message_id, m.correlation_id, m.from_agent, m.to_agent, m.task_id, m.category,
	m.priority, m.privacy, m.content, m.metadata::text, m.created_at_ms, m.expires_at_ms`

func scanAgentMessage(row pgx.Row) (contract.AgentMessage, error) {
	var m contract.AgentMessage
	var metadata *string
	err := row.Scan(&m.ID, &m.CorrelationID, &m.FromAgent, &m.ToAgent, &m.TaskID, &m.Category, &m.Priority,
		&m.Privacy, &m.Content, &metadata, &m.CreatedAtMs, &m.ExpiresAtMs)
	m.Metadata = windowJSONValue(metadata)
	return m, err
}

// purgeExpired is the statement that deletes the scope's messages expired at $3 (at
// most $4 of them) and takes them off the head's count; the head must be locked by an
// earlier statement of the transaction. It returns how many went.
const purgeExpired = `
	WITH gone AS (
	    DELETE FROM a2a_messages m
	    USING (SELECT message_id FROM a2a_messages
	           WHERE tenant_id = $1 AND project_id = $2 AND expires_at_ms <= $3
	           ORDER BY expires_at_ms LIMIT $4) d
	    WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.message_id = d.message_id
	    RETURNING 1
	), counted AS (SELECT count(*) AS n FROM gone)
	UPDATE a2a_heads SET live_messages = live_messages - counted.n
	FROM counted
	WHERE tenant_id = $1 AND project_id = $2
	RETURNING counted.n`

// noPurgeLimit lets a purge take every expired message: at most the scope's bound.
const noPurgeLimit = 1 << 30

// PostMessage implements runtime.AgentMessageStore: under the scope's head lock it
// purges, inserts and evicts, so the count and the bound are exact. Two round trips
// besides the transaction's own: one batch locks the head, purges and inserts; one
// evicts and writes the count.
func (s *AgentMessageStore) PostMessage(ctx context.Context, scope runtime.Scope, m *contract.AgentMessage, maxLive int, nowMs int64) (contract.AgentMessage, bool, error) {
	var stored contract.AgentMessage
	created := false
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		lockHead(b, scope)
		b.Queue(purgeExpired, scope.TenantID, scope.ProjectID, nowMs, noPurgeLimit)
		b.Queue(`
			INSERT INTO a2a_messages (tenant_id, project_id, message_id, correlation_id, from_agent, to_agent, task_id,
			    category, priority, privacy, content, metadata, created_at_ms, expires_at_ms)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
			ON CONFLICT DO NOTHING`,
			scope.TenantID, scope.ProjectID, m.ID, m.CorrelationID, m.FromAgent, m.ToAgent, m.TaskID, m.Category,
			m.Priority, m.Privacy, m.Content, windowJSONParam(m.Metadata), m.CreatedAtMs, m.ExpiresAtMs)
		res := tx.SendBatch(ctx, b)
		var live, purged int64
		_, err := res.Exec()
		if err == nil {
			err = res.QueryRow().Scan(&live)
		}
		if err == nil {
			err = res.QueryRow().Scan(&purged)
		}
		var inserted pgconn.CommandTag
		if err == nil {
			inserted, err = res.Exec()
		}
		if cerr := res.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return translate(err)
		}
		live -= purged
		if inserted.RowsAffected() == 0 {
			stored, err = scanAgentMessage(tx.QueryRow(ctx, `SELECT `+agentMessageColumns+` FROM a2a_messages m
				WHERE tenant_id = $1 AND project_id = $2 AND message_id = $3`, scope.TenantID, scope.ProjectID, m.ID))
			if err != nil {
				return translate(err)
			}
			if purged == 0 {
				return nil
			}
			_, err = tx.Exec(ctx, `UPDATE a2a_heads SET live_messages = $3 WHERE tenant_id = $1 AND project_id = $2`,
				scope.TenantID, scope.ProjectID, live)
			return translate(err)
		}
		stored, created = *m, true
		live++
		evict := max(live-int64(maxLive), 0)
		_, err = tx.Exec(ctx, `
			WITH gone AS (
			    DELETE FROM a2a_messages m
			    USING (SELECT message_id FROM a2a_messages
			           WHERE tenant_id = $1 AND project_id = $2
			           ORDER BY created_at_ms, message_id LIMIT $4) d
			    WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.message_id = d.message_id
			    RETURNING 1
			)
			UPDATE a2a_heads SET live_messages = $3 - (SELECT count(*) FROM gone)
			WHERE tenant_id = $1 AND project_id = $2`,
			scope.TenantID, scope.ProjectID, live, evict)
		return translate(err)
	})
	return stored, created, err
}

// ReadMessages implements runtime.AgentMessageStore. Expired messages are purged first
// when there are any (one probe otherwise, so reads do not queue behind the head's
// lock). The messages a marking read returns are locked (FOR KEY SHARE) and marked in
// the same statement; a concurrent read of the same agent that picked the same unread
// message finds its mark taken and leaves it out, so no unread message is delivered
// twice.
func (s *AgentMessageStore) ReadMessages(ctx context.Context, scope runtime.Scope, q runtime.AgentMessageQuery) ([]contract.AgentMessage, error) {
	var out []contract.AgentMessage
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		var due bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM a2a_messages
			WHERE tenant_id = $1 AND project_id = $2 AND expires_at_ms <= $3)`,
			scope.TenantID, scope.ProjectID, q.NowMs).Scan(&due); err != nil {
			return translate(err)
		}
		if due {
			if _, err := purgeLocked(ctx, tx, scope, q.NowMs, noPurgeLimit); err != nil {
				return err
			}
		}
		sql, args := readMessagesSQL(scope, q)
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return translate(err)
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (contract.AgentMessage, error) {
			return scanAgentMessage(row)
		})
		return translate(err)
	})
	return out, err
}

// readMessagesSQL is the statement of q and its arguments.
func readMessagesSQL(scope runtime.Scope, q runtime.AgentMessageQuery) (string, []any) {
	if q.Snapshot {
		return `
		SELECT ` + agentMessageColumns + ` FROM a2a_messages m
		WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.expires_at_ms > $3
		  AND (m.from_agent = $4 OR m.to_agent = $4 OR m.to_agent IS NULL)
		ORDER BY m.created_at_ms DESC, m.message_id DESC
		LIMIT $5`, []any{scope.TenantID, scope.ProjectID, q.NowMs, q.Agent, q.Limit}
	}
	lock := ""
	if q.MarkRead {
		lock = "FOR KEY SHARE OF m"
	}
	return `
		WITH picked AS (
		    SELECT ` + agentMessageColumns + ` FROM a2a_messages m
		    WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.expires_at_ms > $3
		      AND m.from_agent <> $4 AND (m.to_agent = $4 OR m.to_agent IS NULL)
		      AND (NULLIF($5, '') IS NULL OR m.category = $5)
		      AND (NULLIF($6, '') IS NULL OR m.task_id = $6)
		      AND ($7 OR NOT EXISTS (
		          SELECT 1 FROM a2a_message_reads r
		          WHERE r.tenant_id = $1 AND r.project_id = $2 AND r.agent_id = $4 AND r.message_id = m.message_id))
		    ORDER BY m.created_at_ms, m.message_id
		    LIMIT $8
		    ` + lock + `
		), marked AS (
		    INSERT INTO a2a_message_reads (tenant_id, project_id, agent_id, message_id, read_at_ms)
		    SELECT $1, $2, $4, message_id, $3 FROM picked WHERE $9
		    ON CONFLICT DO NOTHING
		    RETURNING message_id
		)
		SELECT * FROM picked p
		WHERE NOT $9 OR $7 OR p.message_id IN (SELECT message_id FROM marked)
		ORDER BY p.created_at_ms, p.message_id`,
		[]any{scope.TenantID, scope.ProjectID, q.NowMs, q.Agent, q.Category, q.TaskID, q.IncludeRead, q.Limit, q.MarkRead}
}

// purgeLocked locks the head and purges up to limit expired messages.
func purgeLocked(ctx context.Context, tx pgx.Tx, scope runtime.Scope, nowMs int64, limit int) (int, error) {
	b := &pgx.Batch{}
	lockHead(b, scope)
	b.Queue(purgeExpired, scope.TenantID, scope.ProjectID, nowMs, limit)
	res := tx.SendBatch(ctx, b)
	var n int64
	_, err := res.Exec()
	if err == nil {
		err = res.QueryRow().Scan(nil)
	}
	if err == nil {
		err = res.QueryRow().Scan(&n)
	}
	if cerr := res.Close(); err == nil {
		err = cerr
	}
	return int(n), translate(err)
}

// PurgeExpiredMessages implements runtime.AgentMessageStore.
func (s *AgentMessageStore) PurgeExpiredMessages(ctx context.Context, scope runtime.Scope, nowMs int64, limit int) (int, error) {
	var n int
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		n, err = purgeLocked(ctx, tx, scope, nowMs, limit)
		return err
	})
	return n, err
}
