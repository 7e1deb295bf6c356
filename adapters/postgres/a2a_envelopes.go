package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// EnvelopeStore keeps the envelopes POST /handoff accepted in a2a_envelopes.
type EnvelopeStore struct {
	db DBTX
}

var _ a2a.EnvelopeStore = (*EnvelopeStore)(nil)

const envelopeColumns = `message_id, correlation_id, from_agent, to_agent, content_type, digest, payload,
	accepted_at_ms, expires_at_ms`

func scanEnvelope(row pgx.Row) (a2a.EnvelopeRecord, error) {
	var e a2a.EnvelopeRecord
	var payload []byte
	err := row.Scan(&e.MessageID, &e.CorrelationID, &e.From, &e.To, &e.ContentType, &e.Digest, &payload,
		&e.AcceptedAtMs, &e.ExpiresAtMs)
	e.Payload = payload
	return e, err
}

// CreateEnvelope implements a2a.EnvelopeStore. ON CONFLICT DO NOTHING waits for a
// concurrent insert of the same ID to commit or roll back, and the lookup that follows
// a conflict sees the row that won.
func (s *EnvelopeStore) CreateEnvelope(ctx context.Context, scope runtime.Scope, e *a2a.EnvelopeRecord) (a2a.EnvelopeRecord, bool, error) {
	// As []byte, a nil payload is SQL NULL (a nil json.RawMessage would be JSON null).
	payload := []byte(e.Payload)
	tag, err := s.db.Exec(ctx, `
		INSERT INTO a2a_envelopes (tenant_id, project_id, `+envelopeColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT DO NOTHING`,
		scope.TenantID, scope.ProjectID, e.MessageID, e.CorrelationID, e.From, e.To, e.ContentType, e.Digest,
		payload, e.AcceptedAtMs, e.ExpiresAtMs)
	if err != nil {
		return a2a.EnvelopeRecord{}, false, translate(err)
	}
	if tag.RowsAffected() == 1 {
		return *e, true, nil
	}
	stored, err := s.GetEnvelope(ctx, scope, e.MessageID)
	return stored, false, err
}

// GetEnvelope implements a2a.EnvelopeStore.
func (s *EnvelopeStore) GetEnvelope(ctx context.Context, scope runtime.Scope, messageID string) (a2a.EnvelopeRecord, error) {
	e, err := scanEnvelope(s.db.QueryRow(ctx, `SELECT `+envelopeColumns+` FROM a2a_envelopes
		WHERE tenant_id = $1 AND project_id = $2 AND message_id = $3`, scope.TenantID, scope.ProjectID, messageID))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, runtime.NotFound("message_id", "envelope")
	}
	if err != nil {
		return e, translate(err)
	}
	return e, nil
}

// PurgeEnvelopes implements a2a.EnvelopeStore, by the expiry index.
func (s *EnvelopeStore) PurgeEnvelopes(ctx context.Context, scope runtime.Scope, expiredBeforeMs, acceptedBeforeMs int64, limit int) (int, error) {
	tag, err := s.db.Exec(ctx, `
		DELETE FROM a2a_envelopes e
		USING (SELECT message_id FROM a2a_envelopes
		       WHERE tenant_id = $1 AND project_id = $2 AND expires_at_ms < $3 AND accepted_at_ms < $4
		       ORDER BY expires_at_ms LIMIT $5) d
		WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.message_id = d.message_id`,
		scope.TenantID, scope.ProjectID, expiredBeforeMs, acceptedBeforeMs, limit)
	if err != nil {
		return 0, translate(err)
	}
	return int(tag.RowsAffected()), nil
}
