package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/operation"
)

// retentionCursor is a retention run's resume point, kept in the operation's row with
// the counts so far. Which fields hold the position depends on the walk (see
// RetentionStep): the age walk keeps the last message examined (CreatedAtMs,
// ConversationID, Sequence), the walk of one conversation its Sequence, and the
// keep-last walk the conversation it is in (ConversationID; Past once it is done) and
// the last message examined there (Sequence; in a dry run also Skip, the number of
// that conversation's messages examined, which a run that deletes finds gone).
// Cleanup marks a run whose walk is over and that is forgetting the conversations it
// touched.
type retentionCursor struct {
	CreatedAtMs           int64  `json:"createdAtMs"`
	ConversationID        string `json:"conversationId"`
	Sequence              int64  `json:"sequence"`
	Skip                  int64  `json:"skip"`
	Past                  bool   `json:"past"`
	Cleanup               bool   `json:"cleanup"`
	DeletedMessages       int64  `json:"deletedMessages"`
	AffectedConversations int64  `json:"affectedConversations"`
}

// retentionWindowSQL reads, from the candidate messages a walk selects (%[1]s: the
// filter after tenant and project, %[2]s: the walk's order), at most $3 and only
// while the stored bytes of those before stay under $4. It returns the messages
// examined in walk order, each with the number of candidates read (more than examined
// when the byte bound cut them).
const retentionWindowSQL = `
WITH cand AS (
    SELECT conversation_id, sequence, created_at_ms, %[3]s AS size
    FROM messages
    WHERE tenant_id = $1 AND project_id = $2 AND %[1]s
    ORDER BY %[2]s
    LIMIT $3
)
SELECT conversation_id, sequence, created_at_ms, (SELECT count(*) FROM cand)
FROM (
    SELECT *, sum(size) OVER (ORDER BY %[2]s ROWS UNBOUNDED PRECEDING) - size AS before
    FROM cand
) c
WHERE before < $4
ORDER BY %[2]s`

var (
	// retentionAgeSQL is the age walk: the scope's messages created before $5 after
	// the keyset ($6, $7, $8), through messages_by_age.
	retentionAgeSQL = fmt.Sprintf(retentionWindowSQL,
		`created_at_ms < $5 AND (created_at_ms, conversation_id, sequence) > ($6, $7, $8)`,
		`created_at_ms, conversation_id, sequence`, messagesTable.sizeExpr())
	// retentionConversationSQL is the walk of one conversation ($5): its messages
	// after the sequence $6, through messages_by_sequence.
	retentionConversationSQL = fmt.Sprintf(retentionWindowSQL,
		`conversation_id = $5 AND sequence > $6`, `sequence`, messagesTable.sizeExpr())
)

// retentionHeadsSQL reads at most $5 heads of the keep-last walk from the conversation
// $3 on ($3 itself excluded when $4, the walk being past it), and returns how many it
// read, the last of them, and those that hold more messages than the policy keeps
// ($6) and are not tombstoned, with their message counts. retentionHeadSQL reads the
// head of the one conversation $3 instead.
const retentionHeadsSQL = `
WITH scan AS (
    SELECT conversation_id, message_count, deleted_at_ms FROM conversations
    WHERE tenant_id = $1 AND project_id = $2 AND conversation_id >= $3
      AND NOT (conversation_id = $3 AND $4::boolean)
    ORDER BY conversation_id
    LIMIT $5
)
SELECT (SELECT count(*) FROM scan), (SELECT max(conversation_id) FROM scan),
       ARRAY(SELECT conversation_id FROM scan WHERE deleted_at_ms IS NULL AND message_count > $6 ORDER BY conversation_id),
       ARRAY(SELECT message_count FROM scan WHERE deleted_at_ms IS NULL AND message_count > $6 ORDER BY conversation_id)`

var retentionHeadSQL = strings.Replace(retentionHeadsSQL, "conversation_id >= $3", "conversation_id = $3", 1)

// retentionBeyondKeepSQL reads, for each conversation of $3 (in that order), the
// oldest of its messages after the sequence $4 that the keep-last policy ($7)
// selects: as many as its head's count leaves beyond the newest $7, less the $5 a dry
// run already examined, and at most $6. It stops, as retentionWindowSQL does, when the
// bytes of the messages before reach $8, and returns the messages examined and the
// number read.
var retentionBeyondKeepSQL = `
WITH want AS (
    SELECT * FROM unnest($3::text[], $4::bigint[], $5::bigint[], $6::bigint[])
        WITH ORDINALITY AS w(conversation_id, after, skip, cap, ord)
), cand AS (
    SELECT w.ord, m.conversation_id, m.sequence, m.size
    FROM want w
    JOIN conversations h
      ON h.tenant_id = $1 AND h.project_id = $2 AND h.conversation_id = w.conversation_id
     AND h.deleted_at_ms IS NULL
    CROSS JOIN LATERAL (
        SELECT conversation_id, sequence, ` + messagesTable.sizeExpr() + ` AS size
        FROM messages
        WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = w.conversation_id AND sequence > w.after
        ORDER BY sequence
        LIMIT greatest(least(w.cap, h.message_count - $7::bigint - w.skip), 0)
    ) m
)
SELECT conversation_id, sequence, (SELECT count(*) FROM cand)
FROM (
    SELECT *, sum(size) OVER (ORDER BY ord, sequence ROWS UNBOUNDED PRECEDING) - size AS before
    FROM cand
) c
WHERE before < $8
ORDER BY ord, sequence`

// retentionLockSQL locks the heads of the conversations $3 in ID order, as appenders
// do, so that no append or other retention changes their messages or counts until the
// step commits, and appenders and retention never deadlock.
const retentionLockSQL = `
SELECT conversation_id FROM conversations
WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = ANY($3::text[])
ORDER BY conversation_id
FOR UPDATE`

// retentionDeleteSQL deletes (unless $6, a dry run) those of the candidate messages
// ($3, $4: conversation and sequence) whose conversation is not tombstoned and, when
// $5 > 0, that are not among the newest $5 of their conversation, subtracts them from
// their heads' counts and records their conversations as touched by the operation
// $7. It returns the number of messages deleted (or that would be) and of
// conversations touched for the first time in this run.
//
// The keep boundary of a conversation comes from its head's count n: the messages
// beyond the newest $5 are its n − $5 oldest. A conversation whose count is within the
// policy is decided from its head alone; otherwise one index-only probe finds the
// boundary from the cheaper end: the newest $5 entries (when $5 ≤ n − $5), or the
// oldest n − $5 up to the newest candidate. bound is materialized so that the probe
// runs once per conversation, not once per candidate.
const retentionDeleteSQL = `
WITH cand AS (
    SELECT * FROM unnest($3::text[], $4::bigint[]) AS c(conversation_id, sequence)
), live AS (
    SELECT h.conversation_id, h.message_count - $5::bigint AS allowed, c.newest
    FROM (SELECT conversation_id, max(sequence) AS newest FROM cand GROUP BY conversation_id) c
    JOIN conversations h
      ON h.tenant_id = $1 AND h.project_id = $2 AND h.conversation_id = c.conversation_id
     AND h.deleted_at_ms IS NULL
), bound AS MATERIALIZED (
    SELECT l.conversation_id, CASE
        WHEN $5::bigint = 0 THEN l.newest
        WHEN l.allowed <= 0 THEN 0
        WHEN $5::bigint <= l.allowed THEN (
            SELECT m.sequence - 1 FROM messages m
            WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.conversation_id = l.conversation_id
            ORDER BY m.sequence DESC
            OFFSET $5::bigint - 1 LIMIT 1)
        ELSE (
            SELECT CASE WHEN count(*) < l.allowed THEN l.newest ELSE max(x.sequence) END
            FROM (
                SELECT m.sequence FROM messages m
                WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.conversation_id = l.conversation_id
                  AND m.sequence <= l.newest
                ORDER BY m.sequence
                LIMIT l.allowed) x)
    END AS last_doomed
    FROM live l
), doomed AS (
    SELECT c.conversation_id, c.sequence
    FROM cand c JOIN bound b USING (conversation_id)
    WHERE c.sequence <= b.last_doomed
), deleted AS (
    DELETE FROM messages m USING doomed d
    WHERE NOT $6::boolean
      AND m.tenant_id = $1 AND m.project_id = $2
      AND m.conversation_id = d.conversation_id AND m.sequence = d.sequence
    RETURNING m.conversation_id
), hit AS (
    SELECT conversation_id FROM doomed WHERE $6::boolean
    UNION ALL
    SELECT conversation_id FROM deleted
), per AS (
    SELECT conversation_id, count(*) AS n FROM hit GROUP BY conversation_id
), counted AS (
    UPDATE conversations h SET message_count = h.message_count - p.n
    FROM per p
    WHERE NOT $6::boolean
      AND h.tenant_id = $1 AND h.project_id = $2 AND h.conversation_id = p.conversation_id
), touched AS (
    INSERT INTO retention_touched (tenant_id, project_id, operation_id, conversation_id)
    SELECT $1, $2, $7, conversation_id FROM per
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM hit), (SELECT count(*) FROM touched)`

// RetentionStep implements operation.OperationStore. A step walks the next candidates of
// the plan, within bounds, and deletes what the policy selects among them, in one
// transaction that also advances the cursor and the counts. The walk depends on the
// policy, so that a run costs in proportion to what it deletes, not to what the scope
// holds (docs/operations.md has the exact costs):
//
//   - with maxAgeMs, the age walk reads only the messages older than the cutoff
//     (messages_by_age), and checks the keep-last floor, if any, per conversation
//     touched; confined to one conversation, it walks that conversation's messages;
//   - with keepLastMessages only, the keep-last walk reads the scope's heads and,
//     beyond the keep boundary of each conversation that holds more than the policy
//     keeps, exactly the messages it deletes.
//
// Once the walk is over, the run forgets the conversations it touched (a step of at
// most bounds.Rows of them each) and succeeds.
func (s *OperationStore) RetentionStep(ctx context.Context, scope runtime.Scope, operationID string, plan operation.RetentionPlan, bounds operation.StepBounds, nowMs int64) (bool, error) {
	var done bool
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		if err := setLocalTimeout(ctx, tx, bounds.Timeout); err != nil {
			return err
		}
		st := retentionStep{tx: tx, scope: scope, operationID: operationID, plan: plan, bounds: bounds}
		running, err := lockRunning(ctx, tx, scope, operationID, &st.cur)
		if err != nil || !running {
			done = err == nil
			return err
		}
		var examined int64
		walked := st.cur.Cleanup
		if !walked {
			if plan.CutoffMs == nil {
				examined, walked, err = st.keepLastWalk(ctx)
			} else {
				examined, walked, err = st.ageWalk(ctx)
			}
			if err != nil {
				return err
			}
		}
		finished := false
		if walked {
			st.cur.Cleanup = true
			if finished, err = st.forget(ctx); err != nil {
				return err
			}
		}
		raw, err := json.Marshal(st.cur)
		if err != nil {
			return err
		}
		if finished {
			result, err := json.Marshal(contract.RetentionResult{
				DeletedMessages: st.cur.DeletedMessages, AffectedConversations: st.cur.AffectedConversations,
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

// retentionStep is one step of a retention run, in its transaction.
type retentionStep struct {
	tx          pgx.Tx
	scope       runtime.Scope
	operationID string
	plan        operation.RetentionPlan
	bounds      operation.StepBounds
	cur         retentionCursor
}

// ageWalk examines the next messages of the age walk (or of the one conversation's
// walk) and deletes those the plan selects. It reports how many it examined and
// whether the walk is over: fewer candidates than the bound were left and the byte
// bound cut none of them.
func (st *retentionStep) ageWalk(ctx context.Context) (int64, bool, error) {
	query, args := retentionAgeSQL, []any{st.scope.TenantID, st.scope.ProjectID, int64(st.bounds.Rows), st.bounds.Bytes,
		*st.plan.CutoffMs, st.cur.CreatedAtMs, st.cur.ConversationID, st.cur.Sequence}
	if st.plan.ConversationID != "" {
		query, args = retentionConversationSQL, append(args[:4], st.plan.ConversationID, st.cur.Sequence)
	}
	rows, err := st.tx.Query(ctx, query, args...)
	if err != nil {
		return 0, false, translate(err)
	}
	var conversations []string
	var sequences []int64
	var examined, candidates int64
	for rows.Next() {
		if err := rows.Scan(&st.cur.ConversationID, &st.cur.Sequence, &st.cur.CreatedAtMs, &candidates); err != nil {
			rows.Close()
			return 0, false, translate(err)
		}
		examined++
		if st.cur.CreatedAtMs < *st.plan.CutoffMs {
			conversations = append(conversations, st.cur.ConversationID)
			sequences = append(sequences, st.cur.Sequence)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, false, translate(err)
	}
	if len(conversations) > 0 {
		ids := slices.Clone(conversations)
		slices.Sort(ids)
		if err := st.lockHeads(ctx, slices.Compact(ids)); err != nil {
			return 0, false, err
		}
		if err := st.remove(ctx, conversations, sequences, st.plan.KeepLast); err != nil {
			return 0, false, err
		}
	}
	return examined, candidates < int64(st.bounds.Rows) && examined == candidates, nil
}

// keepLastWalk examines the next heads of the keep-last walk and, of the conversations
// holding more messages than the policy keeps, the oldest messages beyond the keep
// boundary, and deletes them. It reports how many messages it examined and whether
// the walk is over.
func (st *retentionStep) keepLastWalk(ctx context.Context) (int64, bool, error) {
	rowBound := int64(st.bounds.Rows)
	query, from := retentionHeadsSQL, st.cur.ConversationID
	if st.plan.ConversationID != "" {
		query, from = retentionHeadSQL, st.plan.ConversationID
	}
	var scanned int64
	var lastScanned *string
	var ids []string
	var counts []int64
	if err := st.tx.QueryRow(ctx, query, st.scope.TenantID, st.scope.ProjectID, from, st.cur.Past, rowBound, st.plan.KeepLast).
		Scan(&scanned, &lastScanned, &ids, &counts); err != nil {
		return 0, false, translate(err)
	}
	// The last head the scope has was read, or the one conversation's.
	end := scanned < rowBound || st.plan.ConversationID != ""

	// Share the step's rows among the conversations in order, as their counts ask.
	var want []string
	var afters, skips, caps []int64
	room, cut := rowBound, false
	for i, id := range ids {
		after, skip := int64(0), int64(0)
		if id == st.cur.ConversationID && !st.cur.Past {
			after = st.cur.Sequence
			if st.plan.DryRun {
				skip = st.cur.Skip
			}
		}
		desire := counts[i] - st.plan.KeepLast - skip
		if desire <= 0 {
			continue
		}
		if room == 0 {
			cut = true
			break
		}
		take := min(desire, room)
		want, afters, skips, caps = append(want, id), append(afters, after), append(skips, skip), append(caps, take)
		room -= take
		if take < desire {
			cut = true
			break
		}
	}
	if len(want) == 0 {
		if lastScanned != nil {
			st.cur = retentionCursor{ConversationID: *lastScanned, Past: true,
				DeletedMessages: st.cur.DeletedMessages, AffectedConversations: st.cur.AffectedConversations}
		}
		return 0, end, nil
	}
	if err := st.lockHeads(ctx, want); err != nil {
		return 0, false, err
	}
	rows, err := st.tx.Query(ctx, retentionBeyondKeepSQL, st.scope.TenantID, st.scope.ProjectID,
		want, afters, skips, caps, st.plan.KeepLast, st.bounds.Bytes)
	if err != nil {
		return 0, false, translate(err)
	}
	var conversations []string
	var sequences []int64
	var candidates int64
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq, &candidates); err != nil {
			rows.Close()
			return 0, false, translate(err)
		}
		conversations, sequences = append(conversations, id), append(sequences, seq)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, false, translate(err)
	}
	if err := st.remove(ctx, conversations, sequences, 0); err != nil {
		return 0, false, err
	}
	examined := int64(len(conversations))
	next := retentionCursor{DeletedMessages: st.cur.DeletedMessages, AffectedConversations: st.cur.AffectedConversations}
	switch {
	case (cut || examined < candidates) && examined > 0:
		// Resume in the conversation examined last.
		last := conversations[examined-1]
		next.ConversationID, next.Sequence = last, sequences[examined-1]
		for _, id := range conversations {
			if id == last {
				next.Skip++
			}
		}
		if last == st.cur.ConversationID && !st.cur.Past {
			next.Skip += st.cur.Skip
		}
	case cut:
		// The conversations given the step's rows had none left to examine.
		next.ConversationID, next.Past = want[len(want)-1], true
	default:
		next.ConversationID, next.Past = *lastScanned, true
	}
	st.cur = next
	return examined, !cut && examined == candidates && end, nil
}

// lockHeads locks the heads of the conversations ids (sorted), unless the run is dry:
// a dry run changes nothing, and its counts and messages are read in one statement.
func (st *retentionStep) lockHeads(ctx context.Context, ids []string) error {
	if st.plan.DryRun {
		return nil
	}
	_, err := st.tx.Exec(ctx, retentionLockSQL, st.scope.TenantID, st.scope.ProjectID, ids)
	return translate(err)
}

// remove deletes (or counts) the candidates the plan selects, with the keep-last floor
// keep (0: none to check, the candidates are beyond it already), adding them to the
// cursor's counts. The caller holds the heads of their conversations (lockHeads).
func (st *retentionStep) remove(ctx context.Context, conversations []string, sequences []int64, keep int64) error {
	if len(conversations) == 0 {
		return nil
	}
	var hits, touched int64
	if err := st.tx.QueryRow(ctx, retentionDeleteSQL, st.scope.TenantID, st.scope.ProjectID, conversations, sequences,
		keep, st.plan.DryRun, st.operationID).Scan(&hits, &touched); err != nil {
		return translate(err)
	}
	st.cur.DeletedMessages += hits
	st.cur.AffectedConversations += touched
	return nil
}

// forget removes up to bounds.Rows of the conversations the run recorded as touched,
// and reports whether none is left.
func (st *retentionStep) forget(ctx context.Context) (bool, error) {
	tag, err := st.tx.Exec(ctx, `
		DELETE FROM retention_touched
		WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3 AND conversation_id = ANY(ARRAY(
		    SELECT conversation_id FROM retention_touched
		    WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3
		    LIMIT $4))`,
		st.scope.TenantID, st.scope.ProjectID, st.operationID, int64(st.bounds.Rows))
	if err != nil {
		return false, translate(err)
	}
	return tag.RowsAffected() < int64(st.bounds.Rows), nil
}

// DueRetentionScopes implements operation.OperationStore. Scopes are found by a loose
// index scan of messages' primary key (one probe per scope, not a scan of every
// message); on Citus by every shard's distinct scopes.
func (s *OperationStore) DueRetentionScopes(ctx context.Context, after *runtime.Scope, sinceMs int64, limit int) ([]runtime.Scope, *runtime.Scope, error) {
	const due = `
		SELECT s.tenant_id, s.project_id, NOT EXISTS (
		    SELECT 1 FROM operations o
		    WHERE o.tenant_id = s.tenant_id AND o.project_id = s.project_id
		      AND o.kind = 'retention' AND o.default_policy AND o.created_at_ms >= $3
		) AND NOT EXISTS (
		    SELECT 1 FROM operations o
		    WHERE o.tenant_id = s.tenant_id AND o.project_id = s.project_id
		      AND o.kind = 'retention' AND o.state IN ('pending', 'running') AND o.default_policy
		)`
	return scopeWalk(ctx, s.db, after, scopeQueries{
		postgres: distinctScopes("messages") + due + ` FROM (SELECT * FROM scopes LIMIT $4) s`,
		citus:    due + ` FROM ` + everyScope("messages", "") + ` s ORDER BY s.tenant_id, s.project_id LIMIT $4`,
	}, sinceMs, limit)
}

// distinctScopes is a recursive CTE "scopes" listing the scopes holding rows of table
// after ($1, $2), in order, by a loose index scan of an index leading with
// (tenant_id, project_id): one probe per scope, not a scan of every row.
func distinctScopes(table string) string {
	t := pgx.Identifier{table}.Sanitize()
	return `
		WITH RECURSIVE scopes AS (
		    (SELECT tenant_id, project_id FROM ` + t + `
		     WHERE (tenant_id, project_id) > ($1::text, $2::text)
		     ORDER BY tenant_id, project_id LIMIT 1)
		    UNION ALL
		    SELECT n.tenant_id, n.project_id FROM scopes p
		    CROSS JOIN LATERAL (
		        SELECT tenant_id, project_id FROM ` + t + `
		        WHERE (tenant_id, project_id) > (p.tenant_id, p.project_id)
		        ORDER BY tenant_id, project_id LIMIT 1) n
		)`
}

// everyScope is a subquery listing the scopes holding rows of table after ($1, $2)
// (and matching cond, unless empty) by a plain DISTINCT: what a walk runs on Citus,
// which runs no recursive CTE over every tenant. Every shard lists its own scopes (a
// scan of its index, not a probe per scope), and a walk's conditions on other tables
// join on the tenant, so Citus pushes the whole walk down to the shards.
func everyScope(table, cond string) string {
	if cond != "" {
		cond += " AND "
	}
	return `(SELECT DISTINCT tenant_id, project_id FROM ` + pgx.Identifier{table}.Sanitize() +
		` WHERE ` + cond + `(tenant_id, project_id) > ($1::text, $2::text))`
}

// scopeQueries is a walk's query on plain Postgres and on Citus.
type scopeQueries struct{ postgres, citus string }

// scheduledScope is a scope a walk examined, and whether it is due.
type scheduledScope struct {
	TenantID  string
	ProjectID string
	Due       bool
}

// scopeWalk runs a query over scopes after after ($1, $2) that returns (tenant,
// project, due) rows in order, the one of queries for the database (plain Postgres or a
// Citus coordinator), and returns the due scopes and the last one examined (nil when
// none was left).
func scopeWalk(ctx context.Context, db DBTX, after *runtime.Scope, queries scopeQueries, args ...any) ([]runtime.Scope, *runtime.Scope, error) {
	citus, err := OnCitus(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	query := queries.postgres
	if citus {
		query = queries.citus
	}
	var afterTenant, afterProject string
	if after != nil {
		afterTenant, afterProject = after.TenantID, after.ProjectID
	}
	rows, err := db.Query(ctx, query, append([]any{afterTenant, afterProject}, args...)...)
	if err != nil {
		return nil, nil, translate(err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[scheduledScope])
	if err != nil {
		return nil, nil, translate(err)
	}
	return dueScopes(found)
}

// dueScopes returns the due scopes of found and the last one (nil when found is
// empty).
func dueScopes(found []scheduledScope) ([]runtime.Scope, *runtime.Scope, error) {
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
