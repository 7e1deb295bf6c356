package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// TaskStore keeps task headers in a2a_tasks and their messages, artifacts and history
// in rows of their own, which go with the task.
type TaskStore struct {
	db DBTX
}

var _ a2a.TaskStore = (*TaskStore)(nil)

// taskHeaderColumns are the columns scanTaskHeader reads, in its order.
const taskHeaderColumns = `t.task_id, t.context_id, t.from_agent, t.to_agent, t.state, t.description,
	t.metadata::text, t.version, t.created_at_ms, t.updated_at_ms`

func scanTaskHeader(row pgx.Row, extra ...any) (contract.Task, error) {
	var t contract.Task
	var metadata *string
	dest := append([]any{&t.ID, &t.ContextID, &t.FromAgent, &t.ToAgent, &t.State, &t.Description, &metadata,
		&t.Version, &t.CreatedAtMs, &t.UpdatedAtMs}, extra...)
	if err := row.Scan(dest...); err != nil {
		return contract.Task{}, err
	}
	t.Metadata = jsonValue(metadata)
	return t, nil
}

// partsJSON is a list of parts as the json column stores it.
func partsJSON(parts []contract.Part) (string, error) {
	if parts == nil {
		parts = []contract.Part{}
	}
	raw, err := json.Marshal(parts)
	return string(raw), err
}

// CreateTask implements a2a.TaskStore with one batch: the header, then its history
// entry and first message only where the header is the one this create inserted
// (its list_seq, taken under the scope's lock, is this create's alone), then the
// stored header's list position and digest. An existing task is read back whole.
//
// The insert is guarded by NOT EXISTS, a read of the last committed rows, before its
// ON CONFLICT: a create runs under the scope's head lock (its event came first), and
// ON CONFLICT alone would wait for a transaction changing the existing task, which
// itself waits for the head to append its event — a deadlock. So a create never
// waits on an existing task's row: a retry of a task that is being changed returns
// the task as last committed (docs/a2a.md, lock order).
func (s *TaskStore) CreateTask(ctx context.Context, scope runtime.Scope, nt *a2a.NewTask) (contract.Task, string, bool, error) {
	t := &nt.Task
	b := &pgx.Batch{}
	b.Queue(`
		INSERT INTO a2a_tasks (tenant_id, project_id, task_id, list_seq, context_id, from_agent, to_agent, state,
		    description, metadata, create_digest, version, message_count, artifact_count, history_count,
		    parts_bytes, created_at_ms, updated_at_ms)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 0, $14, $15, $16, $17
		WHERE NOT EXISTS (SELECT 1 FROM a2a_tasks WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3)
		ON CONFLICT DO NOTHING`,
		scope.TenantID, scope.ProjectID, t.ID, nt.ListSeq, t.ContextID, t.FromAgent, t.ToAgent, t.State,
		t.Description, jsonParam(t.Metadata), nt.CreateDigest, t.Version, len(t.Messages), len(t.History),
		nt.PartsBytes, t.CreatedAtMs, t.UpdatedAtMs)
	ours := `EXISTS (SELECT 1 FROM a2a_tasks WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3 AND list_seq = $4)`
	for i, h := range t.History {
		b.Queue(`
			INSERT INTO a2a_task_history (tenant_id, project_id, task_id, ordinal, from_state, to_state, at_ms, reason, actor)
			SELECT $1, $2, $3, $5, $6, $7, $8, $9, $10 WHERE `+ours,
			scope.TenantID, scope.ProjectID, t.ID, nt.ListSeq, i, h.From, h.To, h.AtMs, h.Reason, h.Actor)
	}
	for i, m := range t.Messages {
		parts, err := partsJSON(m.Parts)
		if err != nil {
			return contract.Task{}, "", false, err
		}
		b.Queue(`
			INSERT INTO a2a_task_messages (tenant_id, project_id, task_id, ordinal, role, from_agent, parts, created_at_ms)
			SELECT $1, $2, $3, $5, $6, $7, $8, $9 WHERE `+ours,
			scope.TenantID, scope.ProjectID, t.ID, nt.ListSeq, i, m.Role, m.FromAgent, parts, m.CreatedAtMs)
	}
	b.Queue(`SELECT list_seq, create_digest FROM a2a_tasks WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3`,
		scope.TenantID, scope.ProjectID, t.ID)
	res := s.db.SendBatch(ctx, b)
	var err error
	for range 1 + len(t.History) + len(t.Messages) {
		if err == nil {
			_, err = res.Exec()
		}
	}
	var seq int64
	var digest string
	if err == nil {
		err = res.QueryRow().Scan(&seq, &digest)
	}
	if cerr := res.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return contract.Task{}, "", false, translate(err)
	}
	if seq == nt.ListSeq {
		return *t, digest, true, nil
	}
	stored, err := getTask(ctx, s.db, scope, t.ID)
	return stored, digest, false, err
}

func queueTransition(b *pgx.Batch, scope runtime.Scope, taskID string, ordinal int, h *contract.TaskTransition) {
	b.Queue(`
		INSERT INTO a2a_task_history (tenant_id, project_id, task_id, ordinal, from_state, to_state, at_ms, reason, actor)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		scope.TenantID, scope.ProjectID, taskID, ordinal, h.From, h.To, h.AtMs, h.Reason, h.Actor)
}

func queueTaskMessage(b *pgx.Batch, scope runtime.Scope, taskID string, ordinal int, m *contract.TaskMessage) error {
	parts, err := partsJSON(m.Parts)
	if err != nil {
		return err
	}
	b.Queue(`
		INSERT INTO a2a_task_messages (tenant_id, project_id, task_id, ordinal, role, from_agent, parts, created_at_ms)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		scope.TenantID, scope.ProjectID, taskID, ordinal, m.Role, m.FromAgent, parts, m.CreatedAtMs)
	return nil
}

// LockTask implements a2a.TaskStore: the header FOR UPDATE and the artifact sizes,
// in one round trip.
func (s *TaskStore) LockTask(ctx context.Context, scope runtime.Scope, taskID string) (a2a.LockedTask, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT `+taskHeaderColumns+`, t.message_count, t.history_count, t.parts_bytes
		FROM a2a_tasks t WHERE t.tenant_id = $1 AND t.project_id = $2 AND t.task_id = $3
		FOR UPDATE`, scope.TenantID, scope.ProjectID, taskID)
	b.Queue(`SELECT artifact_id, parts_bytes FROM a2a_task_artifacts
		WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3`, scope.TenantID, scope.ProjectID, taskID)
	res := s.db.SendBatch(ctx, b)
	defer func() { _ = res.Close() }() // checked below on success; an earlier error is the one reported
	var lt a2a.LockedTask
	var err error
	lt.Task, err = scanTaskHeader(res.QueryRow(), &lt.Messages, &lt.Transitions, &lt.PartsBytes)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return lt, runtime.NotFound("taskId", "task")
		}
		return lt, translate(err)
	}
	rows, err := res.Query()
	if err != nil {
		return lt, translate(err)
	}
	lt.ArtifactBytes = map[string]int64{}
	var id string
	var size int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &size}, func() error {
		lt.ArtifactBytes[id] = size
		return nil
	}); err != nil {
		return lt, translate(err)
	}
	return lt, translate(res.Close())
}

// UpdateTask implements a2a.TaskStore: one batch writes the header, the history
// entry, the message and the artifacts (an artifact ID the task holds is replaced in
// place, keeping its position).
func (s *TaskStore) UpdateTask(ctx context.Context, scope runtime.Scope, c *a2a.TaskChange) error {
	b := &pgx.Batch{}
	b.Queue(`
		UPDATE a2a_tasks SET state = $4, version = $5, updated_at_ms = $6, terminal_at_ms = $7, message_count = $8,
		    artifact_count = $9, history_count = $10, parts_bytes = $11
		WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3`,
		scope.TenantID, scope.ProjectID, c.TaskID, c.State, c.Version, c.UpdatedAtMs, c.TerminalAtMs, c.Messages,
		c.ArtifactCount, c.Transitions, c.PartsBytes)
	if c.Transition != nil {
		queueTransition(b, scope, c.TaskID, c.Transitions-1, c.Transition)
	}
	if c.Message != nil {
		if err := queueTaskMessage(b, scope, c.TaskID, c.Messages-1, c.Message); err != nil {
			return err
		}
	}
	if len(c.Artifacts) > 0 {
		ids, names, parts := make([]string, len(c.Artifacts)), make([]*string, len(c.Artifacts)), make([]string, len(c.Artifacts))
		for i, art := range c.Artifacts {
			raw, err := partsJSON(art.Parts)
			if err != nil {
				return err
			}
			ids[i], names[i], parts[i] = art.ArtifactID, art.Name, raw
		}
		b.Queue(`
			INSERT INTO a2a_task_artifacts AS a (tenant_id, project_id, task_id, artifact_id, ordinal, name, parts, parts_bytes)
			SELECT $1, $2, $3, u.id, coalesce((SELECT max(ordinal) FROM a2a_task_artifacts
			        WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3), -1) + u.n,
			    u.name, u.parts::json, u.size
			FROM unnest($4::text[], $5::text[], $6::text[], $7::bigint[]) WITH ORDINALITY AS u(id, name, parts, size, n)
			ON CONFLICT (tenant_id, project_id, task_id, artifact_id) DO UPDATE
			SET name = excluded.name, parts = excluded.parts, parts_bytes = excluded.parts_bytes`,
			scope.TenantID, scope.ProjectID, c.TaskID, ids, names, parts, c.ArtifactBytes)
	}
	return translate(s.db.SendBatch(ctx, b).Close())
}

// GetTask implements a2a.TaskStore.
func (s *TaskStore) GetTask(ctx context.Context, scope runtime.Scope, taskID string) (contract.Task, error) {
	return getTask(ctx, s.db, scope, taskID)
}

// getTask reads a task with one statement, so the header and its children come from
// one snapshot; each kind of child is aggregated into a JSON array in its order.
func getTask(ctx context.Context, db DBTX, scope runtime.Scope, taskID string) (contract.Task, error) {
	var messages, artifacts, history string
	t, err := scanTaskHeader(db.QueryRow(ctx, `
		SELECT `+taskHeaderColumns+`,
		    (SELECT coalesce(json_agg(json_build_object('role', role, 'fromAgent', from_agent, 'parts', parts,
		            'createdAtMs', created_at_ms) ORDER BY ordinal), '[]')::text
		     FROM a2a_task_messages WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3),
		    (SELECT coalesce(json_agg(json_build_object('artifactId', artifact_id, 'name', name, 'parts', parts)
		            ORDER BY ordinal), '[]')::text
		     FROM a2a_task_artifacts WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3),
		    (SELECT coalesce(json_agg(json_build_object('from', from_state, 'to', to_state, 'atMs', at_ms,
		            'reason', reason, 'actor', actor) ORDER BY ordinal), '[]')::text
		     FROM a2a_task_history WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3)
		FROM a2a_tasks t WHERE t.tenant_id = $1 AND t.project_id = $2 AND t.task_id = $3`,
		scope.TenantID, scope.ProjectID, taskID), &messages, &artifacts, &history)
	if errors.Is(err, pgx.ErrNoRows) {
		return contract.Task{}, runtime.NotFound("taskId", "task")
	}
	if err != nil {
		return contract.Task{}, translate(err)
	}
	for _, part := range []struct {
		raw string
		dst any
	}{{messages, &t.Messages}, {artifacts, &t.Artifacts}, {history, &t.History}} {
		if err := json.Unmarshal([]byte(part.raw), part.dst); err != nil {
			return contract.Task{}, fmt.Errorf("task %q: decode its stored children: %w", taskID, err)
		}
	}
	return t, nil
}

// ListTasks implements a2a.TaskStore. A list of either role merges the two index
// ranges (created by, addressed to) instead of scanning the scope.
func (s *TaskStore) ListTasks(ctx context.Context, scope runtime.Scope, q a2a.TaskQuery) ([]contract.Task, int64, bool, error) {
	args := []any{scope.TenantID, scope.ProjectID, q.Limit + 1}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	filter := ""
	if len(q.States) > 0 {
		filter += " AND t.state = ANY (" + arg(q.States) + "::text[])"
	}
	order := "t.list_seq DESC"
	if !q.Newest {
		order = "t.list_seq"
		filter += " AND t.list_seq > " + arg(q.After)
	}
	rangeOf := func(who string) string {
		return `(SELECT ` + taskHeaderColumns + `, t.list_seq FROM a2a_tasks t
			WHERE t.tenant_id = $1 AND t.project_id = $2` + who + filter + `
			ORDER BY ` + order + ` LIMIT $3)`
	}
	var sql string
	switch {
	case q.All:
		sql = rangeOf("")
	case q.Role == contract.TaskListFrom:
		sql = rangeOf(" AND t.from_agent = " + arg(q.Agent))
	case q.Role == contract.TaskListTo:
		sql = rangeOf(" AND t.to_agent = " + arg(q.Agent))
	default:
		agent := arg(q.Agent)
		sql = `SELECT * FROM (` + rangeOf(" AND t.from_agent = "+agent) + ` UNION ALL ` +
			rangeOf(" AND t.to_agent = "+agent) + `) t ORDER BY ` + order + ` LIMIT $3`
	}
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, 0, false, translate(err)
	}
	defer rows.Close()
	var tasks []contract.Task
	var last, seq int64
	for rows.Next() {
		t, err := scanTaskHeader(rows, &seq)
		if err != nil {
			return nil, 0, false, translate(err)
		}
		if len(tasks) == q.Limit {
			return tasks, last, true, nil
		}
		tasks, last = append(tasks, t), seq
	}
	return tasks, last, false, translate(rows.Err())
}

// CountTasks implements a2a.TaskStore with one statement over the two index
// ranges of the agent.
func (s *TaskStore) CountTasks(ctx context.Context, scope runtime.Scope, agent string) (a2a.TaskCounts, error) {
	rows, err := s.db.Query(ctx, `
		SELECT state, count(*), count(*) FILTER (WHERE to_agent = $3 AND terminal_at_ms IS NULL)
		FROM a2a_tasks
		WHERE tenant_id = $1 AND project_id = $2 AND (from_agent = $3 OR to_agent = $3)
		GROUP BY state`, scope.TenantID, scope.ProjectID, agent)
	if err != nil {
		return a2a.TaskCounts{}, translate(err)
	}
	counts := a2a.TaskCounts{ByState: map[string]int64{}}
	var state string
	var n, pending int64
	if _, err := pgx.ForEachRow(rows, []any{&state, &n, &pending}, func() error {
		counts.ByState[state] = n
		counts.Pending += pending
		return nil
	}); err != nil {
		return a2a.TaskCounts{}, translate(err)
	}
	return counts, nil
}

// PurgeTerminalTasks implements a2a.TaskStore; the children go by cascade.
func (s *TaskStore) PurgeTerminalTasks(ctx context.Context, scope runtime.Scope, beforeMs int64, limit int) (int, error) {
	return purgeOldest(ctx, s.db, "a2a_tasks", "task_id", "terminal_at_ms", scope, beforeMs, limit)
}

// LastTaskEvent implements a2a.TaskStore by the task index of the event log.
func (s *TaskStore) LastTaskEvent(ctx context.Context, scope runtime.Scope, taskID string) (int64, error) {
	var last int64
	err := s.db.QueryRow(ctx, `
		SELECT coalesce(max(seq), 0) FROM a2a_events
		WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3`,
		scope.TenantID, scope.ProjectID, taskID).Scan(&last)
	return last, translate(err)
}

// TaskEvents implements a2a.TaskStore by the task index of the event log.
func (s *TaskStore) TaskEvents(ctx context.Context, scope runtime.Scope, taskID string, after int64, limit int) ([]contract.Event, error) {
	rows, err := s.db.Query(ctx, `
		SELECT `+loggedEventColumns+`
		FROM a2a_events
		WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3 AND seq > $4
		ORDER BY seq
		LIMIT $5`,
		scope.TenantID, scope.ProjectID, taskID, after, limit)
	if err != nil {
		return nil, translate(err)
	}
	logged, err := collectLoggedEvents(rows)
	if err != nil {
		return nil, err
	}
	events := make([]contract.Event, len(logged))
	for i := range logged {
		events[i] = logged[i].Event
	}
	return events, nil
}

// TaskMessage implements a2a.TaskStore by the messages' primary key.
func (s *TaskStore) TaskMessage(ctx context.Context, scope runtime.Scope, taskID string, index int) (contract.TaskMessage, error) {
	var m contract.TaskMessage
	var parts string
	err := s.db.QueryRow(ctx, `
		SELECT role, from_agent, parts::text, created_at_ms FROM a2a_task_messages
		WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3 AND ordinal = $4`,
		scope.TenantID, scope.ProjectID, taskID, index).Scan(&m.Role, &m.FromAgent, &parts, &m.CreatedAtMs)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, runtime.NotFound("taskId", "task message")
	}
	if err != nil {
		return m, translate(err)
	}
	if err := json.Unmarshal([]byte(parts), &m.Parts); err != nil {
		return m, fmt.Errorf("task %q: decode message %d: %w", taskID, index, err)
	}
	return m, nil
}
