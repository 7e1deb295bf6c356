package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// AgentMessageStore keeps agent messages in a2a_messages and who read them in
// a2a_message_reads. The scope's head row counts its messages: every insert and delete
// here updates the count under the head's lock.
type AgentMessageStore struct {
	db DBTX
	// inUnit tells that db is a unit of work's transaction, which goes on after a post.
	inUnit bool
	// appended learns the scope of a post's event, as EventStore's does.
	appended func(runtime.Scope)
	// citus: the database is a Citus coordinator, which refuses generic plans of the
	// read (it routes a statement by its arguments).
	citus bool
}

var _ a2a.AgentMessageStore = (*AgentMessageStore)(nil)

// agentMessageColumns are the columns scanAgentMessage reads, in its order.
const agentMessageColumns = `m.message_id, m.correlation_id, m.from_agent, m.to_agent, m.task_id, m.category,
	m.priority, m.privacy, m.content, m.metadata::text, m.created_at_ms, m.expires_at_ms`

func scanAgentMessage(row pgx.Row) (contract.AgentMessage, error) {
	var m contract.AgentMessage
	var metadata *string
	err := row.Scan(&m.ID, &m.CorrelationID, &m.FromAgent, &m.ToAgent, &m.TaskID, &m.Category, &m.Priority,
		&m.Privacy, &m.Content, &metadata, &m.CreatedAtMs, &m.ExpiresAtMs)
	m.Metadata = jsonValue(metadata)
	return m, err
}

// purgeExpired is the statement that deletes the scope's messages expired at $3 (at
// most $4 of them) and takes them off the head's count; the head must be locked by an
// earlier statement of the transaction. It returns how many went.
const purgeExpired = `
	WITH gone AS (
	    DELETE FROM a2a_messages
	    WHERE tenant_id = $1 AND project_id = $2 AND message_id = ANY (ARRAY(
	        SELECT message_id FROM a2a_messages
	        WHERE tenant_id = $1 AND project_id = $2 AND expires_at_ms <= $3
	        ORDER BY expires_at_ms LIMIT $4))
	    RETURNING seq
	), ` + goneMarks + `, counted AS (SELECT count(*) AS n FROM gone
	), head AS (
	    UPDATE a2a_heads SET live_messages = live_messages - counted.n
	    FROM counted
	    WHERE tenant_id = $1 AND project_id = $2 AND counted.n > 0
	)
	SELECT n FROM counted`

// goneMarks is the CTE that deletes the read marks of the messages in gone. Here and in
// every purge the keys of the rows to delete are collected first (one InitPlan), and
// the delete probes the primary key with those: it costs nothing when the array is
// empty, as it is for most posts, and never depends on the statistics. Rows are named
// by key, never by address, and every statement carries the scope's tenant: Citus
// routes it to the tenant's shard and refuses a ctid in a modification it cannot
// route. The marks are found on the primary key's prefix, the gone sequences an
// array in the index condition.
const goneMarks = `marks AS (
	    DELETE FROM a2a_message_reads
	    WHERE tenant_id = $1 AND project_id = $2 AND message_seq = ANY (ARRAY(SELECT seq FROM gone))
	)`

// noPurgeLimit lets a purge take every expired message: at most the scope's bound.
const noPurgeLimit = 1 << 30

// PostMessage implements a2a.AgentMessageStore in one round trip: a batch, which
// Postgres runs as one transaction of its own outside a unit of work (an implicit
// one, ended by the batch's Sync) and as part of the unit's inside one. It locks the
// head, purges, inserts, evicts beyond the bound and reads the stored message back,
// each statement seeing what the one before did, so the count and the bound are
// exact. The insert's statement moves the head first, through its primary key and
// only when the scope holds no message of that ID (under the head's lock no other
// post can insert one meanwhile), and takes the message's and its event's sequences
// from it; an identical retry writes nothing at all. Outside a unit of work the head is
// locked from the batch's first statement to its commit with no round trip to the
// client in between, which is what bounds one busy scope's posts. Its statements are
// planned as key lookups (keyPlans); inside a unit of work the batch sets that back at
// its end.
func (s *AgentMessageStore) PostMessage(ctx context.Context, scope runtime.Scope, m *contract.AgentMessage, maxLive int, nowMs int64, announce runtime.NewEvent) (contract.AgentMessage, bool, error) {
	events, err := eventParams([]runtime.NewEvent{announce})
	if err != nil {
		return contract.AgentMessage{}, false, err
	}
	b := &pgx.Batch{}
	queueSetLocal(b, keyPlans)
	lockHead(b, scope)
	b.Queue(purgeExpired, scope.TenantID, scope.ProjectID, nowMs, noPurgeLimit)
	b.Queue(`
		WITH posted AS (
		    SELECT count(*) AS n FROM a2a_messages WHERE tenant_id = $1 AND project_id = $2 AND message_id = $3
		), head AS (
		    INSERT INTO a2a_heads AS h (tenant_id, project_id, live_messages, last_message_seq, last_seq)
		    SELECT $1, $2, 1, 1, cardinality($15::text[]) FROM posted WHERE posted.n = 0
		    ON CONFLICT (tenant_id, project_id) DO UPDATE
		    SET live_messages = h.live_messages + 1, last_message_seq = h.last_message_seq + 1,
		        last_seq = h.last_seq + cardinality($15::text[])
		    RETURNING h.last_message_seq, h.last_seq
		), inserted AS (
		    INSERT INTO a2a_messages (tenant_id, project_id, message_id, seq, correlation_id, from_agent, to_agent,
		        task_id, category, priority, privacy, content, metadata, created_at_ms, expires_at_ms)
		    SELECT $1, $2, $3, head.last_message_seq, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14 FROM head
		    RETURNING 1
		), appended AS (`+insertEvents(15, "true")+`
		)
		SELECT count(*) FROM inserted`,
		append([]any{scope.TenantID, scope.ProjectID, m.ID, m.CorrelationID, m.FromAgent, m.ToAgent, m.TaskID, m.Category,
			m.Priority, m.Privacy, m.Content, jsonParam(m.Metadata), m.CreatedAtMs, m.ExpiresAtMs}, events...)...)
	// The oldest messages beyond the bound go, as many as the count exceeds it by.
	b.Queue(`
		WITH gone AS (
		    DELETE FROM a2a_messages
		    WHERE tenant_id = $1 AND project_id = $2 AND message_id = ANY (ARRAY(
		        SELECT message_id FROM a2a_messages
		        WHERE tenant_id = $1 AND project_id = $2
		        ORDER BY created_at_ms, message_id
		        LIMIT greatest((SELECT live_messages FROM a2a_heads WHERE tenant_id = $1 AND project_id = $2) - $3, 0)))
		    RETURNING seq
		), `+goneMarks+`, counted AS (SELECT count(*) AS n FROM gone)
		UPDATE a2a_heads SET live_messages = live_messages - counted.n
		FROM counted
		WHERE tenant_id = $1 AND project_id = $2 AND counted.n > 0`,
		scope.TenantID, scope.ProjectID, maxLive)
	b.Queue(`SELECT `+agentMessageColumns+` FROM a2a_messages m WHERE tenant_id = $1 AND project_id = $2 AND message_id = $3`,
		scope.TenantID, scope.ProjectID, m.ID)
	// Outside a unit of work the batch is its own transaction, and the setting ends
	// with it; inside one, the unit's later statements are not written for it.
	if s.inUnit {
		queueResetLocal(b, keyPlans)
	}
	res := s.db.SendBatch(ctx, b)
	defer func() { _ = res.Close() }() // checked below on success; an earlier error is the one reported
	var inserted int64
	err = execResults(res, 2) // the settings, the head's lock
	for _, dst := range []any{nil, &inserted} {
		if err == nil {
			err = res.QueryRow().Scan(dst)
		}
	}
	if err == nil {
		err = execResults(res, 1) // the eviction
	}
	var stored contract.AgentMessage
	if err == nil {
		if stored, err = scanAgentMessage(res.QueryRow()); errors.Is(err, pgx.ErrNoRows) {
			// Evicted at once: a message older than the bound's newest (created by a
			// replica whose clock runs behind) goes first.
			stored, err = *m, nil
		}
	}
	if err == nil && s.inUnit {
		err = execResults(res, 1) // the setting's reset
	}
	// Closing ends the batch: outside a transaction, that is its commit.
	if cerr := res.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return contract.AgentMessage{}, false, translate(err)
	}
	if inserted == 1 && s.appended != nil {
		s.appended(scope)
	}
	return stored, inserted == 1, nil
}

// ReadMessages implements a2a.AgentMessageStore in one round trip when nothing
// has expired: one batch (one transaction) probes for expired messages, runs the read,
// which marks what it picked in the same statement, and advances the reader's
// watermark. A concurrent read of the same agent that picked the same unread message
// finds its mark taken (the insert waits for the other's commit) and leaves it out, so
// no unread message is delivered twice.
// The batch plans its statements generically and as key lookups (genericPlans and
// keyPlans, for its transaction only): left to choose, Postgres planned the read and
// the watermark afresh on most calls, about as costly as running them, and a generic
// plan made while the watermarks held a few rows scanned them all. Citus plans them
// for their arguments, the only way it routes them.
// Expired messages are never returned; when the probe found some, a second batch
// purges them under the head's lock, after the read's transaction ended (a read never
// holds message locks while it waits for the head). Reads therefore run on their own,
// never inside a unit of work.
func (s *AgentMessageStore) ReadMessages(ctx context.Context, scope runtime.Scope, q a2a.AgentMessageQuery) ([]contract.AgentMessage, error) {
	b := &pgx.Batch{}
	plans := []setting{keyPlans, genericPlans}
	if s.citus {
		plans = plans[:1]
	}
	queueSetLocal(b, plans...)
	b.Queue(`SELECT EXISTS (SELECT 1 FROM a2a_messages WHERE tenant_id = $1 AND project_id = $2 AND expires_at_ms <= $3)`,
		scope.TenantID, scope.ProjectID, q.NowMs)
	sql, args := readMessagesSQL(scope, q)
	b.Queue(sql, args...)
	if q.MarkRead {
		b.Queue(advanceWatermark, scope.TenantID, scope.ProjectID, q.Agent, q.NowMs)
	}
	res := s.db.SendBatch(ctx, b)
	var due bool
	err := execResults(res, 1) // the settings
	if err == nil {
		err = res.QueryRow().Scan(&due)
	}
	var out []contract.AgentMessage
	if err == nil {
		var rows pgx.Rows
		if rows, err = res.Query(); err == nil {
			out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (contract.AgentMessage, error) {
				return scanAgentMessage(row)
			})
		}
	}
	if err == nil && q.MarkRead {
		_, err = res.Exec()
	}
	if cerr := res.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, translate(err)
	}
	if due {
		if _, err := s.PurgeExpiredMessages(ctx, scope, q.NowMs, noPurgeLimit); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// watermark is the reader's ($4) watermark in the scope ($1, $2).
const watermark = `coalesce((SELECT seq FROM a2a_read_watermarks
	WHERE tenant_id = $1 AND project_id = $2 AND agent_id = $4), 0)`

// advanceWatermark moves the reader's ($3) watermark up to just below the first
// message it may see that is neither read nor expired at $4, or, when there is none,
// to the scope's last message sequence. It runs after the read that marked, in the
// same transaction, so it sees those marks; marks of concurrent reads it cannot see
// only keep it lower, and it never moves down.
const advanceWatermark = `
	WITH current AS (
	    SELECT coalesce((SELECT seq FROM a2a_read_watermarks
	        WHERE tenant_id = $1 AND project_id = $2 AND agent_id = $3), 0) AS seq
	)
	INSERT INTO a2a_read_watermarks AS w (tenant_id, project_id, agent_id, seq)
	SELECT $1, $2, $3, coalesce(
	    (SELECT m.seq - 1 FROM a2a_messages m, current
	     WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.seq > current.seq AND m.expires_at_ms > $4
	       AND m.from_agent <> $3 AND (m.to_agent = $3 OR m.to_agent IS NULL)
	       AND NOT EXISTS (SELECT 1 FROM a2a_message_reads r
	           WHERE r.tenant_id = $1 AND r.project_id = $2 AND r.message_seq = m.seq AND r.agent_id = $3
	           OFFSET 0)
	     ORDER BY m.seq LIMIT 1),
	    (SELECT last_message_seq FROM a2a_heads WHERE tenant_id = $1 AND project_id = $2),
	    0)
	ON CONFLICT (tenant_id, project_id, agent_id) DO UPDATE SET seq = greatest(w.seq, excluded.seq)`

// readMessagesSQL is the statement of q and its arguments. An unread read starts past
// the reader's watermark.
func readMessagesSQL(scope runtime.Scope, q a2a.AgentMessageQuery) (string, []any) {
	if q.Snapshot {
		return `
		SELECT ` + agentMessageColumns + ` FROM a2a_messages m
		WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.expires_at_ms > $3
		  AND (m.from_agent = $4 OR m.to_agent = $4 OR m.to_agent IS NULL)
		ORDER BY m.created_at_ms DESC, m.message_id DESC
		LIMIT $5`, []any{scope.TenantID, scope.ProjectID, q.NowMs, q.Agent, q.Limit}
	}
	// Fragments rather than parameters: an OR around the NOT EXISTS would make the
	// planner hash every mark of the agent. An unread read takes the messages above
	// the watermark first, fenced by OFFSET 0 (a range of the sequence index: what
	// arrived since the reader caught up), and only then orders them; left to itself,
	// a planner without statistics walks the time index from the oldest message
	// through everything already read. The mark probe is fenced too, so it stays one
	// primary-key lookup per message whatever the statistics say.
	source, unread := "a2a_messages m", ""
	if !q.IncludeRead {
		source = `(SELECT * FROM a2a_messages
		    WHERE tenant_id = $1 AND project_id = $2 AND seq > ` + watermark + ` OFFSET 0) m`
		unread = `AND NOT EXISTS (
		          SELECT 1 FROM a2a_message_reads r
		          WHERE r.tenant_id = $1 AND r.project_id = $2 AND r.message_seq = m.seq AND r.agent_id = $4
		          OFFSET 0)`
	}
	return `
		WITH picked AS (
		    SELECT ` + agentMessageColumns + `, m.seq FROM ` + source + `
		    WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.expires_at_ms > $3
		      AND m.from_agent <> $4 AND (m.to_agent = $4 OR m.to_agent IS NULL) ` + unread + `
		      AND (NULLIF($5, '') IS NULL OR m.category = $5)
		      AND (NULLIF($6, '') IS NULL OR m.task_id = $6)
		    ORDER BY m.created_at_ms, m.message_id
		    LIMIT $8
		), marked AS (
		    INSERT INTO a2a_message_reads (tenant_id, project_id, message_seq, agent_id, read_at_ms)
		    SELECT $1, $2, seq, $4, $3 FROM picked WHERE $9
		    ON CONFLICT DO NOTHING
		    RETURNING message_seq
		)
		SELECT p.message_id, p.correlation_id, p.from_agent, p.to_agent, p.task_id, p.category, p.priority, p.privacy,
		    p.content, p.metadata, p.created_at_ms, p.expires_at_ms
		FROM picked p
		WHERE NOT $9 OR $7 OR p.seq IN (SELECT message_seq FROM marked)
		ORDER BY p.created_at_ms, p.message_id`,
		[]any{scope.TenantID, scope.ProjectID, q.NowMs, q.Agent, q.Category, q.TaskID, q.IncludeRead, q.Limit, q.MarkRead}
}

// PurgeExpiredMessages implements a2a.AgentMessageStore with one batch: the head's
// lock, then the purge (planned as PostMessage's is).
func (s *AgentMessageStore) PurgeExpiredMessages(ctx context.Context, scope runtime.Scope, nowMs int64, limit int) (int, error) {
	b := &pgx.Batch{}
	queueSetLocal(b, keyPlans)
	lockHead(b, scope)
	b.Queue(purgeExpired, scope.TenantID, scope.ProjectID, nowMs, limit)
	res := s.db.SendBatch(ctx, b)
	defer func() { _ = res.Close() }() // checked below on success; an earlier error is the one reported
	var n int64
	err := execResults(res, 2) // the settings, the head's lock
	if err == nil {
		err = res.QueryRow().Scan(&n)
	}
	if err == nil {
		err = res.Close()
	}
	return int(n), translate(err)
}

// PurgeOrphanMarks implements a2a.AgentMessageStore: an anti join of the scope's
// marks with its messages' sequences, in a batch that plans it by keys (keyPlans).
func (s *AgentMessageStore) PurgeOrphanMarks(ctx context.Context, scope runtime.Scope, limit int) (int, error) {
	b := &pgx.Batch{}
	queueSetLocal(b, keyPlans)
	b.Queue(`
		DELETE FROM a2a_message_reads
		WHERE tenant_id = $1 AND project_id = $2 AND (message_seq, agent_id) IN (
		    SELECT o.message_seq, o.agent_id FROM a2a_message_reads o
		    WHERE o.tenant_id = $1 AND o.project_id = $2 AND NOT EXISTS (
		        SELECT 1 FROM a2a_messages m WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.seq = o.message_seq OFFSET 0)
		    LIMIT $3)`,
		scope.TenantID, scope.ProjectID, limit)
	res := s.db.SendBatch(ctx, b)
	defer func() { _ = res.Close() }() // checked below on success; an earlier error is the one reported
	err := execResults(res, 1)         // the settings
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = res.Exec()
	}
	if err == nil {
		err = res.Close()
	}
	if err != nil {
		return 0, translate(err)
	}
	return int(tag.RowsAffected()), nil
}
