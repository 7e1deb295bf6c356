package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// PushStore keeps push notification configs and their delivery positions in
// a2a_push_configs; they go with their task.
type PushStore struct {
	db DBTX
}

var _ a2a.PushStore = (*PushStore)(nil)

const pushConfigColumns = `task_id, config_id, protocol, url, token, authentication::text, created_by, created_at_ms`

func scanPushConfig(row pgx.Row, extra ...any) (a2a.PushConfig, error) {
	var c a2a.PushConfig
	var auth *string
	if err := row.Scan(append([]any{&c.TaskID, &c.ID, &c.Protocol, &c.URL, &c.Token, &auth, &c.Owner, &c.CreatedAtMs}, extra...)...); err != nil {
		return c, err
	}
	if auth != nil {
		c.Authentication = []byte(*auth)
	}
	return c, nil
}

func pushNotFound() error { return runtime.NotFound("configId", "push notification config") }

// PutPushConfig implements a2a.PushStore with one statement; the caller holds the
// task's lock, so the count of the others cannot change under it. created_by is the
// config's owner: a replacement keeps it.
func (s *PushStore) PutPushConfig(ctx context.Context, scope runtime.Scope, c *a2a.PushConfig, deliveredSeq int64, deliveredState string) (bool, error) {
	var auth *string
	if c.Authentication != nil {
		a := string(c.Authentication)
		auth = &a
	}
	var one int
	err := s.db.QueryRow(ctx, `
		INSERT INTO a2a_push_configs AS p (tenant_id, project_id, task_id, config_id, protocol, url, token,
		    authentication, created_by, created_at_ms, delivered_seq, delivered_state)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8::json, $9, $10, $11, $12
		WHERE (SELECT count(*) FROM a2a_push_configs
		       WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3 AND config_id <> $4) < $13
		ON CONFLICT (tenant_id, project_id, task_id, config_id) DO UPDATE
		    SET protocol = excluded.protocol, url = excluded.url, token = excluded.token,
		        authentication = excluded.authentication
		RETURNING 1`,
		scope.TenantID, scope.ProjectID, c.TaskID, c.ID, c.Protocol, c.URL, c.Token, auth, c.Owner, c.CreatedAtMs,
		deliveredSeq, deliveredState, a2a.MaxPushConfigs).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil
	}
	return false, translate(err)
}

// GetPushConfig implements a2a.PushStore.
func (s *PushStore) GetPushConfig(ctx context.Context, scope runtime.Scope, taskID, configID string) (a2a.PushConfig, error) {
	c, err := scanPushConfig(s.db.QueryRow(ctx, `
		SELECT `+pushConfigColumns+` FROM a2a_push_configs
		WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3 AND config_id = $4`,
		scope.TenantID, scope.ProjectID, taskID, configID))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, pushNotFound()
	}
	return c, translate(err)
}

// ListPushConfigs implements a2a.PushStore (at most a2a.MaxPushConfigs rows).
func (s *PushStore) ListPushConfigs(ctx context.Context, scope runtime.Scope, taskID string) ([]a2a.PushConfig, error) {
	rows, err := s.db.Query(ctx, `
		SELECT `+pushConfigColumns+` FROM a2a_push_configs
		WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3
		ORDER BY created_at_ms, config_id`, scope.TenantID, scope.ProjectID, taskID)
	if err != nil {
		return nil, translate(err)
	}
	out := []a2a.PushConfig{}
	for rows.Next() {
		c, err := scanPushConfig(rows)
		if err != nil {
			rows.Close()
			return nil, translate(err)
		}
		out = append(out, c)
	}
	return out, translate(rows.Err())
}

// DeletePushConfig implements a2a.PushStore.
func (s *PushStore) DeletePushConfig(ctx context.Context, scope runtime.Scope, taskID, configID, owner string) error {
	tag, err := s.db.Exec(ctx, `
		DELETE FROM a2a_push_configs
		WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3 AND config_id = $4 AND created_by = $5`,
		scope.TenantID, scope.ProjectID, taskID, configID, owner)
	if err != nil {
		return translate(err)
	}
	if tag.RowsAffected() == 0 {
		return pushNotFound()
	}
	return nil
}

// PushConfigIDs implements a2a.PushStore.
func (s *PushStore) PushConfigIDs(ctx context.Context, scope runtime.Scope, taskID string) ([]string, error) {
	rows, err := s.db.Query(ctx, `
		SELECT config_id FROM a2a_push_configs
		WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3`, scope.TenantID, scope.ProjectID, taskID)
	if err != nil {
		return nil, translate(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, translate(err)
}

// LeasePush implements a2a.PushStore with one statement: the lease is taken only when
// free (or expired); ok false when another run holds it.
func (s *PushStore) LeasePush(ctx context.Context, scope runtime.Scope, taskID, configID string, nowMs, untilMs int64) (a2a.PushDelivery, bool, error) {
	var d a2a.PushDelivery
	var leased bool
	c, err := scanPushConfig(s.db.QueryRow(ctx, `
		WITH leased AS (
		    UPDATE a2a_push_configs SET lease_until_ms = $6
		    WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3 AND config_id = $4 AND lease_until_ms <= $5
		    RETURNING config_id
		)
		SELECT `+pushConfigColumns+`, delivered_seq, delivered_state, failures, retry_at_ms, retry_owner,
		    EXISTS (SELECT 1 FROM leased)
		FROM a2a_push_configs
		WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3 AND config_id = $4`,
		scope.TenantID, scope.ProjectID, taskID, configID, nowMs, untilMs),
		&d.DeliveredSeq, &d.DeliveredState, &d.Failures, &d.RetryAtMs, &d.RetryOwner, &leased)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, false, pushNotFound()
	}
	d.Config = c
	return d, leased, translate(err)
}

// AdvancePush implements a2a.PushStore.
func (s *PushStore) AdvancePush(ctx context.Context, scope runtime.Scope, taskID, configID string, seq int64, state string) error {
	_, err := s.db.Exec(ctx, `
		UPDATE a2a_push_configs
		SET delivered_seq = $5, delivered_state = $6, failures = 0, retry_at_ms = 0, retry_owner = 0
		WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3 AND config_id = $4 AND delivered_seq < $5`,
		scope.TenantID, scope.ProjectID, taskID, configID, seq, state)
	return translate(err)
}

// FailPush implements a2a.PushStore.
func (s *PushStore) FailPush(ctx context.Context, scope runtime.Scope, taskID, configID string, failures int, retryAtMs, owner int64) error {
	_, err := s.db.Exec(ctx, `
		UPDATE a2a_push_configs SET failures = $5, retry_at_ms = $6, retry_owner = $7
		WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3 AND config_id = $4`,
		scope.TenantID, scope.ProjectID, taskID, configID, failures, retryAtMs, owner)
	return translate(err)
}

// ReleasePush implements a2a.PushStore.
func (s *PushStore) ReleasePush(ctx context.Context, scope runtime.Scope, taskID, configID string) error {
	_, err := s.db.Exec(ctx, `
		UPDATE a2a_push_configs SET lease_until_ms = 0
		WHERE tenant_id = $1 AND project_id = $2 AND task_id = $3 AND config_id = $4`,
		scope.TenantID, scope.ProjectID, taskID, configID)
	return translate(err)
}
