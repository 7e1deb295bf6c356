package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/session"
)

// SessionStore keeps the console's sessions in Postgres, so that any replica serves
// a session another replica started.
type SessionStore struct{ db DBTX }

var _ session.Store = (*SessionStore)(nil)

// Sessions is the console session store over the pool.
func (db *DB) Sessions() *SessionStore { return &SessionStore{db: db.Pool} }

// CreateSession implements session.Store. The principal's advisory lock makes
// concurrent sign-ins of one principal take turns, so each counts the other's session;
// the insert and the deletion of the oldest are one statement, whose deletion does not
// see the row it inserts: it keeps keep-1 of the others, newest first, a range of
// console_sessions_by_principal.
func (s *SessionStore) CreateSession(ctx context.Context, rec session.Record, keep int) error {
	return translate(pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('agent-context.console_sessions'),
			hashtext($1 || E'\x1f' || $2 || E'\x1f' || $3))`,
			rec.Scope.TenantID, rec.Scope.ProjectID, rec.Subject); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
		WITH created AS (
			INSERT INTO console_sessions (id_hash, tenant_id, project_id, subject, capabilities, csrf_token,
				created_at, expires_at, token_fingerprint)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		)
		DELETE FROM console_sessions WHERE id_hash IN (
			SELECT id_hash FROM console_sessions
			WHERE tenant_id = $2 AND project_id = $3 AND subject = $4 AND expires_at > $7
			ORDER BY created_at DESC, id_hash DESC OFFSET $10)`,
			rec.IDHash, rec.Scope.TenantID, rec.Scope.ProjectID, rec.Subject, rec.Capabilities, rec.CSRFToken,
			rec.CreatedAt, rec.ExpiresAt, rec.TokenFingerprint, max(keep-1, 0))
		return err
	}))
}

// SessionByHash implements session.Store.
func (s *SessionStore) SessionByHash(ctx context.Context, idHash []byte, now time.Time) (session.Record, error) {
	rec := session.Record{IDHash: idHash}
	err := s.db.QueryRow(ctx, `
	SELECT tenant_id, project_id, subject, capabilities, csrf_token, created_at, expires_at, token_fingerprint
	FROM console_sessions WHERE id_hash = $1 AND expires_at > $2`, idHash, now).
		Scan(&rec.Scope.TenantID, &rec.Scope.ProjectID, &rec.Subject, &rec.Capabilities, &rec.CSRFToken,
			&rec.CreatedAt, &rec.ExpiresAt, &rec.TokenFingerprint)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.Record{}, runtime.NotFound("session", "session")
	}
	return rec, translate(err)
}

// DeleteSession implements session.Store.
func (s *SessionStore) DeleteSession(ctx context.Context, idHash []byte) error {
	_, err := s.db.Exec(ctx, `DELETE FROM console_sessions WHERE id_hash = $1`, idHash)
	return translate(err)
}

// PurgeExpiredSessions implements session.Store. The batch is picked in a total order:
// on Citus the table is a reference table, and every node's copy deletes the same rows.
func (s *SessionStore) PurgeExpiredSessions(ctx context.Context, now time.Time, limit int) (int, error) {
	tag, err := s.db.Exec(ctx, `
	DELETE FROM console_sessions WHERE id_hash IN (
		SELECT id_hash FROM console_sessions WHERE expires_at <= $1 ORDER BY expires_at, id_hash LIMIT $2)`, now, limit)
	return int(tag.RowsAffected()), translate(err)
}
