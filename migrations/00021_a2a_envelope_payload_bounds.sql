-- +goose Up
-- Stored handoff_bundle and context_package payloads are bounded per scope
-- (docs/a2a-protocol.md, "Stored payloads"): at most AGENT_CONTEXT_A2A_MAX_ENVELOPES
-- payloads and 1 GiB of them, the oldest dropped first. The idempotency record of an
-- envelope whose payload was dropped stays (its digest still answers a replay), so
-- only the payload goes. a2a_envelope_payloads holds each scope's running totals, kept
-- by the statements that store, drop and purge payloads, so that an insert knows
-- whether the scope is over its bounds without counting; its row lock serializes the
-- stores of one scope. a2a_envelopes_payloads finds the oldest payloads of a scope.
ALTER TABLE a2a_envelopes ADD COLUMN payload_bytes bigint NOT NULL DEFAULT 0;
UPDATE a2a_envelopes SET payload_bytes = octet_length(payload::text) WHERE payload IS NOT NULL;

CREATE TABLE a2a_envelope_payloads (
    tenant_id      text   NOT NULL,
    project_id     text   NOT NULL,
    payloads       bigint NOT NULL,
    payload_bytes  bigint NOT NULL,
    PRIMARY KEY (tenant_id, project_id)
);
INSERT INTO a2a_envelope_payloads (tenant_id, project_id, payloads, payload_bytes)
SELECT tenant_id, project_id, count(*), sum(payload_bytes) FROM a2a_envelopes
WHERE payload IS NOT NULL GROUP BY tenant_id, project_id;

CREATE INDEX a2a_envelopes_payloads ON a2a_envelopes (tenant_id, project_id, accepted_at_ms, message_id)
    WHERE payload IS NOT NULL;

-- +goose Down
DROP INDEX a2a_envelopes_payloads;
DROP TABLE a2a_envelope_payloads;
ALTER TABLE a2a_envelopes DROP COLUMN payload_bytes;
