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
// a conflict sees the row that won. A stored payload is added to the scope's totals
// (a2a_envelope_payloads, whose row lock serializes the scope's stores until the
// transaction ends), and the oldest payloads are dropped while the scope is over its
// bounds.
func (s *EnvelopeStore) CreateEnvelope(ctx context.Context, scope runtime.Scope, e *a2a.EnvelopeRecord, bounds a2a.EnvelopeBounds) (a2a.EnvelopeRecord, bool, error) {
	// As []byte, a nil payload is SQL NULL (a nil json.RawMessage would be JSON null).
	payload := []byte(e.Payload)
	tag, err := s.db.Exec(ctx, `
		INSERT INTO a2a_envelopes (tenant_id, project_id, `+envelopeColumns+`, payload_bytes)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT DO NOTHING`,
		scope.TenantID, scope.ProjectID, e.MessageID, e.CorrelationID, e.From, e.To, e.ContentType, e.Digest,
		payload, e.AcceptedAtMs, e.ExpiresAtMs, len(payload))
	if err != nil {
		return a2a.EnvelopeRecord{}, false, translate(err)
	}
	if tag.RowsAffected() == 1 {
		if payload != nil {
			if err := s.boundPayloads(ctx, scope, int64(len(payload)), bounds); err != nil {
				return a2a.EnvelopeRecord{}, false, err
			}
		}
		return *e, true, nil
	}
	stored, err := s.GetEnvelope(ctx, scope, e.MessageID)
	return stored, false, err
}

// boundPayloads adds a payload of size bytes to the scope's totals and, while they
// exceed bounds, drops the oldest payloads (by accepted_at_ms, then message_id) in
// batches by the a2a_envelopes_payloads index, keeping their idempotency records.
func (s *EnvelopeStore) boundPayloads(ctx context.Context, scope runtime.Scope, size int64, bounds a2a.EnvelopeBounds) error {
	var payloads, total int64
	if err := s.db.QueryRow(ctx, `
		INSERT INTO a2a_envelope_payloads AS t (tenant_id, project_id, payloads, payload_bytes) VALUES ($1, $2, 1, $3)
		ON CONFLICT (tenant_id, project_id) DO UPDATE
		SET payloads = t.payloads + 1, payload_bytes = t.payload_bytes + $3
		RETURNING payloads, payload_bytes`, scope.TenantID, scope.ProjectID, size).Scan(&payloads, &total); err != nil {
		return translate(err)
	}
	for payloads > int64(bounds.MaxPayloads) || total > bounds.MaxBytes {
		// Enough for the count at once; the bytes may take more batches.
		batch := max(payloads-int64(bounds.MaxPayloads), 64)
		var dropped int64
		if err := s.db.QueryRow(ctx, `
			WITH oldest AS (
				SELECT message_id FROM a2a_envelopes
				WHERE tenant_id = $1 AND project_id = $2 AND payload IS NOT NULL
				ORDER BY accepted_at_ms, message_id
				LIMIT $3
			), sized AS (
				SELECT o.message_id, e.payload_bytes,
				       sum(e.payload_bytes) OVER (ORDER BY e.accepted_at_ms, e.message_id) - e.payload_bytes AS before,
				       row_number() OVER (ORDER BY e.accepted_at_ms, e.message_id) - 1 AS rank
				FROM oldest o JOIN a2a_envelopes e ON e.tenant_id = $1 AND e.project_id = $2 AND e.message_id = o.message_id
			), dropped AS (
				UPDATE a2a_envelopes e SET payload = NULL, payload_bytes = 0
				FROM sized
				WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.message_id = sized.message_id
				  AND (sized.rank < $4 OR sized.before < $5)
				RETURNING sized.payload_bytes
			)
			SELECT count(*), coalesce(sum(payload_bytes), 0) FROM dropped`,
			scope.TenantID, scope.ProjectID, batch, payloads-int64(bounds.MaxPayloads), total-bounds.MaxBytes).
			Scan(&dropped, &size); err != nil {
			return translate(err)
		}
		if dropped == 0 {
			break
		}
		if err := s.db.QueryRow(ctx, `
			UPDATE a2a_envelope_payloads SET payloads = payloads - $3, payload_bytes = payload_bytes - $4
			WHERE tenant_id = $1 AND project_id = $2
			RETURNING payloads, payload_bytes`, scope.TenantID, scope.ProjectID, dropped, size).Scan(&payloads, &total); err != nil {
			return translate(err)
		}
	}
	return nil
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

// PurgeEnvelopes implements a2a.EnvelopeStore, by the expiry index, taking the
// payloads it deletes off the scope's totals in the same statement.
func (s *EnvelopeStore) PurgeEnvelopes(ctx context.Context, scope runtime.Scope, expiredBeforeMs, acceptedBeforeMs int64, limit int) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, `
		WITH deleted AS (
			DELETE FROM a2a_envelopes e
			USING (SELECT message_id FROM a2a_envelopes
			       WHERE tenant_id = $1 AND project_id = $2 AND expires_at_ms < $3 AND accepted_at_ms < $4
			       ORDER BY expires_at_ms LIMIT $5) d
			WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.message_id = d.message_id
			RETURNING e.payload IS NOT NULL AS stored, e.payload_bytes
		), totals AS (
			UPDATE a2a_envelope_payloads
			SET payloads = payloads - (SELECT count(*) FROM deleted WHERE stored),
			    payload_bytes = payload_bytes - (SELECT coalesce(sum(payload_bytes), 0) FROM deleted)
			WHERE tenant_id = $1 AND project_id = $2 AND EXISTS (SELECT 1 FROM deleted WHERE stored)
		)
		SELECT count(*) FROM deleted`,
		scope.TenantID, scope.ProjectID, expiredBeforeMs, acceptedBeforeMs, limit).Scan(&n)
	if err != nil {
		return 0, translate(err)
	}
	return n, nil
}
