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

// CreateSession implements session.Store.
func (s *SessionStore) CreateSession(ctx context.Context, rec session.Record) error {
	_, err := s.db.Exec(ctx, `
	INSERT INTO console_sessions (id_hash, tenant_id, project_id, subject, capabilities, csrf_token, created_at, expires_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		rec.IDHash, rec.Scope.TenantID, rec.Scope.ProjectID, rec.Subject, rec.Capabilities, rec.CSRFToken,
		rec.CreatedAt, rec.ExpiresAt)
	return translate(err)
}

// SessionByHash implements session.Store.
func (s *SessionStore) SessionByHash(ctx context.Context, idHash []byte, now time.Time) (session.Record, error) {
	rec := session.Record{IDHash: idHash}
	err := s.db.QueryRow(ctx, `
	SELECT tenant_id, project_id, subject, capabilities, csrf_token, created_at, expires_at
	FROM console_sessions WHERE id_hash = $1 AND expires_at > $2`, idHash, now).
		Scan(&rec.Scope.TenantID, &rec.Scope.ProjectID, &rec.Subject, &rec.Capabilities, &rec.CSRFToken,
			&rec.CreatedAt, &rec.ExpiresAt)
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

// PurgeExpiredSessions implements session.Store.
func (s *SessionStore) PurgeExpiredSessions(ctx context.Context, now time.Time, limit int) error {
	_, err := s.db.Exec(ctx, `
	DELETE FROM console_sessions WHERE id_hash IN (
		SELECT id_hash FROM console_sessions WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2)`, now, limit)
	return translate(err)
}
