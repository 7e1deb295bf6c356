package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// eventChannel is the NOTIFY channel of the hints that events committed; the payload
// names the scopes as a JSON array of [tenant, project] pairs.
const eventChannel = "agent_context_a2a_events"

// EventStore keeps the scopes' event logs in a2a_events, numbered by the scope's head
// row in a2a_heads.
type EventStore struct {
	db DBTX
	// appended learns the scope of every append: the unit of work hints it after its
	// commit (nil: nobody is told).
	appended func(runtime.Scope)
}

var _ runtime.EventStore = (*EventStore)(nil)

// lockHead creates the scope's head row when missing and locks it until the
// transaction ends, in one statement: an upsert whose update never applies
// (WHERE false) still locks the row it conflicts with, found through the primary key
// (the conflict's arbiter) and left without a new version. A SELECT … FOR UPDATE could
// be planned as a sequential scan of a small, busy table, every version of every
// scope's head read on every post. Every transaction that changes the scope's
// messages takes it first, and every event append takes it last, so locks are always
// taken in the order head, then rows: never a cycle.
func lockHead(b *pgx.Batch, scope runtime.Scope) {
	b.Queue(`INSERT INTO a2a_heads AS h (tenant_id, project_id) VALUES ($1, $2)
		ON CONFLICT (tenant_id, project_id) DO UPDATE SET live_messages = h.live_messages WHERE false`,
		scope.TenantID, scope.ProjectID)
}

// AppendEvents implements runtime.EventStore with one statement: it moves the head
// (creating it on a scope's first event), which locks it until the commit, and
// inserts the events with the sequences it reserved. The head's lock serializes a
// scope's appends, so a transaction that numbers events after another commits after
// it: sequence order is commit order. It notifies nobody: a NOTIFY in the writing
// transaction would take Postgres's one notification lock across the commit and so
// serialize the commits of every tenant. The scope goes to appended instead, which
// the unit of work hints once it committed. An append outside a transaction commits
// on its own.
func (s *EventStore) AppendEvents(ctx context.Context, scope runtime.Scope, events []runtime.NewEvent) (int64, error) {
	if len(events) == 0 {
		return 0, nil
	}
	params, err := eventParams(events)
	if err != nil {
		return 0, err
	}
	var last int64
	err = s.db.QueryRow(ctx, `
		WITH head AS (
		    INSERT INTO a2a_heads AS h (tenant_id, project_id, last_seq) VALUES ($1, $2, $3)
		    ON CONFLICT (tenant_id, project_id) DO UPDATE SET last_seq = h.last_seq + excluded.last_seq
		    RETURNING last_seq
		), appended AS (`+insertEvents(4, "true")+`
		    RETURNING seq
		)
		SELECT max(seq) FROM appended`,
		append([]any{scope.TenantID, scope.ProjectID, int64(len(events))}, params...)...).Scan(&last)
	if err != nil {
		return 0, translate(err)
	}
	if s.appended != nil {
		s.appended(scope)
	}
	return last, nil
}

// eventParams are the ten array parameters of insertEvents for events, in its order.
func eventParams(events []runtime.NewEvent) ([]any, error) {
	n := len(events)
	ids, kinds, actors, correlations := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	targets, tasks, conversations, payloads := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ranks, times := make([]int16, n), make([]int64, n)
	for i, e := range events {
		ev := e.Event
		raw, err := json.Marshal(ev.TargetAgents)
		if err != nil {
			return nil, err
		}
		ids[i], kinds[i], actors[i], correlations[i] = ev.ID, ev.Kind, ev.Actor, ev.CorrelationID
		targets[i], tasks[i], conversations[i], payloads[i] = string(raw), e.TaskID, e.ConversationID, string(ev.Payload)
		ranks[i], times[i] = int16(runtime.ConsistencyRank(ev.ConsistencyLevel)), ev.CreatedAtMs
	}
	return []any{ids, kinds, actors, correlations, targets, ranks, tasks, conversations, payloads, times}, nil
}

// insertEvents is the INSERT of a statement that appends events, where $1 and $2 are
// the scope, the ten array parameters of eventParams start at $first, and a CTE named
// head returns the scope's last_seq already moved past the events: they take the
// sequences just below it, in their order. Only when the SQL condition gate holds
// (it may name head's columns) are they inserted.
func insertEvents(first int, gate string) string {
	p := func(i int, typ string) string { return fmt.Sprintf("$%d::%s[]", first+i, typ) }
	return `
		    INSERT INTO a2a_events (tenant_id, project_id, seq, event_id, kind, actor, correlation_id, target_agents,
		        consistency, task_id, conversation_id, payload, created_at_ms)
		    SELECT $1, $2, head.last_seq - cardinality(` + p(0, "text") + `) + e.n, e.id, e.kind, e.actor, e.correlation_id,
		        ARRAY(SELECT json_array_elements_text(e.targets::json)), e.consistency, NULLIF(e.task_id, ''),
		        NULLIF(e.conversation_id, ''), e.payload::json, e.created_at_ms
		    FROM head, unnest(` + p(0, "text") + `, ` + p(1, "text") + `, ` + p(2, "text") + `, ` + p(3, "text") + `, ` +
		p(4, "text") + `, ` + p(5, "smallint") + `, ` + p(6, "text") + `, ` + p(7, "text") + `, ` + p(8, "text") + `, ` +
		p(9, "bigint") + `)
		        WITH ORDINALITY AS e(id, kind, actor, correlation_id, targets, consistency, task_id, conversation_id,
		            payload, created_at_ms, n)
		    WHERE ` + gate
}

// PollEvents implements runtime.EventStore with one statement over one snapshot: the
// examined window is a primary-key range of at most q.Scan events; the matches, the
// count and the last sequence examined come from it.
func (s *EventStore) PollEvents(ctx context.Context, scope runtime.Scope, q runtime.EventQuery) (runtime.EventBatch, error) {
	rows, err := s.db.Query(ctx, `
		WITH examined AS (
		    SELECT seq, event_id, kind, actor, correlation_id, target_agents, consistency, task_id, payload, created_at_ms
		    FROM a2a_events
		    WHERE tenant_id = $1 AND project_id = $2 AND seq > $3
		    ORDER BY seq
		    LIMIT $4
		), matched AS (
		    SELECT * FROM examined
		    WHERE (cardinality(target_agents) = 0 OR $5 = ANY (target_agents))
		      AND ($6::text[] IS NULL OR kind = ANY ($6::text[]))
		      AND ($7::text[] IS NULL OR actor = ANY ($7::text[]))
		      AND consistency >= $8
		      AND (NULLIF($9, '') IS NULL OR task_id = $9)
		    ORDER BY seq
		    LIMIT $10
		)
		SELECT s.n, s.last, m.seq, m.event_id, m.kind, m.actor, m.correlation_id, m.target_agents, m.consistency,
		    m.payload::text, m.created_at_ms
		FROM (SELECT count(*) AS n, max(seq) AS last FROM examined) s
		LEFT JOIN matched m ON true
		ORDER BY m.seq`,
		scope.TenantID, scope.ProjectID, q.After, q.Scan, q.Agent, q.Kinds, q.Actors, q.MinConsistency, q.TaskID, q.Limit)
	if err != nil {
		return runtime.EventBatch{}, translate(err)
	}
	defer rows.Close()
	var (
		examined int64
		last     *int64
		events   []contract.Event
	)
	for rows.Next() {
		var (
			seq, createdAt        *int64
			id, kind, actor, corr *string
			targets               []string
			rank                  *int16
			payload               *string
		)
		if err := rows.Scan(&examined, &last, &seq, &id, &kind, &actor, &corr, &targets, &rank, &payload, &createdAt); err != nil {
			return runtime.EventBatch{}, translate(err)
		}
		if seq == nil {
			continue
		}
		if targets == nil {
			targets = []string{}
		}
		events = append(events, contract.Event{
			ID: *id, Sequence: *seq, Kind: *kind, Actor: *actor, CorrelationID: *corr, TargetAgents: targets,
			ConsistencyLevel: runtime.ConsistencyLevel(int(*rank)), Payload: json.RawMessage(*payload), CreatedAtMs: *createdAt,
		})
	}
	if err := rows.Err(); err != nil {
		return runtime.EventBatch{}, translate(err)
	}
	batch := runtime.EventBatch{Events: events, Next: q.After, AtHead: examined < int64(q.Scan)}
	switch {
	case len(events) == q.Limit:
		// Matches may follow the last one returned: resume right after it.
		batch.Next, batch.AtHead = events[len(events)-1].Sequence, false
	case last != nil:
		batch.Next = *last
	}
	return batch, nil
}

// TailEvents implements runtime.EventStore: a primary-key range.
func (s *EventStore) TailEvents(ctx context.Context, scope runtime.Scope, after int64, limit int) ([]runtime.LoggedEvent, error) {
	rows, err := s.db.Query(ctx, `
		SELECT `+loggedEventColumns+`
		FROM a2a_events
		WHERE tenant_id = $1 AND project_id = $2 AND seq > $3
		ORDER BY seq
		LIMIT $4`,
		scope.TenantID, scope.ProjectID, after, limit)
	if err != nil {
		return nil, translate(err)
	}
	return collectLoggedEvents(rows)
}

// loggedEventColumns are the columns collectLoggedEvents reads, in its order.
const loggedEventColumns = `seq, event_id, kind, actor, correlation_id, target_agents, consistency, coalesce(task_id, ''),
		    payload::text, created_at_ms`

// collectLoggedEvents reads the rows of a query of loggedEventColumns and closes them.
func collectLoggedEvents(rows pgx.Rows) ([]runtime.LoggedEvent, error) {
	defer rows.Close()
	var events []runtime.LoggedEvent
	for rows.Next() {
		var (
			e       runtime.LoggedEvent
			rank    int16
			payload string
		)
		if err := rows.Scan(&e.Event.Sequence, &e.Event.ID, &e.Event.Kind, &e.Event.Actor, &e.Event.CorrelationID,
			&e.Event.TargetAgents, &rank, &e.TaskID, &payload, &e.Event.CreatedAtMs); err != nil {
			return nil, translate(err)
		}
		if e.Event.TargetAgents == nil {
			e.Event.TargetAgents = []string{}
		}
		e.Event.ConsistencyLevel, e.Event.Payload = runtime.ConsistencyLevel(int(rank)), json.RawMessage(payload)
		events = append(events, e)
	}
	return events, translate(rows.Err())
}

// PurgeEvents implements runtime.EventStore: the oldest events first, by the time
// index.
func (s *EventStore) PurgeEvents(ctx context.Context, scope runtime.Scope, beforeMs int64, limit int) (int, error) {
	return purgeOldest(ctx, s.db, "a2a_events", "seq", "created_at_ms", scope, beforeMs, limit)
}

// purgeOldest deletes up to limit rows of table in scope whose timeColumn is before
// beforeMs, oldest first. The keys are collected into an array first, so the delete is
// a lookup of those keys whatever the statistics say (a join could scan the scope).
func purgeOldest(ctx context.Context, db DBTX, table, key, timeColumn string, scope runtime.Scope, beforeMs int64, limit int) (int, error) {
	t, k, c := pgx.Identifier{table}.Sanitize(), pgx.Identifier{key}.Sanitize(), pgx.Identifier{timeColumn}.Sanitize()
	tag, err := db.Exec(ctx, `
		DELETE FROM `+t+`
		WHERE tenant_id = $1 AND project_id = $2 AND `+k+` = ANY (ARRAY(
		    SELECT `+k+` FROM `+t+`
		    WHERE tenant_id = $1 AND project_id = $2 AND `+c+` < $3
		    ORDER BY `+c+` LIMIT $4))`,
		scope.TenantID, scope.ProjectID, beforeMs, limit)
	if err != nil {
		return 0, translate(err)
	}
	return int(tag.RowsAffected()), nil
}

// SweepScopes implements runtime.EventStore: every scope with coordination state has a
// head row.
func (s *EventStore) SweepScopes(ctx context.Context, sinceMs int64, limit int) ([]runtime.Scope, error) {
	rows, err := s.db.Query(ctx, `
		SELECT tenant_id, project_id FROM a2a_heads
		WHERE swept_at_ms < $1
		ORDER BY tenant_id, project_id
		LIMIT $2`, sinceMs, limit)
	if err != nil {
		return nil, translate(err)
	}
	scopes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[runtime.Scope])
	return scopes, translate(err)
}

// MarkSwept implements runtime.EventStore.
func (s *EventStore) MarkSwept(ctx context.Context, scope runtime.Scope, nowMs int64) error {
	_, err := s.db.Exec(ctx, `
		UPDATE a2a_heads SET swept_at_ms = greatest(swept_at_ms, $3)
		WHERE tenant_id = $1 AND project_id = $2`, scope.TenantID, scope.ProjectID, nowMs)
	return translate(err)
}
