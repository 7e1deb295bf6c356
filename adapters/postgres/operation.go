package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
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
}

// sizeExpr is the stored size of t's large columns in a row, read from the values'
// headers (pg_column_size never fetches or decompresses a TOASTed value).
func (t conversationTable) sizeExpr() string {
	terms := make([]string, len(t.Size))
	for i, c := range t.Size {
		terms[i] = "coalesce(pg_column_size(" + pgx.Identifier{c}.Sanitize() + "), 0)"
	}
	return "(" + strings.Join(terms, " + ") + ")::bigint"
}

// conversationTables lists every table holding rows of a conversation, in the order
// physical deletion empties them (a table whose rows other tables reference by a
// foreign key comes after those tables, unless the reference cascades). A migration
// that creates such a table adds it here: the deletion job then removes its rows, and
// the test that scans every column of every table after a deletion proves it.
var conversationTables = []conversationTable{
	{Name: "messages", Column: "conversation_id", Size: []string{"content", "metadata", "search"}},
	// Windows go last: deleting one cascades to the derivations that name it from
	// another conversation (a derivation's conversation_id is its target's).
	{Name: "window_derivations", Column: "conversation_id", Size: []string{"metadata"}},
	{Name: "model_invocations", Column: "conversation_id", Size: []string{"response_content", "error", "metadata"}},
	{Name: "context_window_items", Column: "conversation_id", Size: []string{"content", "knowledge_evidence", "metadata"}},
	{Name: "context_windows", Column: "conversation_id", Size: []string{"metadata"}},
}

// OperationStore keeps operations and enqueues their jobs on River in the same
// transaction, so a job exists exactly when its operation (and, for a deletion, the
// tombstone) does.
type OperationStore struct {
	db *DB
	// queue only inserts jobs; Jobs works them.
	queue *river.Client[pgx.Tx]
}

var _ runtime.OperationStore = (*OperationStore)(nil)

// NewOperationStore returns the operation store on db.
func NewOperationStore(db *DB, log *slog.Logger) (*OperationStore, error) {
	queue, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("create the job queue client: %w", err)
	}
	return &OperationStore{db: db, queue: queue}, nil
}

// operationArgs are the arguments of an operation's job: IDs only.
type operationArgs struct {
	TenantID    string `json:"tenantId"`
	ProjectID   string `json:"projectId"`
	OperationID string `json:"operationId"`
}

// Kind names the job kind in River.
func (operationArgs) Kind() string { return "agent_context_operation" }

// InsertOpts leaves River attempts beyond the operation's own: a job whose worker died
// in its last attempt is rescued for another run instead of being discarded by River's
// rescuer, which would leave the operation running forever.
func (operationArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: operationMaxAttempts + operationRescueAttempts}
}

// operationMaxAttempts is how often an operation's job may fail before its operation is
// marked failed. River's backoff (attempt⁴ seconds) spreads ten attempts over about
// four hours, so a database outage of that length does not fail the operation.
const operationMaxAttempts = 10

// operationRescueAttempts is how many more runs River allows, for jobs rescued after a
// crash once the failures used up operationMaxAttempts.
const operationRescueAttempts = 15

// inTx runs fn in a transaction that River can enqueue in.
func (s *OperationStore) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.db.Pool.Begin(ctx)
	if err != nil {
		return translate(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	return translate(tx.Commit(ctx))
}

const operationColumns = `operation_id, kind, state, created_at_ms, updated_at_ms, started_at_ms,
	completed_at_ms, progress_done, progress_total, request, result, error_code, error_message`

func scanOperation(row pgx.Row) (contract.Operation, error) {
	var op contract.Operation
	var request, result []byte
	var code, message *string
	err := row.Scan(&op.ID, &op.Kind, &op.State, &op.CreatedAtMs, &op.UpdatedAtMs, &op.StartedAtMs,
		&op.CompletedAtMs, &op.Progress.Done, &op.Progress.Total, &request, &result, &code, &message)
	if errors.Is(err, pgx.ErrNoRows) {
		return contract.Operation{}, runtime.NotFound("operationId", "operation")
	}
	if err != nil {
		return contract.Operation{}, translate(err)
	}
	op.Request = request
	op.Result = result
	if code != nil && message != nil {
		op.Error = &contract.OperationError{Code: *code, Message: *message}
	}
	return op, nil
}

// insertOperation stores a pending operation and enqueues its job.
func (s *OperationStore) insertOperation(ctx context.Context, tx pgx.Tx, scope runtime.Scope, op contract.Operation, conversationID *string, defaultPolicy, dryRun bool) error {
	if _, err := tx.Exec(ctx, `
		INSERT INTO operations (tenant_id, project_id, operation_id, kind, state, conversation_id, request,
		                        default_policy, dry_run, created_at_ms, updated_at_ms)
		VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8, $9, $9)`,
		scope.TenantID, scope.ProjectID, op.ID, op.Kind, conversationID, []byte(op.Request),
		defaultPolicy, dryRun, op.CreatedAtMs); err != nil {
		return translate(err)
	}
	if _, err := s.queue.InsertTx(ctx, tx, operationArgs{TenantID: scope.TenantID, ProjectID: scope.ProjectID, OperationID: op.ID}, nil); err != nil {
		return translate(err)
	}
	return nil
}

// DeleteConversation implements runtime.OperationStore. The head row is locked like an
// appender locks it, so the tombstone commits either before an append (which then
// sees it) or after (and the deletion removes what the append wrote).
func (s *OperationStore) DeleteConversation(ctx context.Context, scope runtime.Scope, conversationID string, op contract.Operation) (contract.Operation, bool, error) {
	var stored contract.Operation
	var created bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO conversations (tenant_id, project_id, conversation_id, created_at_ms)
			VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
			scope.TenantID, scope.ProjectID, conversationID, op.CreatedAtMs); err != nil {
			return translate(err)
		}
		if _, err := tx.Exec(ctx, `
			SELECT 1 FROM conversations
			WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = $3 FOR UPDATE`,
			scope.TenantID, scope.ProjectID, conversationID); err != nil {
			return translate(err)
		}
		existing, err := scanOperation(tx.QueryRow(ctx, `
			SELECT `+operationColumns+` FROM operations
			WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = $3 AND kind = 'conversation_delete'`,
			scope.TenantID, scope.ProjectID, conversationID))
		if err == nil {
			stored = existing
			return nil
		}
		if runtime.ErrorCode(err) != contract.CodeNotFound {
			return err
		}
		if _, err := tx.Exec(ctx, `
			UPDATE conversations SET deleted_at_ms = coalesce(deleted_at_ms, $4)
			WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = $3`,
			scope.TenantID, scope.ProjectID, conversationID, op.CreatedAtMs); err != nil {
			return translate(err)
		}
		if err := s.insertOperation(ctx, tx, scope, op, &conversationID, false, false); err != nil {
			return err
		}
		stored, created = op, true
		return nil
	})
	if err != nil {
		return contract.Operation{}, false, err
	}
	return stored, created, nil
}

// CreateRetention implements runtime.OperationStore.
func (s *OperationStore) CreateRetention(ctx context.Context, scope runtime.Scope, op contract.Operation, req contract.RetentionRequest) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		return s.insertOperation(ctx, tx, scope, op, nil, false, req.DryRun)
	})
}

// Operation implements runtime.OperationStore.
func (s *OperationStore) Operation(ctx context.Context, scope runtime.Scope, id string) (contract.Operation, error) {
	return scanOperation(s.db.Pool.QueryRow(ctx, `
		SELECT `+operationColumns+` FROM operations
		WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3`,
		scope.TenantID, scope.ProjectID, id))
}

// MaintenanceCounts implements runtime.OperationStore.
func (s *OperationStore) MaintenanceCounts(ctx context.Context, scope runtime.Scope, failedSinceMs int64) (contract.OperationCounts, *int64, error) {
	var c contract.OperationCounts
	var lastRun *int64
	err := s.db.Pool.QueryRow(ctx, `
		SELECT
			(SELECT count(*) FROM operations WHERE tenant_id = $1 AND project_id = $2 AND state = 'pending'),
			(SELECT count(*) FROM operations WHERE tenant_id = $1 AND project_id = $2 AND state = 'running'),
			(SELECT count(*) FROM operations WHERE tenant_id = $1 AND project_id = $2 AND state = 'failed'
			                                   AND completed_at_ms >= $3),
			(SELECT max(completed_at_ms) FROM operations
			 WHERE tenant_id = $1 AND project_id = $2
			   AND kind = 'retention' AND state = 'succeeded' AND NOT dry_run)`,
		scope.TenantID, scope.ProjectID, failedSinceMs).Scan(&c.Pending, &c.Running, &c.FailedLast24h, &lastRun)
	if err != nil {
		return contract.OperationCounts{}, nil, translate(err)
	}
	return c, lastRun, nil
}

// StartOperation implements runtime.OperationStore.
func (s *OperationStore) StartOperation(ctx context.Context, scope runtime.Scope, id string, nowMs int64) (contract.Operation, error) {
	op, err := scanOperation(s.db.Pool.QueryRow(ctx, `
		UPDATE operations
		SET state = 'running', started_at_ms = coalesce(started_at_ms, $4), updated_at_ms = $4
		WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3 AND state IN ('pending', 'running')
		RETURNING `+operationColumns,
		scope.TenantID, scope.ProjectID, id, nowMs))
	if runtime.ErrorCode(err) == contract.CodeNotFound {
		return s.Operation(ctx, scope, id)
	}
	return op, err
}

// FailOperation implements runtime.OperationStore.
func (s *OperationStore) FailOperation(ctx context.Context, scope runtime.Scope, id string, opErr contract.OperationError, nowMs int64) error {
	_, err := s.db.Pool.Exec(ctx, `
		UPDATE operations
		SET state = 'failed', error_code = $4, error_message = $5, updated_at_ms = $6, completed_at_ms = $6
		WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3 AND state IN ('pending', 'running')`,
		scope.TenantID, scope.ProjectID, id, opErr.Code, opErr.Message, nowMs)
	return translate(err)
}

// lockRunning locks the operation's row for one step and reports whether it is still
// running. The lock serializes steps of the same operation, should the queue ever run
// its job twice at once (a job rescued while its first worker still ran).
func lockRunning(ctx context.Context, tx pgx.Tx, scope runtime.Scope, id string, cursor any) (bool, *int64, error) {
	var state string
	var total *int64
	var raw []byte
	err := tx.QueryRow(ctx, `
		SELECT state, progress_total, cursor FROM operations
		WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3 FOR UPDATE`,
		scope.TenantID, scope.ProjectID, id).Scan(&state, &total, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, translate(err)
	}
	if cursor != nil && raw != nil {
		if err := json.Unmarshal(raw, cursor); err != nil {
			return false, nil, fmt.Errorf("decode the cursor of operation %s: %w", id, err)
		}
	}
	return state == contract.OperationRunning, total, nil
}

// DeleteConversationStep implements runtime.OperationStore. Rows are picked by ctid so
// one statement serves every table whatever its key; a batch runs table by table in
// the order of conversationTables, each statement taking rows while the bytes of those
// before it stay under what is left of the budget. The total is counted on the first
// step: after the tombstone no row of the conversation can be added, so it stays exact.
func (s *OperationStore) DeleteConversationStep(ctx context.Context, scope runtime.Scope, operationID, conversationID string, bounds runtime.StepBounds, nowMs int64) (bool, error) {
	var done bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		running, total, err := lockRunning(ctx, tx, scope, operationID, nil)
		if err != nil || !running {
			done = err == nil
			return err
		}
		if total == nil {
			var n int64
			for _, t := range conversationTables {
				var c int64
				if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s WHERE tenant_id = $1 AND project_id = $2 AND %s = $3`,
					pgx.Identifier{t.Name}.Sanitize(), pgx.Identifier{t.Column}.Sanitize()),
					scope.TenantID, scope.ProjectID, conversationID).Scan(&c); err != nil {
					return translate(err)
				}
				n += c
			}
			total = &n
		}
		var deleted, bytes int64
		for _, t := range conversationTables {
			if deleted >= int64(bounds.Rows) || bytes >= bounds.Bytes {
				break
			}
			var rows, size int64
			if err := tx.QueryRow(ctx, fmt.Sprintf(`
				WITH picked AS (
				    SELECT ctid, %[3]s AS size FROM %[1]s
				    WHERE tenant_id = $1 AND project_id = $2 AND %[2]s = $3
				    LIMIT $4
				), bounded AS (
				    SELECT ctid FROM (
				        SELECT ctid, sum(size) OVER (ORDER BY ctid ROWS UNBOUNDED PRECEDING) - size AS before
				        FROM picked
				    ) p
				    WHERE before < $5
				), gone AS (
				    DELETE FROM %[1]s WHERE ctid = ANY(ARRAY(SELECT ctid FROM bounded))
				    RETURNING %[3]s AS size
				)
				SELECT count(*), coalesce(sum(size), 0)::bigint FROM gone`,
				pgx.Identifier{t.Name}.Sanitize(), pgx.Identifier{t.Column}.Sanitize(), t.sizeExpr()),
				scope.TenantID, scope.ProjectID, conversationID, int64(bounds.Rows)-deleted, bounds.Bytes-bytes).
				Scan(&rows, &size); err != nil {
				return translate(err)
			}
			deleted += rows
			bytes += size
		}
		if deleted > 0 {
			_, err := tx.Exec(ctx, `
				UPDATE operations SET progress_done = progress_done + $4, progress_total = $5, updated_at_ms = $6
				WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3`,
				scope.TenantID, scope.ProjectID, operationID, deleted, *total, nowMs)
			return translate(err)
		}
		// Nothing was left: done. The total becomes what was deleted, which it equals
		// unless a row changed under a concurrent writer the tombstone did not stop.
		_, err = tx.Exec(ctx, `
			UPDATE operations
			SET state = 'succeeded', progress_total = progress_done, updated_at_ms = $4, completed_at_ms = $4,
			    result = jsonb_build_object('deletedRecords', progress_done)
			WHERE tenant_id = $1 AND project_id = $2 AND operation_id = $3`,
			scope.TenantID, scope.ProjectID, operationID, nowMs)
		done = err == nil
		return translate(err)
	})
	return done, err
}

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

// The window filters of retentionStepSQL; $3 is the conversation of a run confined to
// one.
var (
	retentionScopeWide       = fmt.Sprintf(retentionStepSQL, `$3::text IS NULL AND (conversation_id, sequence) > ($4::text, $5::bigint)`)
	retentionOneConversation = fmt.Sprintf(retentionStepSQL, `conversation_id = $3::text AND $4::text IS NOT NULL AND sequence > $5::bigint`)
)

// RetentionStep implements runtime.OperationStore.
func (s *OperationStore) RetentionStep(ctx context.Context, scope runtime.Scope, operationID string, plan runtime.RetentionPlan, bounds runtime.StepBounds, nowMs int64) (bool, error) {
	var done bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var cur retentionCursor
		running, _, err := lockRunning(ctx, tx, scope, operationID, &cur)
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

// ScheduleRetention implements runtime.OperationStore. Scopes are found by a loose
// index scan of messages' primary key (one probe per scope, not a scan of every
// message).
func (s *OperationStore) ScheduleRetention(ctx context.Context, req contract.RetentionRequest, after *runtime.Scope, sinceMs, nowMs int64, limit int) (*runtime.Scope, error) {
	var last *runtime.Scope
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var afterTenant, afterProject string
		if after != nil {
			afterTenant, afterProject = after.TenantID, after.ProjectID
		}
		rows, err := tx.Query(ctx, `
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
			return translate(err)
		}
		found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[scheduledScope])
		if err != nil {
			return translate(err)
		}
		var due []runtime.Scope
		for _, f := range found {
			sc := runtime.Scope{TenantID: f.TenantID, ProjectID: f.ProjectID}
			last = &sc
			if f.Due {
				due = append(due, sc)
			}
		}
		if len(due) == 0 {
			return nil
		}
		return s.insertDefaultRetention(ctx, tx, due, req, nowMs)
	})
	if err != nil {
		return nil, err
	}
	return last, nil
}

// scheduledScope is a scope ScheduleRetention examined, and whether it is due.
type scheduledScope struct {
	TenantID  string
	ProjectID string
	Due       bool
}

// insertDefaultRetention creates one default-policy retention operation per scope,
// with its job, in two statements.
func (s *OperationStore) insertDefaultRetention(ctx context.Context, tx pgx.Tx, scopes []runtime.Scope, req contract.RetentionRequest, nowMs int64) error {
	request, err := json.Marshal(req)
	if err != nil {
		return err
	}
	tenants := make([]string, len(scopes))
	projects := make([]string, len(scopes))
	ids := make([]string, len(scopes))
	jobs := make([]river.InsertManyParams, len(scopes))
	for i, sc := range scopes {
		tenants[i], projects[i], ids[i] = sc.TenantID, sc.ProjectID, runtime.NewOperationID()
		jobs[i] = river.InsertManyParams{Args: operationArgs{TenantID: sc.TenantID, ProjectID: sc.ProjectID, OperationID: ids[i]}}
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO operations (tenant_id, project_id, operation_id, kind, state, request,
		                        default_policy, created_at_ms, updated_at_ms)
		SELECT t, p, id, 'retention', 'pending', $4, true, $5, $5
		FROM unnest($1::text[], $2::text[], $3::text[]) AS u(t, p, id)`,
		tenants, projects, ids, request, nowMs); err != nil {
		return translate(err)
	}
	if _, err := s.queue.InsertManyTx(ctx, tx, jobs); err != nil {
		return translate(err)
	}
	return nil
}
