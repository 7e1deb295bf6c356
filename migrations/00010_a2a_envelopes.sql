-- +goose Up
-- Envelopes accepted by POST /internal/v1/a2a/handoff (docs/a2a-protocol.md). One row
-- per message_id is the idempotency record: a replay finds it and answers the first
-- ack. digest is the SHA-256 of the envelope's canonical form without its signature.
-- payload is kept for the opaque content types (handoff_bundle, context_package) only;
-- messages and tasks carried by an envelope live in their own tables.
-- expires_at_ms is ts + ttl_ms; the sweeper deletes a row once it has expired and is
-- older than the event retention (a2a_envelopes_expiry serves it).
CREATE TABLE a2a_envelopes (
    tenant_id       text    NOT NULL,
    project_id      text    NOT NULL,
    message_id      text    NOT NULL,
    correlation_id  text    NOT NULL,
    from_agent      text    NOT NULL,
    to_agent        text    NOT NULL,
    content_type    text    NOT NULL CHECK (content_type IN ('a2a_message', 'a2a_task', 'handoff_bundle',
                                'context_package')),
    digest          text    NOT NULL,
    payload         jsonb,
    accepted_at_ms  bigint  NOT NULL,
    expires_at_ms   bigint  NOT NULL,
    PRIMARY KEY (tenant_id, project_id, message_id)
);

CREATE INDEX a2a_envelopes_expiry ON a2a_envelopes (tenant_id, project_id, expires_at_ms);

-- +goose Down
DROP TABLE a2a_envelopes;
